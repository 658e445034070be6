# Sourced by the decoding tests (tests/cli/generate.sh, tests/gpu/gpu_decode.sh) with ZAYA, SRC and
# WORK set: a tokenizer trained on Brown (512 tokens) and a random tiny model with that vocabulary
# as a Hugging Face directory WORK/dump/model; G is `zaya generate` on them; check and field are
# the tests' helpers (fails counts the failed checks).
PY=/usr/bin/python3
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 512 || exit 1
sed 's/"vocab_size": 97/"vocab_size": 512/' "$SRC/configs/tiny.json" > "$WORK/model.json"
"$ZAYA" debug-dump --config "$WORK/model.json" --out "$WORK/dump" --seed 3 > /dev/null || exit 1
G=("$ZAYA" generate --model "$WORK/dump/model" --tokenizer "$WORK/tokenizer.json")
fails=0
check() {  # check OK-BOOL WHAT
  if [[ $1 == 1 ]]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi
}
field() { $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['$1'])"; }
