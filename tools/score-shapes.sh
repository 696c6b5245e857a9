#!/usr/bin/env bash
# Scores a model trained on the built-in synthetic shapes (docs/results.md): samples N captions of the data (colour,
# shape and direction cycling, seed 100 + i), scores each GIF with `megaslide eval` and prints the fraction of clips
# whose colour, direction and one-shape scores are above one half. COLOURS="orange purple pink" scores the captions
# of --data synthetic-new-colours.
#   tools/score-shapes.sh MODEL_DIR OUT_DIR [N] [sample options...]
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,6p "$0"; exit 2; }
model=$1 out=$2 n=${3:-16}
shift $(($# < 3 ? $# : 3))
bin=${MEGASLIDE:-$(dirname "$0")/../build/megaslide}
read -ra colours <<< "${COLOURS:-red green blue yellow cyan magenta white}"
shapes=(circle square triangle) dirs=(left right up down)
mkdir -p "$out"
for ((i = 0; i < n; i++)); do
  caption="${colours[i % ${#colours[@]}]} ${shapes[i % 3]} moving ${dirs[i % 4]}"
  echo "$caption" > "$out/clip$i.txt"
  "$bin" sample --model "$model" --prompt "$caption" --seed $((100 + i)) --out "$out/clip$i.gif" "$@" 2> "$out/sample.log" ||
    { tail -3 "$out/sample.log"; exit 1; }
done
"$bin" eval "$out"/clip*.gif --json > "$out/eval.jsonl"
python3 - "$out/eval.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def share(key): return sum(1 for r in rows if (r.get(key) or 0) > 0.5)
n = len(rows)
print(f"{n} clips: colour {share('colour_accuracy')}/{n}, direction {share('motion_direction_accuracy')}/{n}, "
      f"one shape {share('one_shape')}/{n}")
EOF
