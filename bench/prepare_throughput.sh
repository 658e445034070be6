#!/usr/bin/env bash
# `zaya data prepare` on JSON Lines + zstd against the machine's own limits, measured in the same
# run: reading and decompressing alone (`zstd -dc > /dev/null`) and zaya's tokenizer alone
# (`zaya tokenizer encode --stats`, one thread) on the same text. Prints MB/s for each and for
# prepare at --threads 1 and 2, then peak RSS (/usr/bin/time -v) of prepare on a small and a large
# corpus: streaming means the two peaks should match (memory set by threads and shard size).
# Prepare's wall time includes start-up (loading the tokenizer: about 1.2 s for Gemma-3's 33 MB
# tokenizer.json, then copying it for each extra worker) and finishing (the last shards, fsync,
# index.json): each prepare rate is printed twice, from the wall time on the whole corpus, and
# steady: bytes / (time on the whole corpus - time on a one-document corpus at the same thread
# count), in which those fixed costs cancel. The steady rate is what compares with the
# tokenizer alone (which excludes its load too) and what a multi-gigabyte corpus sees.
# Corpora are generated: documents of sentences drawn (seeded) from TEXT, as {"text": ...} lines.
# On a shared machine every figure is the best of BENCH_REPEAT runs (default 3; the runs of the
# different measurements take turns), which is nearest to what a quiet machine gives.
# LARGE_MB=0 skips the peak RSS runs.
# Usage: bench/prepare_throughput.sh ZAYA TOKENIZER TEXT [SMALL_MB=300] [LARGE_MB=1000]
set -euo pipefail
ZAYA=$1; TOK=$2; TEXT=$3; SMALL=${4:-300}; LARGE=${5:-1000}; REPEAT=${BENCH_REPEAT:-3}
WORK=${BENCH_WORK:-$(mktemp -d)}; mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

make_corpus() {  # make_corpus MB OUT.jsonl
  python3 - "$TEXT" "$1" "$2" <<'PY'
import json, random, sys
src, mb, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = [l.strip() for l in open(src, encoding="utf-8") if l.strip()]
rng = random.Random(0)
target, written = mb * 1000 * 1000, 0
with open(out, "w", encoding="utf-8") as f:
    while written < target:
        doc = "\n".join(rng.choice(lines) for _ in range(rng.randint(5, 60)))
        line = json.dumps({"text": doc, "id": written}) + "\n"
        f.write(line)
        written += len(line.encode())
PY
}

seconds() { python3 -c "import time; print(time.time())"; }
rate() { python3 -c "import sys; print(f'{int(sys.argv[1]) / 1e6 / (float(sys.argv[3]) - float(sys.argv[2])):.1f}')" "$@"; }

make_corpus "$SMALL" "$WORK/small.jsonl"
zstd -q -T0 "$WORK/small.jsonl" -o "$WORK/small.jsonl.zst"
python3 -c "
import json, sys
with open(sys.argv[2], 'w') as out:
    out.write('\n\n'.join(json.loads(l)['text'] for l in open(sys.argv[1])))" "$WORK/small.jsonl" "$WORK/small.txt"
jsonl_bytes=$(stat -c %s "$WORK/small.jsonl"); text_bytes=$(stat -c %s "$WORK/small.txt")
echo "corpus: $((jsonl_bytes / 1000000)) MB JSONL ($((text_bytes / 1000000)) MB of text), $(($(stat -c %s "$WORK/small.jsonl.zst") / 1000000)) MB as .zst"

