#!/usr/bin/env bash
# The first GPU run (docs/gpu.md), rehearsed here on the emulated device: the same bundle script
# and the same one command (scripts/gpu_first_run.sh), from a copy of the tree as the device tool
# sends it (tracked and untracked-not-ignored files, and the carried .gpu-bundle; no build/, no
# data/), with the output folder checked against what the tool brings back (at most 8 files, 2
# folders down). Before it, a fault planted in each gate must stop the command at that gate with
# its cause named, within two minutes (or be repaired by it, where the gate repairs: the run
# bits, a /tmp that runs no programs, no xz or gzip). Only the sizes are smaller, as the suite's
# own parameters: the emulator runs kernels a thousand times slower than a GPU. Then the memory
# part (`--part memory`, the plan against the device's count), and a later session's call,
# `--part profile`, with its op profiles checked. Then, where this
# build has the CUDA target, the CUDA bundle's preflight: the CUDA runtime and cuBLASLt found by
# search and every binary's libraries resolved.
# Usage: scripts/gpu_rehearsal.sh [--build DIR] [--work DIR]   (about 10 minutes on 2 cores)
# Exits non-zero if any step failed; prints the run's summary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SRC=$PWD
BUILD=build
REH=${TMPDIR:-/tmp}/zaya-gpu-rehearsal
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) REH=$2; shift 2 ;;
    *) echo "gpu_rehearsal.sh: unknown argument '$1' (--build DIR, --work DIR)" >&2; exit 2 ;;
  esac
done
source tests/check.sh
# The GPU machine's python3 holds PyTorch; here it may be Debian's /usr/bin/python3 (CPU only).
if [[ -z ${PYTHON:-} ]]; then
  for PYTHON in python3 /usr/bin/python3; do "$PYTHON" -c 'import torch' 2> /dev/null && break; done
fi
export PYTHON
rm -rf "$REH" && mkdir -p "$REH"

echo "== scripts/gpu_bundle.sh --device cuda-emu --build $BUILD"
scripts/gpu_bundle.sh --device cuda-emu --build "$BUILD" || exit 1
# The tree as the device tool sends it.
mkdir -p "$REH/tree"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -e $f && ! -d $f ]] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$REH/tree" -xf - || exit 1
cp -r .gpu-bundle "$REH/tree/"

# outputs_fit DIR: what the device tool would bring back from $OUT is all there is.
outputs_fit() {
  local n bad
  [[ -d $1 ]] || return 1
  n=$(find "$1" -type f | wc -l)
  bad=$( (find "$1" -mindepth 3; find "$1" -name '*[!A-Za-z0-9._-]*') | head -3)
  echo "  $1: $n files ($(cd "$1" && find . -type f | sort | tr '\n' ' '))"
  ((n <= 8)) && [[ -z $bad ]]
}
# A fresh copy of the tree for each planted fault.
fresh() {  # fresh NAME: $REH/NAME, a copy of the tree
  rm -rf "$REH/$1" && cp -r "$REH/tree" "$REH/$1"
}
# gates NAME [env...]: the one command, gates only, on the copy NAME; output in $REH/NAME.out,
# seconds in $REH/NAME.s, exit code returned.
gates() {
  local name=$1 start r; shift
  start=$(date +%s)
  (cd "$REH/$name" && env "$@" OUT="$REH/$name-out" bash scripts/gpu_first_run.sh --gates-only) \
    > "$REH/$name.out" 2>&1
  r=$?
  echo $(($(date +%s) - start)) > "$REH/$name.s"
  return $r
}
stopped_at() {  # stopped_at NAME TEXT: the command failed, naming TEXT, within 120 s
  ! gates_ok "$1" && grep -q "GATE FAILED: .*$2" "$REH/$1.out" && (($(cat "$REH/$1.s") <= 120)) ||
    { tail -5 "$REH/$1.out"; return 1; }
}
gates_ok() { grep -q '^gates passed' "$REH/$1.out"; }

