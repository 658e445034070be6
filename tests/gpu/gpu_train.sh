#!/usr/bin/env bash
# `zaya train --device cuda` end to end (label gpu): a tiny ZAYA1 on 400 KB of the Brown corpus,
# 16 Muon steps, against --device cpu:
#  - every step's loss within TOL relative of the CPU's (the ops agree to 1e-5; 16 optimizer
#    steps carry that further, so the bound is 1e-3);
#  - two GPU runs give bitwise the same losses (no atomics, fixed reduction orders);
#  - a GPU checkpoint resumes on the CPU and a CPU checkpoint on the GPU, ending within TOL of
#    the uninterrupted CPU run;
#  - in bf16 (the GPU's default precision) the last step's loss within 2 % of the CPU's fp32
#    run, and two bf16 runs bitwise the same; the bf16 weight storage bitwise --weight-storage
#    fp32 (with fp32 gradients), and a bf16 run (bf16 Muon gradients) resumes bitwise; bf16
#    activation storage within 2 % of fp32 storage,
#  - and prints the bf16 run's peak of zaya's own device allocations against its memory plan.
# Without a usable GPU it prints why and exits 77, which ctest reports as skipped.
# DEVICE (default cuda): cuda-emu runs the same on the emulated device (label gpu-emu).
# MODE quick (the sanitizer build's gpu-emu.train): only the runs that execute different kernels
# (cpu, fp32 and bf16 on DEVICE), not the repeats and resumes, which run the same kernels again
# and are held in the release build (11 runs under ASan took 390 s, the longest test there).
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; DEVICE=${4:-cuda}; MODE=${5:-full}
TOL=1e-3
PY=/usr/bin/python3
command -v "$PY" > /dev/null || PY=python3  # the GPU machine may have only its own
mkdir -p "$WORK"
# A probe step: skipped only where there is no usable GPU here (the
# registry's "--device NAME: no usable GPU" before anything runs); any other failure of the step,
# a kernel's crash or a wrong launch, is this test's failure.
if ! "$ZAYA" bench step --config "$SRC/configs/tiny.json" --batch 1 --seq 8 --steps 1 --warmup 0 \
    --device "$DEVICE" > "$WORK/probe.log" 2>&1; then
  if grep -q "^zaya: error: --device $DEVICE: no usable GPU" "$WORK/probe.log"; then
    echo "SKIPPED: $(grep -o 'error: .*' "$WORK/probe.log" | head -1)"
    exit 77
  fi
  echo "FAIL the probe step on $DEVICE failed (not a missing device):"; tail -20 "$WORK/probe.log"
  exit 1
fi
source "$SRC/tests/check.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/train/device_run_config.sh"
write_device_run_config "$WORK"
run() {  # run LOG args... [--threads-for-test N: zaya --threads N]
  local log=$1; shift
  local global=() args=()
  while (($#)); do
    if [[ $1 == --threads-for-test ]]; then global=(--threads "$2"); shift 2; else args+=("$1"); shift; fi
  done
  "$ZAYA" "${global[@]}" train --config "$WORK/train.json" --no-progress "${args[@]}" > "$log" 2>&1 \
    || { echo "zaya train ${args[*]} failed:"; cat "$log"; return 1; }
}
losses() { $PY -c "import json,sys; print([r['loss'] for r in map(json.loads, open(sys.argv[1]))])" "$1"; }
close() {  # close A B [TOL [STEPS]]: the first STEPS (default all 16) steps' losses within TOL
  # (default $TOL) relative, printing the largest difference
  $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open(f'$WORK/{r}/metrics.jsonl')] for r in sys.argv[1:3]]
tol, steps = float(sys.argv[3]), int(sys.argv[4])
worst = max(abs(x - y) / abs(x) for x, y in zip(a[:steps], b[:steps]))
print('  %s vs %s: %d steps, largest relative difference %.2e' % (sys.argv[1], sys.argv[2], steps, worst))
sys.exit(not (len(a) == len(b) == 16 and worst <= tol))" "$1" "$2" "${3:-$TOL}" "${4:-16}"
}
run "$WORK/cpu.log" --out "$WORK/cpu" --device cpu || exit 1
run "$WORK/gpu.log" --out "$WORK/gpu" --device "$DEVICE" --precision fp32 || exit 1
grep "^device:" "$WORK/gpu.log"
check "$DEVICE's 16 steps within $TOL of cpu's" close cpu gpu
if [[ $DEVICE == cuda-emu ]]; then
  # The emulator runs the kernels' own arithmetic in fp32 on the CPU: its first 8 steps stay
  # within 1e-5 of the CPU's (a real GPU's fused multiply-adds and reduction trees are held to
  # TOL above).
  check "cuda-emu's first 8 steps within 1e-5 of cpu's" close cpu gpu 1e-5 8
