#!/usr/bin/env bash
# The CPU ops' vector paths (backend/vector_path.h) through the command line: auto takes the best
# path this CPU runs (read here from /proc/cpuinfo, not from zaya's cpuid code); every path this
# binary carries and this CPU runs trains the same 16 steps to the same losses and model bytes and
# decodes the same text; a path the CPU lacks, or the binary lacks, or an unknown name is refused
# naming the flag or variable and the missing feature; and, in a build whose plain code is for any
# x86-64, no function outside the paths' own namespaces holds an AVX instruction (a template or
# inline function compiled for AVX2 under the baseline's name would run on a CPU without it).
#   tests/cli/vector_paths.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
source "$SRC/tests/check.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/train/device_run_config.sh"
write_device_run_config "$WORK"

info=$(env -u ZAYA_VECTOR_PATH "$ZAYA" info --config "$SRC/configs/tiny.json" 2>&1)
carried=$(echo "$info" | sed -n 's/^  in this binary: *\([a-z0-9, ]*\) (built for \([a-z0-9]*\)).*/\1/p')
own=$(echo "$info" | sed -n 's/^  in this binary: .*(built for \([a-z0-9]*\)).*/\1/p')
echo "this binary carries: $carried (built for $own)"
check "zaya info lists the paths this binary carries" test -n "$carried"

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
runs=(baseline)
if has avx2 fma; then runs+=(avx2); fi
if has avx2 fma avx512f avx512bw avx512dq avx512vl avx512cd; then runs+=(avx512); fi
paths=()
for p in "${runs[@]}"; do [[ ", $carried, " == *", $p, "* ]] && paths+=("$p"); done
best=${paths[-1]}
echo "paths this binary carries and this CPU runs (from /proc/cpuinfo): ${paths[*]}"
check "auto takes $best, the best of them" \
  grep -q "^  chosen: *$best (auto: the best of this binary's paths that this CPU runs)" \
  <(echo "$info")

# The same run on every path: losses, norms, loads and validation of each step, and the model.
for p in "${paths[@]}"; do
  env ZAYA_VECTOR_PATH="$p" "$ZAYA" --threads 2 train --config "$WORK/train.json" --no-progress \
    --out "$WORK/$p" > "$WORK/$p.log" 2>&1 || { echo "train on $p failed:"; cat "$WORK/$p.log"; exit 1; }
  check "$p: the log names the path" grep -q "^cpu vector path: $p (requested by ZAYA_VECTOR_PATH" \
    "$WORK/$p.log"
  check "$p: summary.json names the path" grep -q "\"vector_path\": \"$p\"" "$WORK/$p/summary.json"
done
# same_steps A B: equal step records but for the timing and the thread count (which the trainer
# lowers while other work holds the CPU: the numbers do not depend on it).
same_steps() {
  /usr/bin/python3 -c "
import json, sys
strip = lambda r: {k: v for k, v in r.items() if k not in ('tokens_per_s', 'threads', 'mfu', 'time_s', 'memory')}
a, b = [[strip(json.loads(l)) for l in open(f'$WORK/{r}/metrics.jsonl')] for r in sys.argv[1:3]]
sys.exit(not (len(a) == len(b) == 16 and a == b))" "$1" "$2"
}
for p in "${paths[@]}"; do
  [[ $p == "${paths[0]}" ]] && continue
  check "$p's 16 steps are bitwise ${paths[0]}'s (losses, norms, loads, val)" \
    same_steps "${paths[0]}" "$p"
  check "$p's model is bitwise ${paths[0]}'s" \
    cmp "$WORK/${paths[0]}/model/model.safetensors" "$WORK/$p/model/model.safetensors"
done
# Decoding (the batch-invariant products over 3 requests at once, the CCA cache, attention over
# it): the same text, greedy and sampled.
cat > "$WORK/prompts.jsonl" <<'JSONL'
{"prompt": "The jury said", "max_tokens": 18, "temperature": 0}
{"prompt": "It was", "max_tokens": 18, "temperature": 0.9, "seed": 4}
{"prompt": "He", "max_tokens": 16, "temperature": 0}
JSONL
for p in "${paths[@]}"; do
  "$ZAYA" --vector-path "$p" generate --model "$WORK/${paths[0]}/model" \
    --tokenizer "$WORK/tokenizer.json" --prompts "$WORK/prompts.jsonl" --batch 3 \
    > "$WORK/$p.gen" 2> "$WORK/$p.gen.err" \
    || { echo "generate on $p failed:"; cat "$WORK/$p.gen.err"; exit 1; }
