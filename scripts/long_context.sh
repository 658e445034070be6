#!/usr/bin/env bash
# The long-context phase end to end: configs/small-long.json (the demo model, 1k -> 4k -> 32k
# tokens with RoPE base 1e4 -> 1e6) on the Brown corpus at mpirun -np 2 with context parallel 2,
# then the validation loss on 32k-token windows of held-out text before phase 3 (the step-56
# checkpoint, at both RoPE bases) and after it, and each phase's validation loss and tokens/s.
# Usage: scripts/long_context.sh [RUN_DIR]   (data/ as scripts/main.sh prepares it)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:-runs/small-long-$(date +%Y%m%d-%H%M%S)}
ZAYA=./build/zaya
MPI=(mpirun -np 2 --oversubscribe --allow-run-as-root)
[[ -x $ZAYA ]] || { echo "build zaya first (cmake --preset default && cmake --build build)"; exit 1; }
if [[ ! -f data/brown/index.json ]]; then
  [[ -f data/tokenizer.json ]] ||
    $ZAYA tokenizer train --input data/raw/brown.txt --vocab-size 4096 --out data/tokenizer.json
  $ZAYA data prepare --tokenizer data/tokenizer.json --input data/raw/brown.txt --name brown \
    --out data
fi
"${MPI[@]}" $ZAYA --threads 1 train --config configs/small-long.json --out "$RUN" --no-progress
eval32k() {  # eval32k CHECKPOINT THETA
  "${MPI[@]}" $ZAYA --threads 1 eval --model "$1" --config configs/small-long.json --phase 32k \
    --rope-theta "$2" --windows 4 --context-parallel 2
}
before=$RUN/ckpt/step-00000056
{
  echo "{\"when\": \"before phase 3, RoPE 1e4\", \"r\": $(eval32k "$before" 10000)}"
  echo "{\"when\": \"before phase 3, RoPE 1e6\", \"r\": $(eval32k "$before" 1000000)}"
  echo "{\"when\": \"after phase 3, RoPE 1e6\", \"r\": $(eval32k "$RUN/ckpt" 1000000)}"
} > "$RUN/eval32k.jsonl"
python3 - "$RUN" <<'PY'
import json, sys
run = sys.argv[1]
rows = [json.loads(l) for l in open(run + "/metrics.jsonl")]
print(f"\n{'phase':>6} {'steps':>9} {'seq_len':>8} {'val loss (end)':>15} {'tokens/s':>9}")
for name in dict.fromkeys(r["phase"] for r in rows):
    ph = [r for r in rows if r["phase"] == name]
    vals = [r["val_loss"] for r in ph if "val_loss" in r]
    tps = sum(r["step_tokens"] for r in ph) / sum(r["step_tokens"] / r["tokens_per_s"] for r in ph)
    print(f"{name:>6} {ph[0]['step']:>4}-{ph[-1]['step']:<4} {ph[0]['seq_len']:>8} "
          f"{vals[-1] if vals else float('nan'):>15.4f} {tps:>9.0f}")
print("\nloss on 32k-token windows of held-out text:")
for l in open(run + "/eval32k.jsonl"):
    e = json.loads(l)
    print(f"  {e['when']:<26} {e['r']['val_loss']:.4f}  ({e['r']['tokens']} tokens)")
PY
