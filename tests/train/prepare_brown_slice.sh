#!/usr/bin/env bash
# Shared by the end-to-end training tests: a BPE tokenizer and token shards (10 % validation) from
# the first 400 KB of the Brown corpus, written to WORK/tokenizer.json and WORK/data/brown.
# Usage: prepare_brown_slice.sh ZAYA SRC WORK VOCAB_SIZE   (WORK is emptied first)
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; VOCAB=$4
BROWN=${ZAYA_BROWN_TEXT:-$SRC/data/raw/brown.txt}  # the GPU bundle carries its own slice
if [[ ! -s $BROWN ]]; then
  echo "$BROWN is missing; run scripts/setup.sh (it fetches the Brown corpus)"; exit 1
fi
rm -rf "$WORK"; mkdir -p "$WORK"
head -c 400000 "$BROWN" > "$WORK/brown.txt"
"$ZAYA" tokenizer train --input "$WORK/brown.txt" --vocab-size "$VOCAB" \
  --out "$WORK/tokenizer.json" > "$WORK/tok.log" 2>&1 || { cat "$WORK/tok.log"; exit 1; }
"$ZAYA" data prepare --tokenizer "$WORK/tokenizer.json" --input "$WORK/brown.txt" --name brown \
  --out "$WORK/data" --val-fraction 0.1 > "$WORK/prep.log" 2>&1 || { cat "$WORK/prep.log"; exit 1; }
