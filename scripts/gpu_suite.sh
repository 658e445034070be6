#!/usr/bin/env bash
# The GPU suite from the bundle of scripts/gpu_bundle.sh (docs/gpu.md), in two parts, each made to
# end inside one device-tool command of 10 minutes, or both in one (`all`, as
# scripts/gpu_first_run.sh runs them after its gates):
#   tests   preflight (every library found, ldd clean), gpu.ops (the op and model tests against
#           the CPU), gpu.train (`zaya train` on the device against the CPU), the Brown demo
#           (configs/small.json, bf16 on the device against the CPU's fp32)
#   bench   bench/gpu_step_vs_pytorch.sh on each config: zaya's figures for all first, then
#           PyTorch eager, then torch.compile while time is left
#   profile gpu.ops, then the first --bench config's step and optimizer under the op profile
#           (ZAYA_CUDA_OP_PROFILE: profile-step.tsv, profile-optimizer.tsv), then `bench` on that
#           config in what is left (zaya's figures, then PyTorch eager)
#   memory  tests/gpu/gpu_memory_plan.sh: the first --bench config (the depth-8 one) at its
#           sequence length trained 2 steps under fp32 and bf16 activations, each run's device
#           peak against its memory plan (gpu_memory.log)
# Each step runs under `timeout` (its own share of --budget, so that a hang in one leaves the
# others their time) with its log in the output folder ($OUT on
# the GPU machine, which the device tool brings back; at most 8 files there), and a line in
# summary.txt. The device is the bundle's (cuda, or cuda-emu in the rehearsal).
# Usage: bash scripts/gpu_suite.sh tests|bench|all|profile|memory [--out DIR] [--budget SECONDS] [--demo-steps N]
#          [--demo-batch SEQUENCES] [--gtest-filter PATTERN] [--bench CONFIG:BATCH:SEQ:STEPS]... [--no-compile]
# Exits non-zero if any step failed, was skipped or ran out of time.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
PART=${1:-}
case $PART in tests | bench | all | profile | memory) shift ;; *)
  echo "gpu_suite.sh: the first argument is the part, tests, bench, all, profile or memory (got '$PART')" >&2; exit 2 ;;
esac
OUTDIR=${OUT:-$ROOT/gpu-out}
BUDGET=560
DEMO_STEPS=100
DEMO_BATCH=
GTEST_FILTER='*'
BENCHES=()
COMPILE=1
[[ $PART == all || $PART == profile ]] && COMPILE=0  # zaya's figures and PyTorch eager's first
while (($#)); do
  case $1 in
    --out) OUTDIR=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --demo-steps) DEMO_STEPS=$2; shift 2 ;;
    --demo-batch) DEMO_BATCH=$2; shift 2 ;;
    --gtest-filter) GTEST_FILTER=$2; shift 2 ;;
    --bench) BENCHES+=("$2"); shift 2 ;;
    --no-compile) COMPILE=0; shift ;;
    *) echo "gpu_suite.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
((${#BENCHES[@]})) || BENCHES=(configs/zaya1-base-depth8.json:4:4096:10 configs/small.json:16:256:20)
mkdir -p "$OUTDIR"
# Each step's cap: the tests' share of the budget (all of it for `tests`, 3/5 for `all`) split
# 2 : 1.75 : 1.25 between the op tests, the training test and the demo; the benchmark has the rest.
TESTS_BUDGET=$BUDGET
[[ $PART == all ]] && TESTS_BUDGET=$((BUDGET * 3 / 5))
CAP_OPS=$((TESTS_BUDGET * 2 / 5)) CAP_TRAIN=$((TESTS_BUDGET * 7 / 20)) CAP_DEMO=$((TESTS_BUDGET / 4))
DEADLINE=$(($(date +%s) + BUDGET))
export DEADLINE
rc=0
summary() { echo "$*" | tee -a "$OUTDIR/summary.txt"; }
# step NAME CAP LOG command...: runs the command under timeout (CAP seconds, or what is left of
# the budget), its output in LOG; one summary line.
step() {
  local name=$1 cap=$2 log=$3 left r start
  shift 3
  left=$((DEADLINE - $(date +%s)))
  ((cap > left)) && cap=$left
  if ((cap < 10)); then
    summary "$name: NOT RUN (the ${BUDGET} s budget is spent)"; rc=1; return 1
  fi
  start=$(date +%s)
  { echo "== $name (timeout ${cap} s): $*"; timeout --kill-after=10 "$cap" "$@"; } >> "$log" 2>&1
  r=$?
  case $r in
    0) summary "$name: passed ($(($(date +%s) - start)) s)" ;;
    77) summary "$name: SKIPPED ($(grep -m1 SKIPPED "$log" | cut -c1-200))"; rc=1 ;;
    124 | 137) summary "$name: TIMED OUT after ${cap} s (log: $log)"; rc=1 ;;
    *) summary "$name: FAILED, exit $r (log: $log)"; rc=1 ;;
  esac
  return $r
}

source scripts/gpu_env.sh || exit 1
: > "$OUTDIR/summary.txt"
summary "gpu_suite $PART on $ZAYA_GPU_DEVICE, $(date -u +%FT%TZ), budget ${BUDGET} s"
if zaya_gpu_preflight > "$OUTDIR/preflight.log" 2>&1; then
  summary "preflight: passed (every library found; details in preflight.log)"
  grep -E '^(found|carried|bundle|python|NVIDIA|warning)' "$OUTDIR/preflight.log"
else
  summary "preflight: FAILED, nothing run:"; cat "$OUTDIR/preflight.log"; exit 1
