#!/usr/bin/env bash
# zaya generate end to end on a random tiny model with a Brown-trained tokenizer: the JSON result
# of a greedy run, the same seed giving the same text and another seed another, streaming with its
# statistics, stop strings, a JSON-lines batch with per-request settings, and bad input named.
#   tests/cli/generate.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
source "$SRC/tests/cli/tiny_decode_model.sh"

out=$("${G[@]}" --prompt "The jury said" --max-tokens 12 --temperature 0 --no-eos --json)
check "$([[ $(field tokens <<< "$out") == 12 && $(field finish_reason <<< "$out") == length ]] && echo 1 || echo 0)" \
  "greedy --json: 12 tokens, finish_reason length"
greedy=$(field text <<< "$out")

a=$("${G[@]}" --prompt "The jury said" --max-tokens 16 --temperature 1 --repetition-penalty 3 --seed 5 --no-eos --json | field text)
b=$("${G[@]}" --prompt "The jury said" --max-tokens 16 --temperature 1 --repetition-penalty 3 --seed 5 --no-eos --json | field text)
c=$("${G[@]}" --prompt "The jury said" --max-tokens 16 --temperature 1 --repetition-penalty 3 --seed 6 --no-eos --json | field text)
check "$([[ "$a" == "$b" && "$a" != "$c" ]] && echo 1 || echo 0)" "same seed same text, another seed another (repetition penalty 3: the random model repeats itself otherwise)"

"${G[@]}" --prompt "The jury said" --max-tokens 12 --temperature 0 --no-eos > "$WORK/stream.out" 2> "$WORK/stream.err"
streamed=$(cat "$WORK/stream.out")
check "$([[ "$streamed" == "$greedy" ]] && echo 1 || echo 0)" "the streamed text is the greedy text"
check "$(grep -qE 'time to first token [0-9.]+ ms, [0-9.]+ tokens/s.*cache [0-9]+ bytes per token \(multi-head attention: [0-9]+, grouped-query: [0-9]+\)' "$WORK/stream.err" && echo 1 || echo 0)" \
  "streaming prints time to first token, tokens/s and cache bytes"

# A stop string from the middle of the greedy text: the text ends just before it.
stop=$($PY -c "import sys; t = sys.argv[1]; print(t[len(t) // 2:len(t) // 2 + 3])" "$greedy")
if [[ -n "${stop// /}" ]]; then
  out=$("${G[@]}" --prompt "The jury said" --max-tokens 12 --temperature 0 --no-eos --stop "$stop" --json)
  want=$($PY -c "import sys; t, s = sys.argv[1:3]; print(t[:t.find(s)])" "$greedy" "$stop")
  check "$([[ $(field finish_reason <<< "$out") == stop && "$(field text <<< "$out")" == "$want" ]] && echo 1 || echo 0)" \
    "--stop '$stop' ends the text before it"
fi

