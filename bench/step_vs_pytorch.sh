#!/usr/bin/env bash
# Forward+backward throughput of zaya against the PyTorch reference (tests/reference/zaya_torch.py)
# on the same config, the same random model and the same batch shape, in one run, same threads.
# Usage: bench/step_vs_pytorch.sh [CONFIG] [BATCH] [SEQ] [STEPS] [THREADS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/small.json}
BATCH=${2:-8}
SEQ=${3:-256}
STEPS=${4:-5}
THREADS=${5:-$(nproc)}
ZAYA=${ZAYA:-$ROOT/build/zaya}
[[ -x $ZAYA ]] || { echo "build zaya first: cmake --preset default && cmake --build build" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "config $CONFIG, batch $BATCH x seq $SEQ, $STEPS timed steps after 1 warm-up, $THREADS threads"
zaya_json=$("$ZAYA" --threads "$THREADS" bench step --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" \
  --steps "$STEPS" --warmup 1 --save-model "$WORK/model" --json)
# The peer computes with the kernels zaya chose (zaya picks them at start-up; PyTorch's OpenBLAS
# would take its own, which on a CPU it does not know are its slowest).
kernels=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["blas_kernels"])' "$zaya_json")
torch_json=$(OPENBLAS_CORETYPE=$kernels OMP_NUM_THREADS=$THREADS /usr/bin/python3 "$ROOT/tests/reference/bench_torch.py" \
  --model "$WORK/model" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup 1 --threads "$THREADS")
echo "zaya:    $zaya_json"
echo "pytorch: $torch_json"
/usr/bin/python3 - "$zaya_json" "$torch_json" <<'PY'
import json, sys
z, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if not t.get("openblas"):
    print(f"WARNING: PyTorch is not running on OpenBLAS (blas: {t.get('blas')}); the peer is not at "
          "its best. Run scripts/setup.sh to select the OpenBLAS libblas.so.3.")
else:
    print(f"peer BLAS: {t['blas']} (OpenBLAS)")
print(f"BLAS kernels: zaya {z['blas_kernels']}, pytorch {t.get('blas_kernels')}"
      + ("" if t.get("blas_kernels") == z["blas_kernels"] else
         "  WARNING: the two ran different kernels, the ratio compares more than the code"))
print(f"zaya {z['tokens_per_s']:.0f} tok/s, pytorch {t['tokens_per_s']:.0f} tok/s, "
      f"ratio zaya/pytorch = {z['tokens_per_s'] / t['tokens_per_s']:.2f}x")
PY
