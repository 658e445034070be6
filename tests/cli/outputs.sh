#!/usr/bin/env bash
# Outputs overwrite nothing they did not make (issue 39): every subcommand with an output flag,
# pointed at (a) an existing file or directory it did not make and (b) one of its own inputs, is
# refused (exit 1..127, a message naming the path and --force) and the bytes there are unchanged;
# --force replaces (a) but never (b). Then the cases of the issue: plot M -> M, export-hf onto a
# run's model/, import-hf onto step-00000000, a prepare of other input over a source of 200
# documents, eval --log-samples onto the task file and onto /dev/full; and a damaged checkpoint
# that a resume skips is moved aside, said so, and outlives the next saves and keep_last.
# Usage: outputs.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK"
source "$SRC/tests/check.sh"
export OMP_NUM_THREADS=1
W=$WORK

# The bytes of a file or of every file under a directory (names and contents).
digest() {
  if [[ -d $1 ]]; then (cd "$1" && find . -type f | sort | xargs -r sha256sum) | sha256sum
  else sha256sum < "$1"; fi
}
names_path_and_force() {  # names_path_and_force MESSAGE PATH
  [[ $1 == *"'$2'"* && $1 == *--force* ]] || { echo "$1" | tail -3; return 1; }
}
# refused NAME PATH [TARGET...] -- command...: exit 1..127, the message names PATH and --force,
# and each TARGET (default PATH) holds the same bytes afterwards.
refused() {
  local name=$1 path=$2; shift 2
  local targets=() before=() out rc i
  while [[ $1 != -- ]]; do targets+=("$1"); shift; done; shift
  ((${#targets[@]})) || targets=("$path")
  for i in "${!targets[@]}"; do before[i]=$(digest "${targets[i]}"); done
  out=$("$@" 2>&1); rc=$?
  check "$name: refused (exit $rc)" test "$rc" -ge 1 -a "$rc" -lt 128
  check "$name: the message names '$path' and --force" names_path_and_force "$out" "$path"
  for i in "${!targets[@]}"; do
    check "$name: ${targets[i]} unchanged" test "$(digest "${targets[i]}")" = "${before[i]}"
  done
}

# ---- fixtures: text, a tokenizer, a source, a random model, a checkpoint, metrics, a task file
cat "$SRC"/docs/*.md > "$W/text.txt"
"$ZAYA" tokenizer train --input "$W/text.txt" --vocab-size 300 --out "$W/tok.json" > /dev/null 2>&1 \
  || { echo "tokenizer train failed"; exit 1; }
/usr/bin/python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
words = open(f"{w}/text.txt", encoding="utf-8").read().split()
def docs(path, n, start):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": " ".join(words[start + 40 * i:start + 40 * i + 40])}) + "\n")
docs(f"{w}/docs200.jsonl", 200, 0)
docs(f"{w}/docs50.jsonl", 50, 9000)
PY
sed 's/"vocab_size": 97/"vocab_size": 300/' "$SRC/configs/tiny.json" > "$W/tiny.json"
"$ZAYA" data prepare --tokenizer "$W/tok.json" --input "$W/docs200.jsonl" --name src --out "$W/data" \
  --val-fraction 0.1 --no-progress > /dev/null 2>&1 || { echo "data prepare failed"; exit 1; }
"$ZAYA" debug-dump --config "$W/tiny.json" --out "$W/dump" > /dev/null 2>&1 || { echo "debug-dump failed"; exit 1; }
"$ZAYA" ckpt import-hf "$W/dump/model" "$W/ck" > /dev/null 2>&1 || { echo "import-hf failed"; exit 1; }
printf '{"step": 1, "tokens": 512, "loss": 5.5}\n{"step": 2, "tokens": 1024, "loss": 5.1}\n' > "$W/metrics.jsonl"
printf '{"context": "The model", "choices": [" trains", " sleeps"], "gold": 0}\n' > "$W/task.jsonl"
echo '[[1, 2, 3, 4]]' > "$W/tokens.json"
echo 'not made by zaya' > "$W/existing.txt"
mkdir -p "$W/existing_dir" && echo 'keep' > "$W/existing_dir/keep.txt"
mkdir -p "$W/holder" && cp "$W/tiny.json" "$W/holder/tiny.json"
E="$W/existing.txt"; ED="$W/existing_dir"; H="$W/holder"

# ---- every output flag: (a) something it did not make, (b) one of its inputs
refused "plot (a)" "$E" -- "$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$E"
refused "plot M -> M" "$W/metrics.jsonl" -- "$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$W/metrics.jsonl"
refused "plot M -> M with --force" "$W/metrics.jsonl" -- "$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$W/metrics.jsonl" --force
ln -s "$W/metrics.jsonl" "$W/metrics-link.svg"
refused "plot onto a symlink to M, --force" "$W/metrics-link.svg" "$W/metrics.jsonl" -- \
  "$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$W/metrics-link.svg" --force
refused "tokenizer train (a)" "$E" -- "$ZAYA" tokenizer train --input "$W/text.txt" --vocab-size 260 --out "$E"
refused "tokenizer train (b)" "$W/text.txt" -- "$ZAYA" tokenizer train --input "$W/text.txt" --vocab-size 260 --out "$W/text.txt" --force
refused "debug-dump (a)" "$ED" -- "$ZAYA" debug-dump --config "$W/tiny.json" --out "$ED"
refused "debug-dump (b)" "$H" -- "$ZAYA" debug-dump --config "$H/tiny.json" --out "$H" --force
refused "score (a)" "$E" -- "$ZAYA" score --model "$W/dump/model" --tokens "$W/tokens.json" --out "$E"
refused "score (b)" "$W/tokens.json" -- "$ZAYA" score --model "$W/dump/model" --tokens "$W/tokens.json" --out "$W/tokens.json" --force
refused "ckpt export-hf (a)" "$ED" -- "$ZAYA" ckpt export-hf "$W/ck/step-00000000" "$ED"
refused "ckpt export-hf (b)" "$W/ck/step-00000000" -- "$ZAYA" ckpt export-hf "$W/ck/step-00000000" "$W/ck/step-00000000" --force
refused "ckpt export-hf onto the root holding its source" "$W/ck" -- "$ZAYA" ckpt export-hf "$W/ck" "$W/ck" --force
refused "ckpt import-hf onto step-00000000" "$W/ck/step-00000000" -- "$ZAYA" ckpt import-hf "$W/dump/model" "$W/ck"
mkdir -p "$W/hfroot" && cp -r "$W/dump/model" "$W/hfroot/step-00000000"
refused "ckpt import-hf (b)" "$W/hfroot/step-00000000" -- "$ZAYA" ckpt import-hf "$W/hfroot/step-00000000" "$W/hfroot" --force
refused "eval --log-samples (a)" "$E" -- "$ZAYA" eval --model "$W/dump/model" --tokenizer "$W/tok.json" --tasks "$W/task.jsonl" --log-samples "$E"
refused "eval --log-samples onto the task file" "$W/task.jsonl" -- "$ZAYA" eval --model "$W/dump/model" --tokenizer "$W/tok.json" --tasks "$W/task.jsonl" --log-samples "$W/task.jsonl" --force
refused "data prepare (b)" "$W/data/src" -- "$ZAYA" data prepare --tokenizer "$W/tok.json" --input "$W/data/src/index.json" --name src --out "$W/data" --force --no-progress
refused "bench decode --json (a)" "$E" -- "$ZAYA" bench decode --config "$W/tiny.json" --json "$E"
refused "bench decode --json (b)" "$W/tiny.json" -- "$ZAYA" bench decode --config "$W/tiny.json" --json "$W/tiny.json" --force
refused "bench decode --save-model (a)" "$ED" -- "$ZAYA" bench decode --config "$W/tiny.json" --save-model "$ED"
refused "bench decode --save-model (b)" "$H" -- "$ZAYA" bench decode --config "$H/tiny.json" --save-model "$H" --force
refused "bench step --save-model (a)" "$ED" -- "$ZAYA" bench step --config "$W/tiny.json" --save-model "$ED"
refused "bench step --save-model (b)" "$H" -- "$ZAYA" bench step --config "$H/tiny.json" --save-model "$H" --force
refused "bench gemm --json (a)" "$E" -- "$ZAYA" bench gemm --shapes 8x8x8 --json "$E"
refused "bench membw --json (a)" "$E" -- "$ZAYA" bench membw --json "$E"
refused "bench ckpt --dir (a)" "$ED" -- "$ZAYA" bench ckpt --config "$W/tiny.json" --dir "$ED"
refused "bench ckpt --dir (b)" "$H" -- "$ZAYA" bench ckpt --config "$H/tiny.json" --dir "$H" --force
refused "size --write (a)" "$E" -- "$ZAYA" size --profile h100 --active-params 760M --world 64 --write "$E"
refused "size --write (b)" "$W/tiny.json" -- "$ZAYA" size --profile h100 --active-params 760M --world 64 --base "$W/tiny.json" --write "$W/tiny.json" --force
refused "size profile --out (a)" "$E" -- "$ZAYA" size profile --out "$E"

# ---- non-regular outputs: never exit 0 with nothing written
fails_loudly() {  # fails_loudly EXIT MESSAGE PATH
  [[ $1 -ge 1 && $1 -lt 128 && $2 == *"'$3'"* ]] || { echo "exit $1: $2" | tail -3; return 1; }
}
for dev in /dev/full /proc/version; do
  refused "eval --log-samples $dev" "$dev" "$W/task.jsonl" -- "$ZAYA" eval --model "$W/dump/model" \
    --tokenizer "$W/tok.json" --tasks "$W/task.jsonl" --log-samples "$dev"
  out=$("$ZAYA" eval --model "$W/dump/model" --tokenizer "$W/tok.json" --tasks "$W/task.jsonl" \
    --log-samples "$dev" --force 2>&1); rc=$?
  check "eval --log-samples $dev --force: fails loudly, naming it" fails_loudly "$rc" "$out" "$dev"
done

# ---- --force replaces what the command may replace, whole
"$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$W/p.svg" > /dev/null
"$ZAYA" plot --metrics "$W/metrics.jsonl" --out "$W/p.svg" --force > /dev/null; rc=$?
check "plot --force replaces its own earlier plot (exit $rc)" bash -c "[[ $rc -eq 0 ]] && head -c 4 '$W/p.svg' | grep -q '<svg'"
"$ZAYA" eval --model "$W/dump/model" --tokenizer "$W/tok.json" --tasks "$W/task.jsonl" \
  --log-samples "$E" --force > /dev/null 2>&1; rc=$?
check "eval --log-samples --force replaces a file (exit $rc)" bash -c "[[ $rc -eq 0 ]] && grep -q '\"task\"' '$E'"
"$ZAYA" ckpt export-hf "$W/ck/step-00000000" "$W/exp" > /dev/null 2>&1
echo stale > "$W/exp/stale.txt"
"$ZAYA" ckpt export-hf "$W/ck/step-00000000" "$W/exp" --force > /dev/null 2>&1; rc=$?
check "export-hf --force replaces the directory whole (exit $rc)" \
  bash -c "[[ $rc -eq 0 && -f '$W/exp/config.json' && ! -e '$W/exp/stale.txt' ]]"
check "nothing .tmp is left anywhere" test -z "$(find "$W" -name '*.tmp*' -print -quit)"

# ---- data prepare: a source of 200 documents stays 200
docs() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['documents'])" "$W/data/src/index.json"; }
check "the source holds 200 documents" test "$(docs)" = 200
refused "data prepare over a source with other input" "$W/data/src" -- \
  "$ZAYA" data prepare --tokenizer "$W/tok.json" --input "$W/docs50.jsonl" --name src --out "$W/data" --no-progress
check "... still 200 documents" test "$(docs)" = 200
"$ZAYA" data prepare --tokenizer "$W/tok.json" --input "$W/docs200.jsonl" --name src --out "$W/data" \
  --val-fraction 0.1 --resume --no-progress > "$W/resume.log" 2>&1; rc=$?
check "data prepare --resume of the same prepare still works (exit $rc)" bash -c "[[ $rc -eq 0 && \$(grep -c 'already complete' '$W/resume.log') -ge 1 ]]"
"$ZAYA" data prepare --tokenizer "$W/tok.json" --input "$W/docs50.jsonl" --name src --out "$W/data" \
  --val-fraction 0.1 --force --no-progress > /dev/null 2>&1; rc=$?
check "data prepare --force replaces it (exit $rc): 50 documents" test "$(docs)" = 50

# ---- a run: export-hf onto its model/, and a damaged checkpoint kept for inspection
/usr/bin/python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
model = json.load(open(f"{w}/tiny.json"))["model"]
model.update(num_stages=2, max_seq_len=32)
json.dump({"model": model,
           "data": {"dir": w + "/data", "sources": ["src"],
                    "phases": [{"name": "a", "tokens": 10**6, "seq_len": 16, "rope_theta": 10000.0,
                                "mixture": {"src": 1.0}}]},
           "train": {"seed": 5, "micro_batch": 2, "global_batch": 2, "max_steps": 12,
                     "eval_every": 1000, "eval_windows": 1, "log_every": 1, "sample_tokens": 0,
                     "checkpoint_every": 2, "keep_last": 2,
                     "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 2, "schedule": "cosine"}}},
          open(f"{w}/run.json", "w"), indent=1)
PY
train() { "$ZAYA" --threads 1 train --config "$W/run.json" --no-progress "$@"; }
train --out "$W/R" --max-steps 6 > "$W/R1.log" 2>&1 || { cat "$W/R1.log"; echo "train failed"; exit 1; }
refused "export-hf onto the run's own model/" "$W/R/model" -- "$ZAYA" ckpt export-hf "$W/R/ckpt/step-00000004" "$W/R/model"
refused "plot onto the run's own metrics" "$W/R/metrics.jsonl" -- "$ZAYA" plot --metrics "$W/R/metrics.jsonl" --out "$W/R/metrics.jsonl"
check "steps 4 and 6 are kept" test "$(cd "$W/R/ckpt" && echo step-*)" = "step-00000004 step-00000006"
printf '\x5a' | dd of="$W/R/ckpt/step-00000006/rank-00000.safetensors" bs=1 seek=300 conv=notrunc status=none
damaged=$(digest "$W/R/ckpt/step-00000006")
train --out "$W/R" --resume auto > "$W/R2.log" 2>&1; rc=$?
check "the resume past a damaged step 6 ran to the end (exit $rc)" test "$rc" = 0
check "... from step 4" grep -q "resumed from $W/R/ckpt/step-00000004" "$W/R2.log"
aside=$(cd "$W/R/ckpt" && ls -d step-00000006.damaged-* 2> /dev/null | head -1)
check "the damaged checkpoint was moved aside ($aside)" test -n "$aside"
check "... the log says so" grep -q "damaged checkpoint $W/R/ckpt/step-00000006 moved aside to $W/R/ckpt/$aside" "$W/R2.log"
check "... and its bytes outlived the saves of steps 6 to 12 and keep_last 2" \
  test "$(digest "$W/R/ckpt/$aside")" = "$damaged"
check "retention kept the newest two alongside it" \
  test "$(cd "$W/R/ckpt" && echo step-*)" = "$aside step-00000010 step-00000012"

echo "outputs: $passes passed, $fails failed"
exit $((fails > 0))
