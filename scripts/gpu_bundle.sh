#!/usr/bin/env bash
# Builds and packs what the GPU suite needs on the lent GPU machine (docs/gpu.md), which has CUDA,
# a driver and PyTorch but none of our Debian packages:
#  - builds zaya, its device plugin and the GPU test binary (cmake --build BUILD --target ...);
#  - copies them, with every library they link except glibc's and the GPU vendor's (packed with
#    gzip into lib.tar.gz: the GPU machine may lack xz, and Python's tarfile reads gzip too), and
#    the Brown data of the tests and the demo (the demo's tokenizer and
#    shards prepared first where data/ lacks them, as scripts/main.sh does);
#  - writes .gpu-bundle/manifest: the device, the binaries, and the GPU libraries (the CUDA
#    runtime, cuBLASLt) left to be found there by search (scripts/gpu_env.sh): at hundreds of MB
#    they exceed the device tool's 64 MiB carry limit, and the GPU machine has them, in CUDA's
#    folders or in Python's nvidia.* packages.
# Output: .gpu-bundle/ (ignored by git through .git/info/exclude), named in the device tool's
# `carry`, and run there with scripts/gpu_suite.sh.
# Usage: scripts/gpu_bundle.sh [--device cuda|cuda-emu] [--build DIR]
#   cuda-emu packs the emulated device's tests and plugin instead: the rehearsal
#   (scripts/gpu_rehearsal.sh) runs the same suite on it here.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=cuda
BUILD=build
while (($#)); do
  case $1 in
    --device) DEVICE=${2:?--device needs cuda or cuda-emu}; shift 2 ;;
    --build) BUILD=${2:?--build needs a folder}; shift 2 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1' (--device cuda|cuda-emu, --build DIR)" >&2; exit 2 ;;
  esac
done
case $DEVICE in
  cuda) tests=zaya_gpu_tests plugin=libzaya_cuda_backend.so target_plugin=zaya_cuda_backend ;;
  cuda-emu) tests=zaya_gpu_emu_tests plugin=libzaya_cuda_emu_backend.so target_plugin=zaya_cuda_emu_backend ;;
  *) echo "gpu_bundle.sh: --device must be cuda or cuda-emu, not '$DEVICE'" >&2; exit 2 ;;
esac
[[ -f $BUILD/build.ninja || -f $BUILD/Makefile ]] ||
  { echo "gpu_bundle.sh: $BUILD is not configured: cmake --preset default first" >&2; exit 1; }
if ! cmake --build "$BUILD" --target help | grep -q "^$tests:"; then
  echo "gpu_bundle.sh: $BUILD has no target $tests: configure where CMake finds nvcc" \
    "(/usr/local/cuda/bin/nvcc, or -DZAYA_CUDA=ON with CUDAToolkit_ROOT)" >&2
  exit 1
fi
echo "building zaya $target_plugin $tests in $BUILD"
cmake --build "$BUILD" --target zaya "$target_plugin" "$tests"
bins=("$BUILD/tests/gpu/$tests" "$BUILD/zaya" "$BUILD/$plugin")
for b in "${bins[@]}"; do [[ -e $b ]] || { echo "gpu_bundle.sh: $b was not built" >&2; exit 1; }; done
# The GPU machine's CPU is not known: the binaries must be the portable build's (plain code for any
# x86-64, the CPU ops' AVX2 and AVX-512 paths chosen there at run time), never -march=native.
if ! "$BUILD/zaya" info --config configs/tiny.json 2>&1 | grep -q '(built for baseline)'; then
  echo "gpu_bundle.sh: $BUILD/zaya is not built for any x86-64 (its plain code needs a newer CPU):" \
    "configure $BUILD with the default preset (ZAYA_MARCH empty)" >&2
  exit 1
fi

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-bundle/' "$exclude" 2>/dev/null || echo '/.gpu-bundle/' >> "$exclude"
rm -rf .gpu-bundle
mkdir -p .gpu-bundle/bin .gpu-bundle/lib
cp "${bins[@]}" .gpu-bundle/bin/
{
  echo "device $DEVICE"
  for b in "${bins[@]}"; do echo "bin $(basename "$b")"; done
} > .gpu-bundle/manifest
# Every resolved library but the C runtime's (the GPU machine's glibc is used) and the GPU
# vendor's (found there: they are listed in the manifest instead).
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// {print $1, $3}' | sort -u |
  while read -r soname lib; do
    case $soname in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux*) ;;
      libcuda.so* | libcudart.so* | libcublas*.so* | libnccl*.so* | libnvrtc*.so* | libnvJitLink*.so*)
        echo "locate $soname" >> .gpu-bundle/manifest ;;
      *) cp -L "$lib" .gpu-bundle/lib/ ;;
    esac
  done
# The Brown slice gpu.train trains on (the full corpus would not fit the carry limit), and the
# prepared shards and tokenizer of the demo config for tests/gpu/brown_demo.sh (xz: 1.6 MB).
[[ -f data/raw/brown.txt ]] || { echo "gpu_bundle.sh: no data/raw/brown.txt (scripts/setup.sh fetches it)" >&2; exit 1; }
head -c 400000 data/raw/brown.txt > .gpu-bundle/brown.txt
if [[ ! -f data/tokenizer.json ]]; then  # as scripts/main.sh prepares them
  "$BUILD/zaya" tokenizer train --input data/raw/brown.txt --vocab-size 4096 --out data/tokenizer.json
fi
if [[ ! -f data/brown/index.json ]]; then
  "$BUILD/zaya" data prepare --tokenizer data/tokenizer.json --input data/raw/brown.txt \
    --name brown --out data
fi
tar -C data -czf .gpu-bundle/brown-data.tar.gz brown tokenizer.json
# The libraries (51 MB, OpenBLAS most) with gzip.
tar -C .gpu-bundle -czf .gpu-bundle/lib.tar.gz --transform 's|^lib/||' lib/ && rm -rf .gpu-bundle/lib
echo "carried: $(tar -tzf .gpu-bundle/lib.tar.gz | grep -c .) libraries;" \
  "found on the GPU machine by search: $(awk '$1 == "locate" {printf "%s ", $2}' .gpu-bundle/manifest)"
# The device tool carries at most 64 MiB with the tree: the bundle keeps 8 MiB for the rest.
bytes=$(du -sb .gpu-bundle | cut -f1)
echo "bundle: $((bytes >> 20)) MiB in .gpu-bundle/ (the device tool carries at most 64 MiB in all)"
if ((bytes > 56 << 20)); then
  echo "gpu_bundle.sh: the bundle is $((bytes >> 20)) MiB, over the 56 MiB that leave room for the tree" >&2
  exit 1
fi