cat > "$WORK/prompts.jsonl" <<'JSON'
{"prompt": "The jury said", "max_tokens": 12, "temperature": 0}
{"prompt": "In the morning", "max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "seed": 3}

{"prompt": "He", "max_tokens": 3, "top_k": 5, "repetition_penalty": 1.3}
JSON
"${G[@]}" --prompts "$WORK/prompts.jsonl" --no-eos > "$WORK/batch.out"
ok=$($PY - "$WORK/batch.out" "$greedy" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(int(len(rows) == 3 and rows[0]["text"] == sys.argv[2] and
          [r["tokens"] for r in rows] == [12, 5, 3]))
PY
)
check "$ok" "--prompts: one JSON line per request, per-request settings, the greedy text again"

# Continuous batching: 12 requests of ragged prompts and lengths, 5 at a time (slots freed by
# short requests go to waiting ones) and one at a time, give the same texts.
$PY - > "$WORK/many.jsonl" <<'PY'
import json
words = "The jury said that in the morning he would go to the city and see".split()
for i in range(12):
    print(json.dumps({"prompt": " ".join(words[: 1 + (5 * i) % len(words)]),
                      "max_tokens": 3 + (7 * i) % 19, "temperature": [0, 0.8][i % 2], "seed": i}))
PY
"${G[@]}" --prompts "$WORK/many.jsonl" --no-eos --batch 5 > "$WORK/many5.out" 2> "$WORK/many5.err"
"${G[@]}" --prompts "$WORK/many.jsonl" --no-eos --batch 1 > "$WORK/many1.out" 2> /dev/null
texts() { $PY -c "import json,sys; [print(json.dumps([json.loads(l)[k] for k in ('text','tokens','finish_reason')])) for l in open(sys.argv[1])]" "$1"; }
check "$([[ $(wc -l < "$WORK/many5.out") == 12 && "$(texts "$WORK/many5.out")" == "$(texts "$WORK/many1.out")" ]] && echo 1 || echo 0)" \
  "--prompts --batch 5 (continuous batching) gives the texts of --batch 1"
check "$(grep -qE '12 requests, up to 5 at once: [0-9]+ tokens decoded in batched steps at [0-9.]+ tokens/s' "$WORK/many5.err" && echo 1 || echo 0)" \
  "--prompts reports the batched decode rate"

# Tree attention: under mpirun every rank holds a shard of the cache; the text is one rank's.
MPIRUN=${MPIRUN:-$(command -v mpirun || true)}
if [[ -n "$MPIRUN" ]]; then
  for np in 2 3; do
    out=$(OMP_NUM_THREADS=1 "$MPIRUN" --oversubscribe --allow-run-as-root -np $np "${G[@]}" --prompt "The jury said" --max-tokens 12 --temperature 0 --no-eos --json)
    check "$([[ "$(field text <<< "$out")" == "$greedy" ]] && echo 1 || echo 0)" "tree attention over $np ranks: the greedy text of one rank"
  done
  OMP_NUM_THREADS=1 "$MPIRUN" --oversubscribe --allow-run-as-root -np 2 "${G[@]}" --prompt "The jury said" --max-tokens 4 --no-eos > /dev/null 2> "$WORK/tree.err"
  check "$(grep -q 'on each of 2 ranks (tree attention' "$WORK/tree.err" && echo 1 || echo 0)" "tree attention is reported"
else
  echo "SKIPPED: tree attention under mpirun (no mpirun on this machine)"
fi

expect_error() {  # expect_error WHAT EXPECTED -- command...
  local what=$1 expected=$2; shift 3
  local msg rc
  msg=$("$@" 2>&1); rc=$?
  check "$([[ $rc -ne 0 && $rc -lt 128 && "$msg" == *"$expected"* ]] && echo 1 || echo 0)" "$what: $expected"
}
echo '{"prompt": "x", "temprature": 1}' > "$WORK/typo.jsonl"
expect_error "unknown field" "typo.jsonl:1: unknown field 'temprature'" -- "${G[@]}" --prompts "$WORK/typo.jsonl"
printf '%s\n' '{"prompt": "x"}' '' '{"prompt": "The jury", "max_tokens": 300}' > "$WORK/long.jsonl"
expect_error "max_tokens past the context" "long.jsonl:3: 'max_tokens': must be in [0, 256], got 300" -- "${G[@]}" --prompts "$WORK/long.jsonl"
printf '%s\n' '{"prompt": "The jury", "max_tokens": 255}' > "$WORK/long2.jsonl"
expect_error "prompt + max_tokens past the context" "long2.jsonl:1: this model's context is 256 tokens; the prompt has" -- "${G[@]}" --prompts "$WORK/long2.jsonl"
expect_error "--max-tokens past int" "--max-tokens: 'max_tokens': must be in [0, 256], got 4294967301" -- "${G[@]}" --prompt x --max-tokens 4294967301
expect_error "a float seed" "--seed: 'seed': expected an integer, got 1e+30" -- "${G[@]}" --prompt x --seed 1e30
echo '{"prompt": "x", "top_p": 2}' > "$WORK/range.jsonl"
expect_error "out of range" "range.jsonl:1: 'top_p': must be in (0.0, 1.0], got 2" -- "${G[@]}" --prompts "$WORK/range.jsonl"
expect_error "both prompts" "not both" -- "${G[@]}" --prompt x --prompts "$WORK/prompts.jsonl"
expect_error "no prompt" "needs --prompt" -- "${G[@]}"
expect_error "no tokenizer" "has no tokenizer.json" -- "$ZAYA" generate --model "$WORK/dump/model" --prompt x
sed 's/"vocab_size": 97/"vocab_size": 300/' "$SRC/configs/tiny.json" > "$WORK/small_vocab.json"
"$ZAYA" debug-dump --config "$WORK/small_vocab.json" --out "$WORK/dump300" > /dev/null
expect_error "wrong tokenizer" "not this model's tokenizer" -- "$ZAYA" generate --model "$WORK/dump300/model" --tokenizer "$WORK/tokenizer.json" --prompt x
sed 's/"vocab_size": 97/"vocab_size": 600/' "$SRC/configs/tiny.json" > "$WORK/big_vocab.json"
"$ZAYA" debug-dump --config "$WORK/big_vocab.json" --out "$WORK/dump600" > /dev/null
expect_error "smaller tokenizer" "has 512 tokens but the model has 600" -- "$ZAYA" generate --model "$WORK/dump600/model" --tokenizer "$WORK/tokenizer.json" --prompt x

echo "generate: $fails failed"
exit $((fails > 0))