done
texts() {  # texts FILE: each request's text, token count and finish reason (not the timings)
  /usr/bin/python3 -c "
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(repr((r['text'], r['tokens'], r['finish_reason'])))" "$1"
}
check "generation wrote 3 texts" test "$(texts "$WORK/${paths[0]}.gen" | wc -l)" -eq 3
for p in "${paths[@]}"; do
  check "$p generates ${paths[0]}'s texts" \
    test "$(texts "$WORK/$p.gen")" == "$(texts "$WORK/${paths[0]}.gen")"
done

# Refusals: clear, naming the flag or variable and what is missing; nothing runs.
refused() {  # refused "what" EXPECTED_SUBSTRING command...
  local what=$1 want=$2; shift 2
  local out rc
  out=$("$@" info --config "$SRC/configs/tiny.json" 2>&1); rc=$?
  if ((rc != 0)) && [[ $out == *"$want"* && $out != *"Illegal instruction"* ]]; then
    echo "ok   $what"; passes=$((passes + 1))
  else echo "FAIL $what (rc $rc):"; echo "$out" | tail -3; fails=$((fails + 1)); fi
}
refused "an unknown --vector-path is refused" \
  "--vector-path: unknown vector path 'sse4' (expected auto, avx512, avx2 or baseline)" \
  "$ZAYA" --vector-path sse4
refused "an unknown ZAYA_VECTOR_PATH is refused" "ZAYA_VECTOR_PATH: unknown vector path 'fast'" \
  env ZAYA_VECTOR_PATH=fast "$ZAYA"
# (What is hidden is all a path needs beyond the last, so the messages are the same on any CPU with
# AVX2: the lists below are complete.)
# (Where the plain code itself needs AVX2, a CPU without it is refused before main: below.)
for p in avx2 avx512; do
  [[ $own == baseline && ", $carried, " == *", $p, "* ]] || continue
  refused "$p on a CPU without avx2 and fma names them" "the $p vector path needs avx2 fma" \
    env ZAYA_TEST_CPU_LACKS="avx2 fma" "$ZAYA" --vector-path "$p"
done
if [[ ", $carried, " == *", avx512, "* ]]; then
  refused "avx512 on a CPU without AVX-512 names the features" \
    "the avx512 vector path needs avx512f avx512bw avx512dq avx512vl avx512cd, which this CPU lacks" \
    env ZAYA_TEST_CPU_LACKS="avx512f avx512bw avx512dq avx512vl avx512cd" "$ZAYA" --vector-path avx512
  out=$(env ZAYA_TEST_CPU_LACKS="avx512bw" "$ZAYA" info --config "$SRC/configs/tiny.json" 2>&1)
  want=$([[ ", $carried, " == *", avx2, "* ]] && has avx2 fma && echo avx2 || echo "$own")
  check "auto on a CPU without avx512bw takes $want" \
    grep -q "^  chosen: *$want (auto" <(echo "$out")
fi
if [[ $own != baseline ]]; then  # plain code for AVX2: a CPU without it is refused before main
  refused "a binary built for $own, on a CPU without avx2: refused at start, naming it" \
    "this zaya was built for CPUs with AVX2 and FMA (-march), which this CPU lacks" \
    env ZAYA_TEST_CPU_LACKS=avx2 "$ZAYA"
fi
for p in baseline avx2 avx512; do
  [[ ", $carried, " == *", $p, "* ]] && continue
  refused "$p, which this binary lacks, is refused" "the $p vector path is not in this binary" \
    "$ZAYA" --vector-path "$p"
done

# No AVX instruction outside the paths' namespaces (a build for any x86-64 only).
if [[ $own == baseline ]]; then
  for bin in "$ZAYA" "$(dirname "$ZAYA")/libzaya_cuda_emu_backend.so"; do
    leaks=$(objdump -d --no-show-raw-insn -C "$bin" | awk '
      /^[0-9a-f]+ <.*>:$/ { fn = $0; next }
      /%[yz]mm[0-9]/ && fn !~ /::avx2::|::avx512::/ { print fn }' | sort -u | head -5)
    check "$(basename "$bin"): no AVX register outside the vector paths' code" test -z "$leaks"
    [[ -n $leaks ]] && echo "$leaks"
  done
  planted=$(objdump -d --no-show-raw-insn -C "$ZAYA" | awk '/^[0-9a-f]+ <.*::avx512::.*>:$/ { fn = 1 }
    fn && /%zmm[0-9]/ { print "found"; exit }')
  check "the avx512 path's code uses zmm registers (the check above can see them)" \
    test "$planted" = found
else
  echo "skip the instruction check: this binary's plain code is for $own, not any x86-64"
fi

echo "vector paths: $passes passed, $fails failed"
((fails == 0))
