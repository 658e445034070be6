#!/usr/bin/env bash
# Decode throughput of zaya (CCA cache, batched steps) against the memory-bandwidth bound and the
# PyTorch reference without a cache (bench/decode_torch.py), on the same random model, prompt,
# new tokens and batch sizes, in one run, same threads.
# Usage: bench/decode_vs_pytorch.sh [CONFIG] [PROMPT] [NEW_TOKENS] [BATCHES] [THREADS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/small.json}
PROMPT=${2:-128}
NEW=${3:-64}
BATCHES=${4:-1,16}
THREADS=${5:-$(nproc)}
ZAYA=${ZAYA:-$ROOT/build/zaya}
[[ -x $ZAYA ]] || { echo "build zaya first: cmake --preset default && cmake --build build" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$ZAYA" --threads "$THREADS" bench decode --config "$CONFIG" --prompt "$PROMPT" --new-tokens "$NEW" \
  --batch-list "$BATCHES" --save-model "$WORK/model" --json "$WORK/zaya.json"
# The peer computes with the kernels zaya chose.
kernels=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["blas_kernels"])' "$WORK/zaya.json")
IFS=, read -ra bs <<< "$BATCHES"
for b in "${bs[@]}"; do
  OPENBLAS_CORETYPE=$kernels OMP_NUM_THREADS=$THREADS /usr/bin/python3 "$ROOT/bench/decode_torch.py" --model "$WORK/model" \
    --batch "$b" --prompt "$PROMPT" --new-tokens "$NEW" --threads "$THREADS" >> "$WORK/torch.jsonl"
done
/usr/bin/python3 - "$WORK/zaya.json" "$WORK/torch.jsonl" <<'PY'
import json, sys
z = json.load(open(sys.argv[1]))
t = {r["batch"]: r for r in map(json.loads, open(sys.argv[2]))}
first = next(iter(t.values()))
print(f"peer: PyTorch {first['torch_version']} on {first['blas'] or 'a BLAS that is not OpenBLAS'}"
      + ("" if first["openblas"] else "  WARNING: not OpenBLAS, run scripts/setup.sh"))
print(f"BLAS kernels: zaya {z['blas_kernels']}, pytorch {first.get('blas_kernels')}"
      + ("" if first.get("blas_kernels") == z["blas_kernels"] else "  WARNING: different kernels"))
print(f"{'batch':>5} {'zaya tok/s':>11} {'bound':>8} {'of bound':>8} {'pytorch':>9} {'zaya/pytorch':>12}"
      f" {'ttft zaya':>10} {'ttft torch':>10}")
for r in z["rows"]:
    p = t[r["batch"]]
    print(f"{r['batch']:>5} {r['tokens_per_s']:>11.1f} {r['bound_tokens_per_s']:>8.0f}"
          f" {100 * r['tokens_per_s'] / r['bound_tokens_per_s']:>7.0f}% {p['tokens_per_s']:>9.1f}"
          f" {r['tokens_per_s'] / p['tokens_per_s']:>11.1f}x {r['ttft_ms']:>8.1f}ms {p['ttft_ms']:>8.1f}ms")
print(f"cache: {z['cache_bytes_per_token']} bytes per token; grouped-query attention over the hidden "
      f"size {z['gqa_cache_bytes_per_token']}, multi-head {z['mha_cache_bytes_per_token']}")
PY
