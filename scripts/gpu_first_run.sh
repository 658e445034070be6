#!/usr/bin/env bash
# The first GPU run in one command (docs/gpu.md), on the lent GPU machine, from the tree the
# device tool sends with the bundle of scripts/gpu_bundle.sh carried beside it:
#   1. the machine's facts (GPU, driver, compute capability, glibc, CPU, Python and PyTorch, what
#      is installed) into facts.txt, before anything can fail;
#   2. gates on the environment alone, each naming its cause when it fails: the carried files'
#      run bits restored, a folder that allows running programs (a noexec /tmp is left for one in
#      the tree), the libraries unpacked (gzip or Python's tarfile: no xz needed), every library
#      found and resolved (ldd), both binaries actually executed (`zaya info --devices` with the
#      device's plugin loaded and usable, the GPU test binary listing its tests);
#   3. only then scripts/gpu_suite.sh all: the GPU op tests, `zaya train` on the device against
#      the CPU, the Brown demo and the benchmark against PyTorch, each under its own share of the
#      budget.
# Everything lands in the output folder as it happens, in at most 8 files: facts.txt, summary.txt,
# preflight.log, gpu_ops.log, gpu_train.log, demo.log, bench.log, bench-results.tar. A gate that
# fails prints facts.txt and stops within about two minutes, leaving the session time for a fixed
# second try.
# Usage: bash scripts/gpu_first_run.sh [--out DIR] [--budget SECONDS] [--gates-only]
#          [--part all|profile|tests|bench|memory] [suite options...]
#   (default: $OUT, 540 s in all; the suite's options, e.g. --demo-steps, pass through;
#   --gates-only stops after the gates, as the rehearsal's planted faults do; --part profile is
#   the second session's run: the op tests, then where a step's time goes, then the benchmark,
#   writing facts.txt, summary.txt, preflight.log, gpu_ops.log, profile-step.tsv,
#   profile-optimizer.tsv, bench.log and bench-results.tar; --part memory is issue 41's check,
#   the first --bench config's device peaks against the plan: facts.txt, summary.txt,
#   preflight.log, gpu_memory.log)
# Test hook: ZAYA_FIRST_RUN_PATH=DIRS replaces PATH (the rehearsal hides xz or gzip with it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUTDIR=${OUT:-$ROOT/gpu-out}
BUDGET=540
SUITE_ARGS=()
GATES_ONLY=0
PART=all
while (($#)); do
  case $1 in
    --out) OUTDIR=$2; shift 2 ;;
    --gates-only) GATES_ONLY=1; shift ;;
    --budget) BUDGET=$2; shift 2 ;;
    --part) PART=$2; shift 2 ;;
    *) SUITE_ARGS+=("$1"); shift ;;
  esac
done
[[ -n ${ZAYA_FIRST_RUN_PATH:-} ]] && export PATH=$ZAYA_FIRST_RUN_PATH
START=$(date +%s)
mkdir -p "$OUTDIR" || { echo "gpu_first_run.sh: cannot make $OUTDIR"; exit 1; }
FACTS=$OUTDIR/facts.txt
: > "$FACTS"
say() { echo "$*" | tee -a "$FACTS"; }
# fact TITLE command...: the command's output (or why it gave none), under its title, at most
# 20 s.
fact() {
  local title=$1; shift
  { echo "-- $title"; timeout 20 "$@" 2>&1 | head -40 || true; } >> "$FACTS"
}

# 1. The machine.
say "gpu_first_run on $(hostname 2> /dev/null), $(date -u +%FT%TZ), budget ${BUDGET} s"
fact "nvidia-smi" nvidia-smi
fact "GPU, driver, compute capability, memory" nvidia-smi \
  --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
fact "glibc" ldd --version
fact "CPU" bash -c "grep -m1 'model name' /proc/cpuinfo; nproc; grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512f|avx512bw|avx512dq|avx512vl|avx512cd)$' | tr '\n' ' '"
fact "memory and disk" bash -c "free -g | head -2; df -h $ROOT /tmp | tail -2"
fact "tools" bash -c 'for t in xz gzip zstd tar python3 nvcc ldconfig objdump; do printf "%s: %s\n" $t "$(command -v $t || echo none)"; done'
fact "Python and PyTorch" python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
fact "CUDA and NCCL libraries (loader cache)" bash -c "ldconfig -p | grep -E 'libcuda\\.so|libcudart|libcublasLt|libnccl' | head"
fact "nvidia Python packages" bash -c "python3 -m pip list 2> /dev/null | grep -iE '^(nvidia|torch)' | head -20"
fact "the bundle" cat "$ROOT/.gpu-bundle/manifest"
fact "mounts of /tmp and the tree" bash -c "findmnt -no TARGET,OPTIONS -T /tmp; findmnt -no TARGET,OPTIONS -T $ROOT"

# 2. The gates. A failure prints the facts and the gates' log, and ends here.
gate_fail() {
  say "GATE FAILED: $*"
  say "nothing of the suite ran ($(($(date +%s) - START)) s); the facts:"
  cat "$FACTS"
  exit 1
}
gate_ok() { say "gate: $*"; }

