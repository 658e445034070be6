#!/usr/bin/env bash
# The GPU training-step benchmark of issue 12 (docs/gpu.md), on one GPU, in phases that each end
# by a deadline, so that what matters most comes back first from a 10-minute command:
#   zaya     `bench step --device DEVICE --precision bf16` (forward + backward), the same with
#            --optimizer for the optimizer's share (AdamW + Muon), and the cuBLASLt bf16 rate on
#            the model's own products (`bench gemm --shapes model:CONFIG`), the ceiling zaya's
#            GEMMs could reach on this GPU
#   torch    writes the benchmarked weights (5.5 GB for the depth-8 config, after zaya's figures)
#            and runs the PyTorch reference (tests/reference/bench_torch.py) on them, the same
#            batch shape: bf16 autocast, fused attention, eager
#   compile  the same with torch.compile (optional: a failure or a timeout leaves eager alone)
#   summary  prints what the phases so far measured: tokens/s and MFU (tokens/s × training FLOPs
#            per token, 6·active parameters + attention, model/model_info.h) against PEAK_TFLOPS
#            and against the measured cuBLAS rate, memory, the ratio of zaya to the faster
#            PyTorch, the optimizer's share
#   all      the four in order (the default)
# Usage: bench/gpu_step_vs_pytorch.sh [CONFIG] [BATCH] [SEQ] [STEPS]
#   defaults: configs/zaya1-base-depth8.json 4 4096 10. Environment: ZAYA (default build/zaya,
#   or the bundle's through scripts/gpu_env.sh), PYTHON (with torch), DEVICE (cuda; cuda-emu in the
#   rehearsal, whose PyTorch peer runs on the CPU in fp32), BENCH_PHASE, BENCH_WORK (the folder
#   that keeps the results between phases; default a temporary one), BENCH_DEADLINE (epoch
#   seconds by which each command must end; default an hour from now).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/zaya1-base-depth8.json}
BATCH=${2:-4}
SEQ=${3:-4096}
STEPS=${4:-10}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}  # dense bf16 of the H100 SXM; set it for other GPUs
DEVICE=${DEVICE:-cuda}
PHASE=${BENCH_PHASE:-all}
DEADLINE=${BENCH_DEADLINE:-$(($(date +%s) + 3600))}
ZAYA=${ZAYA:-$ROOT/build/zaya}
if [[ ! -x $ZAYA && -f $ROOT/.gpu-bundle/manifest ]]; then  # the bundle and its libraries
  source "$ROOT/scripts/gpu_env.sh"
  ZAYA=$ZAYA_GPU_BIN/zaya
fi
PYTHON=${PYTHON:-python3}
[[ -x $ZAYA ]] || { echo "no zaya: build it, or set ZAYA" >&2; exit 1; }
case $PHASE in zaya | torch | compile | summary | all) ;; *)
  echo "BENCH_PHASE must be zaya, torch, compile, summary or all, not '$PHASE'" >&2; exit 2 ;;
esac
if [[ -n ${BENCH_WORK:-} ]]; then
  WORK=$BENCH_WORK; mkdir -p "$WORK"
else
  WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
fi
CONFIG=$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")
cd "$WORK"
rc=0
# bounded SECONDS command...: the command under timeout, ending by the deadline at the latest.
bounded() {
  local cap=$1 left=$((DEADLINE - $(date +%s)))
  shift
  ((cap > left)) && cap=$left
  ((cap >= 5)) || { echo "no time left for: $*" >&2; return 124; }
  timeout --kill-after=5 "$cap" "$@"
}
torch_args=(--model "$WORK/model" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup 2)
if [[ $DEVICE == cuda ]]; then
  torch_args+=(--threads 8 --device cuda --bf16 --attention sdpa)
else  # the rehearsal: PyTorch on the CPU in fp32 (its CPU build may predate sdpa)
  torch_args+=(--threads "$(nproc)" --device cpu)
fi

if [[ $PHASE == zaya || $PHASE == all ]]; then
  echo "config $CONFIG, batch $BATCH x seq $SEQ, $STEPS timed steps after 2 warm-up, on $DEVICE"
  # The LM head and loss in blocks: ZAYA1's vocabulary would make [tokens x 262,272] fp32 logits.
  common=(bench step --device "$DEVICE" --precision bf16 --config "$CONFIG" --batch "$BATCH"
    --seq "$SEQ" --steps "$STEPS" --warmup 2 --lm-head-chunks 4096,32768 --json)
  rm -f zaya.json zaya_opt.json gemm.json
  { bounded 300 "$ZAYA" "${common[@]}" > zaya.json.part && mv zaya.json.part zaya.json; } || rc=1
  { bounded 300 "$ZAYA" "${common[@]}" --optimizer > zaya_opt.json.part &&
    mv zaya_opt.json.part zaya_opt.json; } || rc=1
  bounded 120 "$ZAYA" bench gemm --device "$DEVICE" --dtype bf16 --shapes "model:$CONFIG" \
    --batch "$BATCH" --seq "$SEQ" --min-time 0.2 --json gemm.json > /dev/null || rc=1
