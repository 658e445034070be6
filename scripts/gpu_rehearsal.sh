#!/usr/bin/env bash
# The first GPU run (docs/gpu.md), rehearsed here on the emulated device: the same bundle script,
# the same two suite commands, from a copy of the tree as the device tool sends it (tracked and
# untracked-not-ignored files, and the carried .gpu-bundle; no build/, no data/), with the output
# folder checked against what the tool brings back (at most 8 files, 2 folders down). Only the
# sizes are smaller, as the suite's own parameters: the emulator runs kernels a thousand times
# slower than a GPU. Then, where this build has the CUDA target, the CUDA bundle's preflight:
# the CUDA runtime and cuBLASLt found by search and every binary's libraries resolved.
# Usage: scripts/gpu_rehearsal.sh [--build DIR] [--work DIR]   (about 9 minutes on 2 cores)
# Exits non-zero if any step failed; prints each suite's summary.
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
# The same two commands as on the GPU (docs/gpu.md), smaller: 1 demo step of 1 sequence, the
# tiny config.
(cd "$REH/tree" && OUT=$REH/out-tests bash scripts/gpu_suite.sh tests --demo-steps 1 --demo-batch 1)
check "suite tests on cuda-emu: every step passed" test $? -eq 0
check "suite tests: the output folder fits what the device tool brings back" outputs_fit "$REH/out-tests"
(cd "$REH/tree" && OUT=$REH/out-bench bash scripts/gpu_suite.sh bench --bench configs/tiny.json:2:64:2)
r=$?
grep -q "^zaya (fwd+bwd)" "$REH/out-bench/bench.log" && grep -q "^pytorch .* eager" "$REH/out-bench/bench.log"
check "suite bench on cuda-emu: zaya's figures and PyTorch eager's" test $? -eq 0
# torch.compile is optional (a CPU PyTorch before 2.0 has none): only it may have failed.
check "suite bench: every step but torch.compile passed" \
  test "$(grep -E ': (FAILED|TIMED OUT|NOT RUN|SKIPPED)' "$REH/out-bench/summary.txt" | grep -vc compile)" -eq 0
echo "  (bench exit $r; torch.compile: $(grep -o 'compile: [A-Za-z ]*' "$REH/out-bench/summary.txt" | head -1))"
check "suite bench: the output folder fits what the device tool brings back" outputs_fit "$REH/out-bench"

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