fi
tests_bin=$(printf '%s\n' "${zaya_gpu_bins[@]}" | grep -m1 '_tests$')
export ZAYA_BROWN_TEXT=$ZAYA_BUNDLE/brown.txt
WORK=${TMPDIR:-/tmp}/zaya-gpu-suite
if [[ $PART == profile ]]; then
  # Where the time of a step goes: the ops and products of a few steps, each timed on the device.
  step gpu.ops 60 "$OUTDIR/gpu_ops.log" "$ZAYA_GPU_BIN/$tests_bin" --gtest_filter="$GTEST_FILTER"
  grep -E '^\[  (PASSED|FAILED) ' "$OUTDIR/gpu_ops.log" | head -20
  IFS=: read -r config batch seq steps <<< "${BENCHES[0]}"
  BENCHES=("${BENCHES[0]}")
  profiled=(bench step --device "$ZAYA_GPU_DEVICE" --precision bf16 --config "$config" --batch "$batch"
    --seq "$seq" --steps 3 --warmup 1 --lm-head-chunks 4096,32768)
  for what in step optimizer; do  # a quarter of the budget, and 3/10 with the optimizer
    extra=() cap=$((BUDGET / 4))
    [[ $what == optimizer ]] && extra=(--optimizer) cap=$((BUDGET * 3 / 10))
    ZAYA_CUDA_OP_PROFILE=$OUTDIR/profile-$what.tsv step "profile $what" $cap \
      "$OUTDIR/bench.log" "$ZAYA_GPU_BIN/zaya" "${profiled[@]}" "${extra[@]}"
    grep -E '^(  setup|zaya \()' "$OUTDIR/bench.log" | tail -2
    head -12 "$OUTDIR/profile-$what.tsv" 2> /dev/null
  done
fi
if [[ $PART == memory ]]; then  # the first --bench config at its sequence length
  IFS=: read -r config batch seq steps <<< "${BENCHES[0]}"
  step gpu.memory_plan $BUDGET "$OUTDIR/gpu_memory.log" bash tests/gpu/gpu_memory_plan.sh \
    "$ZAYA_GPU_BIN/zaya" "$ROOT" "$WORK/memory" "$ZAYA_GPU_DEVICE" "$config" "$seq"
  grep -E '^(ok|FAIL|  plan)' "$OUTDIR/gpu_memory.log"
  exit $rc
fi
if [[ $PART == tests || $PART == all ]]; then
  step gpu.ops $CAP_OPS "$OUTDIR/gpu_ops.log" "$ZAYA_GPU_BIN/$tests_bin" --gtest_filter="$GTEST_FILTER"
  grep -E '^\[  (PASSED|FAILED) ' "$OUTDIR/gpu_ops.log" | head -20
  step gpu.train $CAP_TRAIN "$OUTDIR/gpu_train.log" bash tests/gpu/gpu_train.sh "$ZAYA_GPU_BIN/zaya" \
    "$ROOT" "$WORK/train" "$ZAYA_GPU_DEVICE"
  grep -E '^(PASS|FAIL|  )' "$OUTDIR/gpu_train.log" | head -20
  DEMO_DEVICE=$ZAYA_GPU_DEVICE DEMO_STEPS=$DEMO_STEPS DEMO_BATCH=$DEMO_BATCH step demo $CAP_DEMO "$OUTDIR/demo.log" \
    bash tests/gpu/brown_demo.sh "$ZAYA_GPU_BIN/zaya" "$ROOT" "$ZAYA_BUNDLE/brown-data.tar.gz" \
    "$WORK/demo"
  grep -E '^(device:|trained|PASS|FAIL|  step)' "$OUTDIR/demo.log"
fi
if [[ $PART != tests ]]; then  # bench, all or profile
  # zaya's figures for every config, then PyTorch eager for each, then torch.compile: what comes
  # back first is what matters most. A config's work folder carries its results between phases.
  # Each phase's share (seconds a config): zaya 240, PyTorch eager 180, compile what is left.
  phases=(zaya:240 torch:180)
  if [[ $PART != bench ]]; then  # what is left after the tests or the profile, 11 : 9
    left=$((DEADLINE - $(date +%s)))
    phases=(zaya:$((left * 11 / 20 / ${#BENCHES[@]})) torch:$((left * 9 / 20 / ${#BENCHES[@]} - 20)))
  fi
  ((COMPILE)) && phases+=(compile:600)
  rm -rf "$WORK"/bench-*
  for p in "${phases[@]}"; do
    phase=${p%:*} cap=${p#*:}
    for b in "${BENCHES[@]}"; do
      IFS=: read -r config batch seq steps <<< "$b"
      name=$(basename "$config" .json)
      mkdir -p "$WORK/bench-$name"
      left=$((DEADLINE - $(date +%s)))
      ((cap > left)) && cap=$left
      BENCH_WORK=$WORK/bench-$name BENCH_PHASE=$phase BENCH_DEADLINE=$(($(date +%s) + cap)) \
        DEVICE=$ZAYA_GPU_DEVICE ZAYA=$ZAYA_GPU_BIN/zaya step "bench $name $phase" $((cap + 15)) \
        "$OUTDIR/bench.log" bash bench/gpu_step_vs_pytorch.sh "$config" "$batch" "$seq" "$steps"
      BENCH_WORK=$WORK/bench-$name BENCH_PHASE=summary \
        bash bench/gpu_step_vs_pytorch.sh "$config" "$batch" "$seq" "$steps" 2>&1 | tee -a "$OUTDIR/bench.log"
    done
  done
  # The JSON results and logs; never the saved model (5.5 GB) a stopped phase may leave.
  (cd "$WORK" && tar --exclude=model -cf "$OUTDIR/bench-results.tar" bench-*)
fi
summary "gpu_suite $PART: $( ((rc == 0)) && echo 'all passed' || echo 'NOT all passed') ($((BUDGET - DEADLINE + $(date +%s))) s)"
exit $rc
