#!/usr/bin/env bash
# The GPU training-step benchmark of issue 12 (docs/gpu.md), on one GPU, in one run:
#  - zaya: `bench step --device cuda --precision bf16` (forward + backward) on CONFIG, then the same
#    with --optimizer for the optimizer's share (AdamW + Muon);
#  - the cuBLASLt bf16 rate on the model's own products (`bench gemm --device cuda --dtype bf16
#    --shapes model:CONFIG`), the ceiling zaya's GEMMs could reach on this GPU;
#  - the PyTorch reference (tests/reference/zaya_torch.py) on the same GPU, the same weights and
#    batch shape, bf16 autocast with fused attention, eager and torch.compile;
#  - MFU = tokens/s × training FLOPs per token (6·active parameters + attention, model/model_info.h)
#    against 989 TFLOP/s (H100 SXM dense bf16) and against the measured cuBLAS rate; the GPU
#    memory of each; the ratio of zaya to the faster PyTorch.
# Usage (on the GPU machine, e.g. from scripts/gpu_bundle.sh's bundle):
#   bench/gpu_step_vs_pytorch.sh [CONFIG] [BATCH] [SEQ] [STEPS]
#   defaults: configs/zaya1-base-depth8.json 4 4096 10; ZAYA=path/to/zaya, PYTHON=python with torch
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/zaya1-base-depth8.json}
BATCH=${2:-4}
SEQ=${3:-4096}
STEPS=${4:-10}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}  # dense bf16 of the H100 SXM; set it for other GPUs
ZAYA=${ZAYA:-$ROOT/build/zaya}
if [[ ! -x $ZAYA && -x $ROOT/.gpu-bundle/bin/zaya ]]; then  # the bundle and its libraries
  ZAYA=$ROOT/.gpu-bundle/bin/zaya
  source "$ROOT/scripts/gpu_env.sh"
fi
PYTHON=${PYTHON:-python3}
[[ -x $ZAYA ]] || { echo "no zaya: build it, or set ZAYA" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

echo "config $CONFIG, batch $BATCH x seq $SEQ, $STEPS timed steps after 2 warm-up"
# The LM head and loss in blocks: ZAYA1's vocabulary would make [tokens x 262,272] fp32 logits.
common=(bench step --device cuda --precision bf16 --config "$CONFIG" --batch "$BATCH" --seq "$SEQ"
  --steps "$STEPS" --warmup 2 --lm-head-chunks 4096,32768 --json)
"$ZAYA" "${common[@]}" --save-model "$WORK/model" > zaya.json
"$ZAYA" "${common[@]}" --optimizer > zaya_opt.json
"$ZAYA" bench gemm --device cuda --dtype bf16 --shapes "model:$CONFIG" --batch "$BATCH" \
  --seq "$SEQ" --min-time 0.2 --json gemm.json > /dev/null
torch=(--model "$WORK/model" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup 2 --threads 8
  --device cuda --bf16 --attention sdpa)
"$PYTHON" "$ROOT/tests/reference/bench_torch.py" "${torch[@]}" > torch_eager.json
if ! "$PYTHON" "$ROOT/tests/reference/bench_torch.py" "${torch[@]}" --compile > torch_compile.json \
  2> torch_compile.err; then
  echo "torch.compile failed (its error is below); comparing with eager only"
  tail -5 torch_compile.err
  rm -f torch_compile.json
fi
"$PYTHON" - "$PEAK_TFLOPS" <<'PY'
import json, os, sys
peak = float(sys.argv[1]) * 1e12
z, zo = json.load(open("zaya.json")), json.load(open("zaya_opt.json"))
g = json.load(open("gemm.json"))
flops = sum(2.0 * r["m"] * r["n"] * r["k"] * r["count"] for r in g["results"])
seconds = sum(r["seconds"] * r["count"] for r in g["results"])
cublas = flops / seconds
fpt = z["train_flops_per_token"]
def line(name, tps, mem, what):
    achieved = tps * fpt
    print(f"{name:<26} {tps:>10.0f} tok/s  MFU {100 * achieved / peak:5.1f} % of {peak / 1e12:.0f} TFLOP/s, "
          f"{100 * achieved / cublas:5.1f} % of cuBLAS  memory {mem / 2**30:6.2f} GiB {what}")
print(f"device: {z['device']}")
print(f"cuBLASLt bf16 on the model's products: {cublas / 1e12:.1f} TFLOP/s "
      f"({100 * cublas / peak:.0f} % of the {peak / 1e12:.0f} TFLOP/s peak)")
print(f"training FLOPs per token: {fpt / 1e9:.3f} GFLOP")
line("zaya (fwd+bwd)", z["tokens_per_s"], z["device_memory_bytes"], "in use (with the CUDA context)")
peers = {}
for kind in ("eager", "compile"):
    if os.path.exists(f"torch_{kind}.json"):
        t = json.load(open(f"torch_{kind}.json"))
        peers[kind] = t["tokens_per_s"]
        line(f"pytorch {t['torch_version']} {kind}", t["tokens_per_s"], t["peak_memory_bytes"],
             "peak allocated")
best = max(peers, key=peers.get)
print(f"ratio zaya / pytorch {best} (the faster): {z['tokens_per_s'] / peers[best]:.2f}x")
print(f"optimizer (AdamW + Muon on the GPU): {zo['optimizer_ms']:.1f} ms of a {zo['step_ms']:.1f} ms "
      f"step ({100 * zo['optimizer_ms'] / zo['step_ms']:.1f} %)")
PY
