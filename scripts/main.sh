#!/usr/bin/env bash
# The main job on the bundled default. Until `zaya train` lands (the training issue) this is the
# model benchmark: install, build, describe configs/small.json, and measure forward+backward
# throughput against the PyTorch reference on the same model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset default > /dev/null
cmake --build build -j "$(nproc)" --target zaya
./build/zaya info --config configs/small.json
bench/step_vs_pytorch.sh configs/small.json 8 256 5