BUNDLE=$ROOT/.gpu-bundle
[[ -f $BUNDLE/manifest ]] ||
  gate_fail "no bundle at $BUNDLE: run scripts/gpu_bundle.sh here and carry .gpu-bundle"
# The device tool may drop the run bits of what it carries.
mapfile -t bins < <(awk '$1 == "bin" {print $2}' "$BUNDLE/manifest")
for b in "${bins[@]}"; do
  [[ -f $BUNDLE/bin/$b ]] || gate_fail "the bundle lacks bin/$b (its manifest names it)"
  chmod +x "$BUNDLE/bin/$b" 2> /dev/null
  [[ -x $BUNDLE/bin/$b ]] || gate_fail "cannot give $BUNDLE/bin/$b its run bit (read-only tree?)"
done
gate_ok "run bits of ${bins[*]}"
# A folder that runs programs, for the unpacked libraries and the wrappers.
runs_programs() {
  local probe=$1/zaya-exec-probe
  mkdir -p "$1" 2> /dev/null && printf '#!/bin/sh\nexit 0\n' > "$probe" && chmod +x "$probe" &&
    "$probe" 2> /dev/null
  local r=$?
  rm -f "$probe"
  return $r
}
export TMPDIR=${TMPDIR:-/tmp}
if ! runs_programs "$TMPDIR"; then
  say "note: $TMPDIR does not run programs (noexec?): using $ROOT/.gpu-run instead"
  export TMPDIR=$ROOT/.gpu-run
  runs_programs "$TMPDIR" || gate_fail "neither /tmp nor $TMPDIR can run programs"
fi
gate_ok "programs run from $TMPDIR"
# Libraries: unpacked (gpu_env.sh: gzip, else Python's tarfile), found, resolved by ldd.
if ! source scripts/gpu_env.sh >> "$FACTS" 2>&1; then
  gate_fail "scripts/gpu_env.sh could not set up the bundle (above: unpacking or the manifest)"
fi
gate_ok "libraries unpacked into $zaya_gpu_lib ($(ls "$zaya_gpu_lib" | wc -l) files)"
if ! zaya_gpu_preflight > "$OUTDIR/preflight.log" 2>&1; then
  cat "$OUTDIR/preflight.log" >> "$FACTS"
  gate_fail "a library is missing: $(grep -E '^(MISSING|ldd: .* missing)' "$OUTDIR/preflight.log" | head -3 | tr '\n' ' ')"
fi
gate_ok "every library found and resolved (preflight.log)"
# NCCL on a one-GPU machine without a network: loopback only, no InfiniBand probing.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
# Both binaries run: zaya (its vector path on this CPU, the device's plugin loaded and usable),
# and the test binary lists its tests.
out=$(timeout 60 "$ZAYA_GPU_BIN/zaya" info --devices 2>&1); r=$?
echo "$out" >> "$FACTS"
((r == 132)) && gate_fail "zaya died of an illegal instruction on this CPU (rc 132)"
((r != 0)) && gate_fail "zaya info --devices failed (rc $r): $(echo "$out" | tail -2 | tr '\n' ' ')"
line=$(echo "$out" | grep -m1 "^  $ZAYA_GPU_DEVICE ")
[[ $line == *"usable here"* && $line != *"not usable"* ]] ||
  gate_fail "--device $ZAYA_GPU_DEVICE is not usable: ${line:-not listed}"
gate_ok "zaya runs; --device $ZAYA_GPU_DEVICE usable (plugin loaded)"
out=$(timeout 60 "$ZAYA_GPU_BIN/zaya" info --config configs/tiny.json 2>&1) ||
  gate_fail "zaya info failed: $(echo "$out" | tail -2 | tr '\n' ' ')"
gate_ok "$(echo "$out" | grep -m1 '^  chosen:' | sed 's/^ *//'), $(echo "$out" | grep -m1 '^  kernels' | sed 's/^ *//')"
tests_bin=$(printf '%s\n' "${bins[@]}" | grep -m1 '_tests$')
out=$(timeout 60 "$ZAYA_GPU_BIN/$tests_bin" --gtest_list_tests 2>&1); r=$?
((r != 0)) && gate_fail "$tests_bin --gtest_list_tests failed (rc $r): $(echo "$out" | tail -2 | tr '\n' ' ')"
gate_ok "$tests_bin lists $(echo "$out" | grep -c '^  ') tests"
say "gates passed in $(($(date +%s) - START)) s"
((GATES_ONLY)) && exit 0

# 3. The suite, in what is left of the budget.
left=$((BUDGET - ($(date +%s) - START)))
OUT=$OUTDIR bash scripts/gpu_suite.sh "$PART" --out "$OUTDIR" --budget "$left" "${SUITE_ARGS[@]}"
rc=$?
say "gpu_first_run: suite exit $rc, $(($(date +%s) - START)) s in all"
exit $rc