fi
if [[ $PHASE == torch || $PHASE == all ]]; then
  [[ -f zaya.json ]] || { echo "torch: zaya's figures are missing (the zaya phase did not finish)" >&2; exit 1; }
  # The same weights as zaya's run (the same seed), written by a one-step run.
  rm -rf model torch_eager.json
  bounded 240 "$ZAYA" bench step --device "$DEVICE" --precision bf16 --config "$CONFIG" --batch 1 \
    --seq 8 --steps 1 --warmup 0 --save-model "$WORK/model" > save.log 2>&1 ||
    { cat save.log; exit 1; }
  { bounded 300 "$PYTHON" "$ROOT/tests/reference/bench_torch.py" "${torch_args[@]}" \
    > torch_eager.json.part && mv torch_eager.json.part torch_eager.json; } || rc=1
fi
if [[ $PHASE == compile || $PHASE == all ]]; then
  [[ -d model ]] || { echo "compile: no saved model (the torch phase did not finish)" >&2; exit 1; }
  rm -f torch_compile.json
  if bounded 600 "$PYTHON" "$ROOT/tests/reference/bench_torch.py" "${torch_args[@]}" --compile \
    > torch_compile.json.part 2> torch_compile.err; then
    mv torch_compile.json.part torch_compile.json
  else
    echo "torch.compile did not finish (the end of its error is below); eager stands alone"
    tail -3 torch_compile.err
    rc=1
  fi
  rm -rf model  # 5.5 GB for the depth-8 config
fi
[[ $PHASE == summary || $PHASE == all ]] || exit $rc
"$PYTHON" - "$PEAK_TFLOPS" <<'PY'
import json, os, sys
peak = float(sys.argv[1]) * 1e12
if not os.path.exists("zaya.json"):
    sys.exit("no zaya figures: the zaya phase did not finish")
z = json.load(open("zaya.json"))
cublas = None
if os.path.exists("gemm.json"):
    g = json.load(open("gemm.json"))
    flops = sum(2.0 * r["m"] * r["n"] * r["k"] * r["count"] for r in g["results"])
    cublas = flops / sum(r["seconds"] * r["count"] for r in g["results"])
fpt = z["train_flops_per_token"]
def line(name, tps, mem, what):
    achieved = tps * fpt
    of_cublas = f"{100 * achieved / cublas:5.1f} % of cuBLAS" if cublas else "(no cuBLAS rate)"
    memory = f"memory {mem / 2**30:6.2f} GiB {what}" if mem is not None else "(host memory)"
    print(f"{name:<26} {tps:>10.0f} tok/s  MFU {100 * achieved / peak:5.1f} % of "
          f"{peak / 1e12:.0f} TFLOP/s, {of_cublas}  {memory}")
print(f"device: {z['device']}")
if cublas:
    print(f"GEMM bf16 on the model's products: {cublas / 1e12:.1f} TFLOP/s "
          f"({100 * cublas / peak:.0f} % of the {peak / 1e12:.0f} TFLOP/s peak)")
print(f"training FLOPs per token: {fpt / 1e9:.4g} GFLOP")
line("zaya (fwd+bwd)", z["tokens_per_s"], z["device_memory_bytes"], "in use (with the CUDA context)")
peers = {}
for kind in ("eager", "compile"):
    if os.path.exists(f"torch_{kind}.json"):
        t = json.load(open(f"torch_{kind}.json"))
        peers[kind] = t["tokens_per_s"]
        line(f"pytorch {t['torch_version']} {kind} ({t['device']})", t["tokens_per_s"],
             t["peak_memory_bytes"], "peak allocated")
if peers:
    best = max(peers, key=peers.get)
    print(f"ratio zaya / pytorch {best} (the faster): {z['tokens_per_s'] / peers[best]:.2f}x")
if os.path.exists("zaya_opt.json"):
    zo = json.load(open("zaya_opt.json"))
    print(f"optimizer (AdamW + Muon on the device): {zo['optimizer_ms']:.1f} ms of a "
          f"{zo['step_ms']:.1f} ms step ({100 * zo['optimizer_ms'] / zo['step_ms']:.1f} %)")
PY
exit $rc
