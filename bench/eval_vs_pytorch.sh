#!/usr/bin/env bash
# Items/s of `zaya eval --tasks` on a 4-choice task (which of four sentences follows two given
# ones, from Brown) against the PyTorch reference scoring each context + choice in its own forward
# (bench/eval_torch.py, as lm-eval's Hugging Face model does without a shared context), on the same
# random model, tokenizer and items, same threads, in one run. zaya prefills each context once,
# forks it for the choices and decodes all choices of several items in batched steps. Also prints
# the largest relative difference of the two sides' log-likelihoods.
# Usage: bench/eval_vs_pytorch.sh [CONFIG] [ITEMS] [THREADS]   (CONFIG: default configs/small.json)
# VECTOR_PATHS="avx512 avx2 baseline" runs zaya's side on each CPU vector path (docs/cpu-paths.md)
# in turn, printing each one's items/s and whether its --log-samples are byte-identical to the
# first path's; by default the path auto takes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/small.json}
ITEMS=${2:-40}
THREADS=${3:-$(nproc)}
ZAYA=${ZAYA:-$ROOT/build/zaya}
BROWN=${ZAYA_BROWN_TEXT:-$ROOT/data/raw/brown.txt}
[[ -x $ZAYA ]] || { echo "build zaya first: cmake --preset default && cmake --build build" >&2; exit 1; }
[[ -s $BROWN ]] || { echo "$BROWN is missing: run scripts/setup.sh" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

vocab=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["model"]["vocab_size"])' "$CONFIG" 2> /dev/null ||
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$CONFIG")
head -c 400000 "$BROWN" > "$WORK/brown.txt"
"$ZAYA" tokenizer train --input "$WORK/brown.txt" --vocab-size "$vocab" --out "$WORK/tokenizer.json" > /dev/null 2>&1
"$ZAYA" debug-dump --config "$CONFIG" --seed 1 --out "$WORK/dump" > /dev/null
/usr/bin/python3 "$ROOT/scripts/next_sentence_task.py" "$WORK/brown.txt" "$WORK/task.jsonl" --items "$ITEMS" > /dev/null

PATHS=(${VECTOR_PATHS:-auto})
for p in "${PATHS[@]}"; do
  "$ZAYA" --threads "$THREADS" --vector-path "$p" eval --model "$WORK/dump/model" \
    --tokenizer "$WORK/tokenizer.json" --tasks "$WORK/task.jsonl" \
    --log-samples "$WORK/samples-$p.jsonl" > "$WORK/zaya-$p.json"
  chosen=$("$ZAYA" --vector-path "$p" info --config "$CONFIG" | sed -n 's/^  chosen: *//p')
  same=$(cmp -s "$WORK/samples-$p.jsonl" "$WORK/samples-${PATHS[0]}.jsonl" && echo "byte-identical" || echo "DIFFERENT")
  rate=$(/usr/bin/python3 -c 'import json, sys; print("%.2f" % json.load(open(sys.argv[1]))["config"]["items_per_second"])' "$WORK/zaya-$p.json")
  echo "zaya on vector path $chosen: $rate items/s, --log-samples $same to ${PATHS[0]}'s"
done
cp "$WORK/zaya-${PATHS[0]}.json" "$WORK/zaya.json"
cp "$WORK/samples-${PATHS[0]}.jsonl" "$WORK/samples.jsonl"
OMP_NUM_THREADS=$THREADS /usr/bin/python3 "$ROOT/bench/eval_torch.py" --zaya "$ZAYA" \
  --model "$WORK/dump/model" --tokenizer "$WORK/tokenizer.json" --task "$WORK/task.jsonl" \
  --threads "$THREADS" > "$WORK/torch.json"
/usr/bin/python3 - "$WORK/zaya.json" "$WORK/torch.json" "$WORK/samples.jsonl" "$CONFIG" "$THREADS" <<'PY'
import json, sys
z, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
samples = [json.loads(line) for line in open(sys.argv[3])]
worst = max(abs(a - b) / abs(b) for s, row in zip(samples, t["loglikelihoods"])
            for a, b in zip(s["loglikelihoods"], row))
zi = z["config"]["items_per_second"]
print(f"config {sys.argv[4]}, {t['items']} items of 4 choices, {sys.argv[5]} threads, PyTorch {t['torch_version']}")
print(f"zaya eval --tasks  {zi:8.2f} items/s")
print(f"pytorch reference  {t['items_per_s']:8.2f} items/s (one forward per context + choice)")
print(f"zaya/pytorch       {zi / t['items_per_s']:8.2f}x   (log-likelihoods agree to {worst:.1e} relative)")
PY
if ((${#PATHS[@]} > 1)); then
  for p in "${PATHS[@]}"; do
    /usr/bin/python3 -c 'import json, sys
z, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("zaya on %-9s %8.2f items/s, %5.2fx the pytorch reference" % (sys.argv[3] + ":", z["config"]["items_per_second"], z["config"]["items_per_second"] / t["items_per_s"]))' \
      "$WORK/zaya-$p.json" "$WORK/torch.json" "$p"
  done
fi
