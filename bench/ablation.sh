#!/usr/bin/env bash
# The paper's comparisons at small scale, over several training seeds (docs/results.md):
#   A. short clips: dense vs dsa: the default job (`megaslide train`: the tiny-t4 model, 4 x 16 x 16 synthetic shapes,
#      6000 steps of 8 clips), once per attention type and seed;
#   B. long clips: dsa vs window (Swin) vs dsa_fixed: 16 x 16 x 16 clips (4 x 8 x 8 tokens), 3000 steps of 4 clips.
# Every model is scored by tools/score-shapes.sh (CLIPS captions of its data, `megaslide sample`'s defaults, seed
# 100 + i); bench/seed_table.py prints the means over seeds with 95 % intervals, and the comparison at matched motion.
# A run whose checkpoint exists is not trained again, nor scored again where its CLIPS scores exist. Raw per-clip
# JSON lines: OUT/results.jsonl.
#
# Usage: bench/ablation.sh [OUT] (default runs/ablation). Environment: SEEDS_A ("0 1 2 3 4"), SEEDS_B ("0 1 2"; empty
# skips a part), CLIPS (32), BIN (./build/megaslide). About 45 minutes for each part on 2 cores (docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/ablation}
seeds_a=${SEEDS_A-0 1 2 3 4}
seeds_b=${SEEDS_B-0 1 2}
clips=${CLIPS:-32}
bin=${BIN:-./build/megaslide}
mkdir -p "$out/configs"
results="$out/results.jsonl"
: > "$results"

# The tiny-t4 preset (the tiny model with a 4 x 2 x 2 patch) with each attention type of configs/tiny-*.json.
for attention in dense dsa window dsa_fixed; do
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["patch_size"] = [4, 2, 2]
json.dump(c, open(sys.argv[2], "w"), indent=1)' \
    "configs/tiny-$attention.json" "$out/configs/t4-$attention.json"
done

# run COMPARISON ATTENTION SEED TRAIN_OPTIONS...: trains (unless done), scores, appends one JSON line per clip.
run() {
  local comparison=$1 attention=$2 seed=$3
  shift 3
  local name="$comparison-$attention-$seed"
  local dir="$out/$name"
  if [ ! -e "$dir/latest" ]; then
    OMP_WAIT_POLICY=passive "$bin" train --config "$out/configs/t4-$attention.json" --seed "$seed" --no-final-samples \
      --out "$dir" "$@" > "$dir.train.log" 2>&1 || { tail -n 5 "$dir.train.log"; exit 1; }
  fi
  local scored=0
  [ -f "$dir-scores/eval.jsonl" ] && scored=$(wc -l < "$dir-scores/eval.jsonl")
  if [ "$scored" != "$clips" ]; then
    MEGASLIDE=$bin tools/score-shapes.sh "$dir/latest" "$dir-scores" "$clips" | sed "s/^/$name: /"
  fi
  python3 - "$dir/metrics.jsonl" "$dir-scores/eval.jsonl" "$comparison" "$attention" "$seed" >> "$results" <<'EOF'
import json, os, sys
metrics, scores, comparison, attention, seed = sys.argv[1:]
losses = [json.loads(l)["loss"] for l in open(metrics)]
tail = losses[len(losses) - max(1, len(losses) // 10):]  # the last 10 % of steps, as train's last log line
for line in open(scores):
    r = json.loads(line)
    clip = os.path.join(os.path.dirname(scores), os.path.basename(r["video"]))  # the caption beside each clip
    caption = open(os.path.splitext(clip)[0] + ".txt").read().strip()
    print(json.dumps({"comparison": comparison, "attention": attention, "seed": int(seed),
                      "final_loss": sum(tail) / len(tail), "caption": caption, **r}))
EOF
}

for seed in $seeds_a; do
  for attention in dense dsa; do run "A-short-clips" "$attention" "$seed"; done
done
for seed in $seeds_b; do
  for attention in dsa window dsa_fixed; do
    run "B-long-clips" "$attention" "$seed" --frames 16 --batch-size 4 --steps 3000
  done
done
python3 bench/seed_table.py "$results"
