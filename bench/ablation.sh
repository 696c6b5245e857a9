#!/usr/bin/env bash
# The paper's comparisons at small scale, with equal step budgets (docs/results.md):
#   A. short clips: dense vs dsa (quality should be close);
#   B. long clips:  dsa vs window (Swin) vs dsa_fixed (temporal consistency),
# on the built-in synthetic motion and on Moving-MNIST. Every run trains the tiny model (configs/tiny-*.json)
# from the same seed for the same number of steps, samples clips from the same prompts and seeds, and scores
# them with `megaslide eval`. Prints one Markdown table; raw results under OUT.
#
# Usage: bench/ablation.sh [OUT] (default runs/ablation). Environment overrides: STEPS (training steps per run),
# SAMPLES (clips per run), SAMPLE_STEPS (Euler steps), SHORT_FRAMES, LONG_FRAMES, SIZE (pixels), BIN (binary).
# Needs a Release build in build/ (the README's first command) and tools/setup.sh (MNIST digits).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/ablation}
steps=${STEPS:-300}
samples=${SAMPLES:-4}
sample_steps=${SAMPLE_STEPS:-20}
short_frames=${SHORT_FRAMES:-4}
long_frames=${LONG_FRAMES:-12}
size=${SIZE:-24}
bin=${BIN:-./build/megaslide}
mkdir -p "$out"
results="$out/results.jsonl"
: > "$results"

# run NAME ATTENTION DATA FRAMES SIZE: train, sample SAMPLES clips, eval each; appends one JSON line per clip.
run() {
  local name=$1 attention=$2 data=$3 frames=$4 size=$5
  local dir="$out/$name"
  if [ ! -e "$dir/latest" ]; then
    "$bin" -q train --model tiny --config "configs/tiny-$attention.json" --data "$data" --frames "$frames" \
      --height "$size" --width "$size" --steps "$steps" --save-every "$steps" --out "$dir" > "$dir.train.log" 2>&1
  fi
  local loss
  loss=$(tail -n 20 "$dir/metrics.jsonl" | python3 -c 'import sys, json; l=[json.loads(x)["loss"] for x in sys.stdin]; print(sum(l)/len(l))')
  for i in $(seq 1 "$samples"); do
    local prompt expect=""
    if [ "$data" = synthetic ]; then
      local dirs=(left right up down) colours=(red green blue yellow)
      local d=${dirs[$(( (i - 1) % 4 ))]}
      prompt="${colours[$(( (i - 1) % 4 ))]} square moving $d"
      expect="--expect-direction $d"
    else
      prompt="digits $(( i % 10 )) and $(( (i * 3) % 10 ))"
    fi
    local clip="$dir/sample-$i.gif"
    "$bin" -q sample --model "$dir/latest" --prompt "$prompt" --frames "$frames" --height "$size" --width "$size" \
      --steps "$sample_steps" --seed "$i" --out "$clip"
    # shellcheck disable=SC2086
    "$bin" -q eval "$clip" $expect --json |
      python3 -c 'import sys, json; r=json.load(sys.stdin); r=r[0] if isinstance(r, list) else r
print(json.dumps({"run": sys.argv[1], "attention": sys.argv[2], "data": sys.argv[3], "frames": int(sys.argv[4]), "loss": float(sys.argv[5]), "metrics": r}))' \
        "$name" "$attention" "$data" "$frames" "$loss" >> "$results"
  done
}

# A. short clips: dense vs dsa.
for data in synthetic moving-mnist; do
  for att in dense dsa; do run "short-$data-$att" "$att" "$data" "$short_frames" "$size"; done
done
# B. long clips: dsa vs window vs dsa_fixed.
for data in synthetic moving-mnist; do
  for att in dsa window dsa_fixed; do run "long-$data-$att" "$att" "$data" "$long_frames" "$size"; done
done

python3 - "$results" "$steps" "$size" <<'EOF'
import json, sys, collections
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows.setdefault(r["run"], []).append(r)
keys = ["temporal_flickering", "subject_consistency_ssim", "warping_error", "dynamic_degree_score", "motion_direction_accuracy"]
present = [k for k in keys if any(k in x["metrics"] for v in rows.values() for x in v)]
print(f"steps per run: {sys.argv[2]}; {sys.argv[3]}x{sys.argv[3]} pixels; metrics are means over the sampled clips\n")
print("| run | attention | data | frames | final loss | " + " | ".join(present) + " |")
print("|" + "---|" * (5 + len(present)))
for name, v in rows.items():
    def mean(k):
        xs = [float(x["metrics"][k]) for x in v if k in x["metrics"]]
        return f"{sum(xs) / len(xs):.4f}" if xs else "-"
    r = v[0]
    print(f"| {name} | {r['attention']} | {r['data']} | {r['frames']} | {r['loss']:.4f} | " + " | ".join(mean(k) for k in present) + " |")
EOF