elapsed() {  # elapsed CMD...: runs CMD (output dropped), prints its wall time in seconds
  local t0 t1
  t0=$(seconds)
  "$@" > /dev/null
  t1=$(seconds)
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$t0" "$t1"
}
prepare() {  # prepare INPUT THREADS
  rm -rf "$WORK/out"
  "$ZAYA" data prepare --input "$1" --tokenizer "$TOK" --out "$WORK/out" \
    --name bench --threads "$2" --no-progress
}
head -n 1 "$WORK/small.jsonl" | zstd -q > "$WORK/one.jsonl.zst"
declare -A best=()
keep_best() {  # keep_best NAME SECONDS: the shortest time seen for NAME
  if [[ -z ${best[$1]:-} ]] ||
    python3 -c "import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]))" "$2" "${best[$1]}"; then
    best[$1]=$2
  fi
}
tok_best=0
for ((run = 0; run < REPEAT; ++run)); do
  keep_best zstd "$(elapsed zstd -dc "$WORK/small.jsonl.zst")"
  line=$("$ZAYA" tokenizer encode --tokenizer "$TOK" --input "$WORK/small.txt" --stats)
  r=$(sed -E 's/.* ([0-9.]+) MB\/s.*/\1/' <<< "$line")
  if python3 -c "import sys; sys.exit(float(sys.argv[1]) <= float(sys.argv[2]))" "$r" "$tok_best"; then
    tok_best=$r; tok_line=$line
  fi
  for threads in 1 2; do
    keep_best "one$threads" "$(elapsed prepare "$WORK/one.jsonl.zst" "$threads")"
    keep_best "full$threads" "$(elapsed prepare "$WORK/small.jsonl.zst" "$threads")"
  done
done
echo "best of $REPEAT runs each; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "zstd -dc > /dev/null:          $(rate "$jsonl_bytes" 0 "${best[zstd]}") MB/s of JSONL"
echo "tokenizer alone (1 thread):    $tok_best MB/s of text   ($tok_line)"
for threads in 1 2; do
  fixed=${best[one$threads]}; wall=${best[full$threads]}
  echo "prepare --threads $threads:           $(rate "$jsonl_bytes" 0 "$wall") MB/s of JSONL, $(rate "$text_bytes" 0 "$wall") MB/s of text ($wall s)"
  echo "  steady (one document: $fixed s): $(rate "$jsonl_bytes" "$fixed" "$wall") MB/s of JSONL, $(rate "$text_bytes" "$fixed" "$wall") MB/s of text"
done
python3 -c "import sys; w1, w2, f1, f2 = map(float, sys.argv[1:])
print(f'--threads 2 / --threads 1:     {w1 / w2:.2f}x wall, {(w1 - f1) / (w2 - f2):.2f}x steady')" \
  "${best[full1]}" "${best[full2]}" "${best[one1]}" "${best[one2]}"
python3 -c "import sys; jb, tb, z, tok, w1, f1 = map(float, sys.argv[1:])
limit = min(jb / z, tok * 1e6 / tb * jb) / 1e6  # MB/s of JSONL: zstd alone, the tokenizer alone
print(f'--threads 1 / min(zstd, tokenizer alone) = {limit:.1f} MB/s of JSONL: '
      f'{jb / w1 / 1e6 / limit:.0%} wall, {jb / (w1 - f1) / 1e6 / limit:.0%} steady')" \
  "$jsonl_bytes" "$text_bytes" "${best[zstd]}" "$tok_best" "${best[full1]}" "${best[one1]}"
[ "$LARGE" -gt 0 ] || exit 0

peak_rss() {  # peak_rss INPUT: prepare --threads 2, prints its peak RSS in MB
  rm -rf "$WORK/out"
  /usr/bin/time -v "$ZAYA" data prepare --input "$1" --tokenizer "$TOK" --out "$WORK/out" \
    --name bench --threads 2 --no-progress 2> "$WORK/time.txt" > /dev/null
  awk '/Maximum resident set size/ {printf "%.0f", $6 / 1024}' "$WORK/time.txt"
}
echo "peak RSS, prepare --threads 2: $SMALL MB JSONL.zst: $(peak_rss "$WORK/small.jsonl.zst") MB"
rm -f "$WORK/small.txt" "$WORK/small.jsonl"
make_corpus "$LARGE" "$WORK/large.jsonl"
zstd -q -T0 --rm "$WORK/large.jsonl" -o "$WORK/large.jsonl.zst"
echo "peak RSS, prepare --threads 2: $LARGE MB JSONL.zst: $(peak_rss "$WORK/large.jsonl.zst") MB"
