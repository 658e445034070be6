#!/usr/bin/env bash
# Packs what the GPU tests need onto the lent GPU machine (see docs/gpu.md): that machine has
# CUDA 13 and its driver but none of our Debian packages, so the test binary travels with the
# shared libraries it links (OpenBLAS, Open MPI, RE2, ...) except glibc's and CUDA's own, which the
# machine has, packed with xz (scripts/gpu_env.sh unpacks them there). Output: .gpu-bundle/
# (ignored by git through .git/info/exclude), to be named in the
# device tool's `carry`, and run there as
#   bash scripts/gpu_suite.sh
# Usage: scripts/gpu_bundle.sh [BINARY...]   (default: the GPU op tests, zaya and its CUDA plugin,
# which must stay side by side)
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
((${#bins[@]})) || bins=(build/tests/gpu/zaya_gpu_tests build/zaya build/libzaya_cuda_backend.so)
for b in "${bins[@]}"; do
  [[ -e $b ]] || { echo "$b is missing: cmake --build build first (nvcc must be found)"; exit 1; }
done
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-bundle/' "$exclude" 2>/dev/null || echo '/.gpu-bundle/' >> "$exclude"
rm -rf .gpu-bundle
mkdir -p .gpu-bundle/bin .gpu-bundle/lib
cp "${bins[@]}" .gpu-bundle/bin/
# Every resolved library but the C runtime's and CUDA's (libcudart, libcublas*, libnccl...).
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libcuda*.so* | libcublas*.so* | libnccl*.so*) ;;
    *) cp -L "$lib" .gpu-bundle/lib/ ;;
  esac
done
# The Brown slice gpu.train trains on (the full corpus would not fit the carry limit), and the
# prepared shards and tokenizer of the demo config for tests/gpu/brown_demo.sh (xz: 1.6 MB).
head -c 400000 data/raw/brown.txt > .gpu-bundle/brown.txt
if [[ -f data/brown/index.json && -f data/tokenizer.json ]]; then
  tar -C data -cJf .gpu-bundle/brown-data.tar.xz brown tokenizer.json
else
  echo "note: data/brown is not prepared (scripts/main.sh does it): the Brown demo check will be skipped"
fi
# The libraries packed (51 MB of them, OpenBLAS most, xz to about 9): scripts/gpu_env.sh unpacks
# them on the GPU machine.
tar -C .gpu-bundle -cJf .gpu-bundle/lib.tar.xz --transform 's|^lib/||' lib/ && rm -rf .gpu-bundle/lib
du -sh .gpu-bundle | awk '{print "bundle: " $1 " in .gpu-bundle/ (the device tool carries at most 64 MiB)"}'
