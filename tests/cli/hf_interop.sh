#!/usr/bin/env bash
# Hugging Face interop through the command line:
#   - an HF model dir (debug-dump), the zaya checkpoint imported from it, and the HF dir exported
#     back from that checkpoint (sharded) score to byte-identical output files (logits, log_probs,
#     loss, every gradient);
#   - a bf16 export is about half the size and still scores;
#   - --text gives the same output as --tokens with the tokenizer's ids, with --tokenizer and with
#     the model directory's tokenizer.json;
#   - bad input (another model_type, a missing shard, a tensor of the wrong shape, ...) exits 1
#     with a message naming the field, file or tensor.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
fails=0; passes=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pass() { echo "ok   $*"; passes=$((passes + 1)); }

# same NAME A B: the two files are byte-identical.
same() {
  if cmp -s "$2" "$3"; then pass "$1"; else fail "$1: $2 and $3 differ"; fi
}

# expect_error NAME EXPECTED_SUBSTRING -- command...
expect_error() {
  local name=$1 expected=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -eq 0 || $rc -ge 128 ]]; then fail "$name: exit code $rc (want 1..127)"; echo "$out" | tail -3; return; fi
  if [[ "$out" != *"$expected"* ]]; then fail "$name: message lacks '$expected':"; echo "$out" | tail -3; return; fi
  pass "$name: $(echo "$out" | grep -m1 error)"
}

"$ZAYA" debug-dump --config "$SRC/configs/tiny.json" --out dump --seq 12 --batch 2 > /dev/null || fail "debug-dump"
echo '[[2, 17, 5, 96, 40, 3, 3, 81, 0, 9], [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]]' > tokens.json
score() { "$ZAYA" score --tokens tokens.json --grads "$@"; }

# ---- round trip: HF -> checkpoint -> HF (sharded), all scored identically
score --model dump/model --out hf.safetensors > hf.json || fail "score HF dir"
"$ZAYA" ckpt import-hf dump/model ck > /dev/null || fail "import-hf"
"$ZAYA" ckpt inspect ck/step-00000000 > /dev/null || fail "inspect the imported checkpoint"
score --model ck/step-00000000 --out ck.safetensors > ck.json || fail "score checkpoint"
same "checkpoint imported from HF scores identically" hf.safetensors ck.safetensors
"$ZAYA" ckpt export-hf ck/step-00000000 hf2 --max-shard-size 30KB > /dev/null || fail "export-hf"
shards=$(ls hf2/model-*-of-*.safetensors 2> /dev/null | wc -l)
if [[ -f hf2/model.safetensors.index.json && $shards -gt 1 ]]; then pass "sharded export: $shards shards + index"; else fail "sharded export: $shards shards"; fi
score --model hf2 --out hf2.safetensors > /dev/null || fail "score exported dir"
same "HF dir exported from the checkpoint scores identically" hf.safetensors hf2.safetensors
same "summary line" hf.json ck.json

# ---- bf16 export: half the bytes, still a model
"$ZAYA" ckpt export-hf ck/step-00000000 hf_bf16 --dtype bf16 > /dev/null || fail "export-hf bf16"
full=$(du -cb hf2/model-*.safetensors | tail -1 | cut -f1); half=$(stat -c %s hf_bf16/model.safetensors)
if (( half * 100 < full * 55 )); then pass "bf16 export is $half bytes vs $full"; else fail "bf16 export is $half bytes vs $full"; fi
score --model hf_bf16 --out bf16.safetensors > /dev/null || fail "score bf16 export"

# ---- --text equals --tokens with the tokenizer's ids
sed 's/"vocab_size": 97/"vocab_size": 300/' "$SRC/configs/tiny.json" > v300.json
"$ZAYA" debug-dump --config v300.json --out dump300 --seq 8 > /dev/null || fail "debug-dump v300"
for i in 1 2 3 4 5 6; do echo "the quick brown fox jumps over the lazy dog $i times"; done > text.txt
"$ZAYA" tokenizer train --input text.txt --vocab-size 280 --out tok.json > /dev/null || fail "tokenizer train"
"$ZAYA" tokenizer encode --tokenizer tok.json --input text.txt --json > ids.json || fail "tokenizer encode"
"$ZAYA" score --model dump300/model --tokens ids.json --out ids.safetensors > /dev/null || fail "score ids"
"$ZAYA" score --model dump300/model --text text.txt --tokenizer tok.json --out text.safetensors > /dev/null || fail "score --text"
same "--text scores like --tokens" ids.safetensors text.safetensors
cp tok.json dump300/model/tokenizer.json
"$ZAYA" score --model dump300/model --text text.txt --out text2.safetensors > /dev/null || fail "score --text, model's tokenizer"
same "--text with the model directory's tokenizer.json" ids.safetensors text2.safetensors

# ---- bad input
cp -r dump/model llama
sed -i 's/"model_type": "zaya"/"model_type": "llama"/' llama/config.json
expect_error other-model-type "field 'model_type' must be \"zaya\", got \"llama\"" -- score --model llama --out x.safetensors
cp -r hf2 noshard; rm noshard/model-00002-of-*.safetensors
expect_error missing-shard "shard 'model-00002-of-" -- score --model noshard --out x.safetensors
cp -r dump/model wide
sed -i 's/"vocab_size": 97/"vocab_size": 98/' wide/config.json
expect_error wrong-shape "tensor 'model.embed_tokens.weight' has shape [97, 64], the config needs [98, 64]" -- score --model wide --out x.safetensors
cp -r dump/model unknown
sed -i 's/"model_type"/"rope_type": "yarn", "model_type"/' unknown/config.json
expect_error unknown-field "unknown field 'rope_type'" -- score --model unknown --out x.safetensors
echo '[[1, 2, 3], [4, 5]]' > ragged.json
expect_error ragged-batch "sequence 1 has 2 tokens" -- "$ZAYA" score --model dump/model --tokens ragged.json --out x.safetensors
echo '[1, 2, 300]' > big.json
expect_error token-out-of-vocab "token id 300 at position 2 is outside the vocabulary" -- "$ZAYA" score --model dump/model --tokens big.json --out x.safetensors
expect_error no-tokenizer "--text needs a tokenizer" -- "$ZAYA" score --model dump/model --text text.txt --out x.safetensors
expect_error no-model "is not a directory" -- score --model nope --out x.safetensors
expect_error bad-dtype "--dtype: 'fp16'" -- "$ZAYA" ckpt export-hf ck/step-00000000 x --dtype fp16
expect_error bad-shard-size "--max-shard-size: '5XB'" -- "$ZAYA" ckpt export-hf ck/step-00000000 x --max-shard-size 5XB

echo "hf_interop: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