fresh runbits && chmod -x "$REH"/runbits/.gpu-bundle/bin/*
gates runbits
check "planted: binaries without their run bit: the gate restores them" gates_ok runbits
# No xz and no gzip on the PATH: the libraries unpack through Python's tarfile.
mkdir -p "$REH/path"
for d in /usr/local/bin /usr/bin /bin; do
  for t in "$d"/*; do
    n=$(basename "$t")
    [[ $n == xz || $n == gzip || -e $REH/path/$n ]] || ln -s "$t" "$REH/path/$n"
  done
done
fresh noxz
gates noxz ZAYA_FIRST_RUN_PATH="$REH/path"
check "planted: no xz and no gzip on the PATH: the bundle unpacks all the same" gates_ok noxz
fresh nolib && echo "locate libzaya_planted_missing.so.1" >> "$REH/nolib/.gpu-bundle/manifest"
gates nolib
check "planted: a CUDA library missing: stops at the library gate, naming it" \
  stopped_at nolib "a library is missing: MISSING: libzaya_planted_missing.so.1"
fresh nobin && rm "$REH/nobin/.gpu-bundle/bin/zaya"
gates nobin
check "planted: a binary missing from the bundle: stops at the first gate, naming it" \
  stopped_at nobin "the bundle lacks bin/zaya"
# A plugin whose libraries resolve but which zaya refuses (another build's interface: the unit
# tests' fake plugin).
fresh badplugin
cp "$BUILD/tests/unit/libzaya_test_wrong_abi_plugin.so" \
  "$REH/badplugin/.gpu-bundle/bin/libzaya_cuda_emu_backend.so"
gates badplugin
check "planted: a plugin that will not load: stops at the device gate" \
  stopped_at badplugin "--device cuda-emu is not usable: .*another zaya build"
mkdir -p "$REH/noexec"
if mount -t tmpfs -o noexec,size=64m tmpfs "$REH/noexec" 2> /dev/null; then
  fresh noexectmp
  gates noexectmp TMPDIR="$REH/noexec"
  umount "$REH/noexec"
  check "planted: a /tmp that runs no programs: the gate moves to the tree" gates_ok noexectmp
  check "  ... and says so" grep -q "does not run programs (noexec?)" "$REH/noexectmp.out"
else
  echo "(a noexec /tmp is not rehearsed: mounting a tmpfs needs root)"
fi

# The one command as on the GPU (docs/gpu.md), smaller: 1 demo step of 1 sequence, the benchmark
# on the tiny config, and a budget for the emulator (the demo step alone takes 2 to 4 minutes there).
(cd "$REH/tree" && OUT=$REH/out bash scripts/gpu_first_run.sh --budget 1600 --demo-steps 1 \
  --demo-batch 1 --bench configs/tiny.json:2:64:2)
r=$?
cat "$REH/out/summary.txt"
check "the first run on cuda-emu: facts, gates and every test step passed" \
  test "$(grep -cE ': (FAILED|TIMED OUT|NOT RUN|SKIPPED)' "$REH/out/summary.txt")" -eq 0
grep -q "^zaya (fwd+bwd)" "$REH/out/bench.log" && grep -q "^pytorch .* eager" "$REH/out/bench.log"
check "the first run: zaya's figures and PyTorch eager's" test $? -eq 0
check "the first run: the machine's facts came first" grep -q "^-- GPU, driver, compute capability" "$REH/out/facts.txt"
echo "  (exit $r)"
check "the first run: the output folder fits what the device tool brings back" outputs_fit "$REH/out"

# The memory part: the plan against the device's count (the tiny config here, the depth-8 one
# on a GPU).
(cd "$REH/tree" && OUT=$REH/memory-out bash scripts/gpu_first_run.sh --part memory --budget 300 \
  --bench configs/tiny.json:1:64:2) > "$REH/memory.log" 2>&1
cat "$REH/memory-out/summary.txt"
check "the memory run: its three runs' peaks within 10 % of the plan" \
  test "$(grep -c '^ok   .*within 0.10 of the plan' "$REH/memory-out/gpu_memory.log")" -eq 3
check "the memory run: the output folder fits what the device tool brings back" \
  outputs_fit "$REH/memory-out"

# A later session's call: the profile part (the op tests filtered to the bf16 ones on the emulator).
(cd "$REH/tree" && OUT=$REH/profile-out bash scripts/gpu_first_run.sh --part profile --budget 700 \
  --gtest-filter 'GpuBf16.*' --bench configs/tiny.json:2:64:2) > "$REH/profile.log" 2>&1
r=$?
cat "$REH/profile-out/summary.txt"
check "the profile run: every step passed" \
  test "$(grep -cE ': (FAILED|TIMED OUT|NOT RUN|SKIPPED)' "$REH/profile-out/summary.txt")" -eq 0
for what in step optimizer; do
  check "the profile run: profile-$what.tsv times the ops and the products" bash -c \
    'grep -q "^# device time in ops" "$1" && grep -q "^op	attention_backward	" "$1" &&
     grep -q "^gemm	bf16->fp32 " "$1"' _ "$REH/profile-out/profile-$what.tsv"
done
check "the profile run: the optimizer's profile has Newton-Schulz" \
  grep -q "^op	newton_schulz_batch	" "$REH/profile-out/profile-optimizer.tsv"
echo "  (exit $r)"
check "the profile run: the output folder fits what the device tool brings back" \
  outputs_fit "$REH/profile-out"

# The CUDA bundle's preflight: the libraries it leaves out are found here by search.
if cmake --build "$BUILD" --target help 2> /dev/null | grep -q '^zaya_gpu_tests:'; then
  echo "== scripts/gpu_bundle.sh --device cuda --build $BUILD, then its preflight"
  scripts/gpu_bundle.sh --device cuda --build "$BUILD" || exit 1
  ZAYA_BUNDLE=$SRC/.gpu-bundle TMPDIR=$REH bash -c \
    'ROOT=$1; source scripts/gpu_env.sh && zaya_gpu_preflight' _ "$SRC" > "$REH/preflight-cuda.log" 2>&1
  r=$?
  cat "$REH/preflight-cuda.log"
  check "cuda bundle: every library found and resolved (libcuda.so.1 aside: no driver here)" test $r -eq 0
  check "cuda bundle: the CUDA runtime and cuBLASLt were located, not carried" \
    grep -q '^found: libcublasLt.so' "$REH/preflight-cuda.log"
  # A Python package's nvidia/*/lib is searched (PyTorch's wheels put CUDA there).
  mkdir -p "$REH/site/nvidia/cu13/lib" && printf '#!/bin/sh\necho %s\n' "$REH/site" > "$REH/python"
  chmod +x "$REH/python"
  check "the nvidia.* folders of Python's site packages are searched" bash -c \
    'ROOT=$1; PYTHON=$2 TMPDIR=$3; source scripts/gpu_env.sh && printf "%s\n" "${zaya_gpu_dirs[@]}" |
     grep -qx "$3/site/nvidia/cu13/lib"' _ "$SRC" "$REH/python" "$REH"
else
  echo "($BUILD has no CUDA target: the CUDA bundle's preflight is not rehearsed)"
fi
echo "$passes passed, $fails failed"
((fails == 0))