fi
if [[ $MODE != quick ]]; then
  run "$WORK/gpu2.log" --out "$WORK/gpu2" --device "$DEVICE" --precision fp32 || exit 1
  check "two $DEVICE runs: bitwise the same losses" \
    test "$(losses "$WORK/gpu/metrics.jsonl")" == "$(losses "$WORK/gpu2/metrics.jsonl")"
  for pair in "$DEVICE cpu" "cpu $DEVICE"; do
    read -r first second <<< "$pair"
    R="$first-then-$second"
    run "$WORK/$R-1.log" --out "$WORK/$R" --device "$first" --precision fp32 --max-steps 8 || exit 1
    run "$WORK/$R-2.log" --out "$WORK/$R" --device "$second" --precision fp32 --resume auto || exit 1
    check "checkpointed on $first at step 8, resumed on $second" \
      grep -q "resumed from $WORK/$R/ckpt/step-00000008" "$WORK/$R-2.log"
    check "$first then $second: within $TOL of the uninterrupted cpu run" close cpu "$R"
  done
fi
# --peak-tflops: no start-up product, whose buffers the memory plan does not count.
run "$WORK/bf16.log" --out "$WORK/bf16" --device "$DEVICE" --peak-tflops 989 || exit 1
check "the GPU's default precision is bf16" grep -q "^device: $DEVICE (.*bf16 GEMM inputs" "$WORK/bf16.log"
check "bf16: the last loss within 2 % of the CPU's fp32 run" $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open(f'$WORK/{r}/metrics.jsonl')] for r in ('cpu', 'bf16')]
print('  last loss: cpu fp32 %.5f, $DEVICE bf16 %.5f' % (a[-1], b[-1]))
sys.exit(not (len(b) == 16 and abs(a[-1] - b[-1]) <= 0.02 * abs(a[-1])))"
# The memory plan against what zaya allocated (issue 41). On the emulated device every
# allocation is its exact bytes: within 10 % (the ops' own scratch, a few per cent of this tiny
# model's plan, is not counted; Newton-Schulz's batches, which were 12 %, are bounded now). On a
# GPU a measurement: cuBLASLt's 32 MiB workspace and the scratch cache's rounding come on top.
memory_plan() {  # memory_plan [RUN]: WORK/RUN (default bf16)
  $PY -c "
import json, sys
s = json.load(open('$WORK/${1:-bf16}/summary.json'))
plan, peak = s['device_plan_bytes'], s['device_peak_bytes_per_rank'][0]
print('  memory plan (issue 41): zaya allocated %d bytes at most on $DEVICE, planned %d: %.3f' % (peak, plan, peak / max(plan, 1)))
sys.exit(not (plan > 0 and ('$DEVICE' != 'cuda-emu' or 0.9 <= peak / plan <= 1.1)))"
}
check "bf16: zaya's device peak against the memory plan (within 10 % on cuda-emu)" memory_plan
if [[ $MODE == quick ]]; then
  echo "$passes passed, $fails failed (quick: repeats, resumes and weight storage left out)"
  exit $((fails != 0))
fi
run "$WORK/bf16b.log" --out "$WORK/bf16b" --device "$DEVICE" || exit 1
check "two bf16 runs: bitwise the same losses" \
  test "$(losses "$WORK/bf16/metrics.jsonl")" == "$(losses "$WORK/bf16b/metrics.jsonl")"
check "bf16: the weights and Muon gradients are kept in bf16, the master in the range" \
  grep -q "(weights and Muon gradients in bf16, fp32 master weights of the ZeRO-1 range)" \
  "$WORK/bf16.log"
run "$WORK/bf16w.log" --out "$WORK/bf16w" --device "$DEVICE" --gradient-storage fp32 || exit 1
run "$WORK/bf16c.log" --out "$WORK/bf16c" --device "$DEVICE" --weight-storage fp32 || exit 1
check "bf16 weight storage: bitwise the losses and weights of full fp32 weights" \
  cmp "$WORK/bf16w/model/model.safetensors" "$WORK/bf16c/model/model.safetensors"
# The two halves at other thread counts than the uninterrupted run (the machine's): a run's bits
# do not depend on the host's threads, which the trainer lowers while other work holds the CPU.
R=bf16-resume
run "$WORK/$R-1.log" --out "$WORK/$R" --device "$DEVICE" --max-steps 8 --threads-for-test 1 || exit 1
run "$WORK/$R-2.log" --out "$WORK/$R" --device "$DEVICE" --resume auto --threads-for-test 3 || exit 1
check "bf16: checkpointed at step 8 (1 thread) and resumed (3 threads), bitwise the uninterrupted run" \
  cmp "$WORK/bf16/model/model.safetensors" "$WORK/$R/model/model.safetensors"
# bf16 activation storage (model/stored_activations.h): the device's rounding and widening.
run "$WORK/act16.log" --out "$WORK/act16" --device "$DEVICE" --activation-storage bf16 \
  --peak-tflops 989 || exit 1
check "bf16 activations: other losses than fp32 storage's, the last within 2 % of them" $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open(f'$WORK/{r}/metrics.jsonl')] for r in ('bf16', 'act16')]
print('  last loss: fp32 storage %.6f, bf16 storage %.6f' % (a[-1], b[-1]))
sys.exit(not (len(b) == 16 and a != b and abs(a[-1] - b[-1]) <= 0.02 * abs(a[-1])))"
check "bf16 activations: zaya's device peak against the memory plan (within 10 % on cuda-emu)" \
  memory_plan act16
echo "$passes passed, $fails failed"
((fails == 0))
