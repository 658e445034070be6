#!/usr/bin/env bash
# Inputs are bounded (issue 39): every command that reads records refuses, at once and with a
# message naming the file and the limit or what was expected, a gzip bomb (in bounded memory), a
# special file (/dev/zero, a FIFO, a directory), a JSON line nested 100,000 deep and a line longer
# than --max-record-bytes. Each case must exit 1..127: a crash (SIGSEGV from a recursive parse,
# std::bad_alloc) or a hang fails it.
# Usage: bounded_inputs.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK"
fails=0; passes=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_error NAME EXPECTED_SUBSTRING -- command...   (under a 60 s timeout: a hang fails too)
expect_error() {
  local name=$1 expected=$2; shift 3
  local out rc
  out=$(timeout 60 "$@" 2>&1); rc=$?
  if [[ $rc -eq 0 || $rc -ge 124 ]]; then
    fail "$name: exit code $rc (want 1..123; 124 is a timeout, 128+ a signal)"
    echo "$out" | tail -5; return
  fi
  if [[ "$out" != *"$expected"* ]]; then
    fail "$name: message lacks '$expected':"; echo "$out" | tail -5; return
  fi
  if [[ "$out" == *"unexpected error"* || "$out" == *"bad_alloc"* ]]; then
    fail "$name: a raw library message"; echo "$out" | tail -5; return
  fi
  echo "ok   $name: $(echo "$out" | grep -m1 -E 'error|Error')"
  passes=$((passes + 1))
}

# Fixtures: a tokenizer and a prepared source from a little text, a random model of its vocabulary.
python3 - "$WORK/text.txt" <<'PY'
import sys
words = "the cat sat on a mat while dogs ran far away from home and back again".split()
docs = [" ".join(words[(d + w) % len(words)] for w in range(40)) for d in range(200)]
open(sys.argv[1], "w").write("\n\n".join(docs) + "\n")
PY
"$ZAYA" tokenizer train --input "$WORK/text.txt" --vocab-size 300 --out "$WORK/tok.json" \
  > "$WORK/tok.log" 2>&1 || { cat "$WORK/tok.log"; exit 1; }
"$ZAYA" data prepare --tokenizer "$WORK/tok.json" --input "$WORK/text.txt" --name s \
  --out "$WORK/data" --no-progress > "$WORK/prep.log" 2>&1 || { cat "$WORK/prep.log"; exit 1; }
MODEL='"model": {"vocab_size": 300, "hidden_size": 64, "num_stages": 2, "num_q_heads": 4,
  "num_kv_heads": 2, "head_dim": 8, "num_experts": 4, "expert_hidden": 16, "router_dim": 16,
  "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "max_seq_len": 64}'
echo "{$MODEL}" > "$WORK/model.json"
"$ZAYA" debug-dump --config "$WORK/model.json" --out "$WORK/dump" --seq 8 > /dev/null ||
  { echo "FAIL debug-dump"; exit 1; }
M=$WORK/dump/model

# 1. A gzip bomb: 2 GiB of zeros in 2 MB (32 concatenated members of 64 MiB each). Refused by the
#    decompression guard (not by the record limit, which would let a bomb of short lines through)
#    in bounded memory. (Its time is printed, not asserted: tests never assert on time; the
#    issue's "within 5 s" is measured by hand in the closing note.)
head -c 64M /dev/zero | gzip -1 > "$WORK/member.gz"
for _ in $(seq 32); do cat "$WORK/member.gz"; done > "$WORK/bomb.gz"
start=$(date +%s%N)
/usr/bin/time -f %M -o "$WORK/bomb.rss" "$ZAYA" data prepare --input "$WORK/bomb.gz" \
  --out "$WORK/out" --name bomb --no-progress > "$WORK/bomb.log" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
rss_kb=$(tail -1 "$WORK/bomb.rss")
msg=$(cat "$WORK/bomb.log")
if [[ $rc -ge 1 && $rc -le 127 && $msg == *"bomb.gz: decompresses to"* &&
      $msg == *"--max-decompression-ratio"* && $rss_kb -le 300000 ]]; then
  echo "ok   gzip-bomb: rc $rc, ${ms} ms, peak RSS ${rss_kb} KB: $(grep -m1 error "$WORK/bomb.log")"
  passes=$((passes + 1))
else
  fail "gzip-bomb: rc $rc, peak RSS ${rss_kb} KB (want <= 300000), ${ms} ms"
  tail -3 "$WORK/bomb.log"
fi
expect_error tokenizer-train-gzip-bomb "--max-decompression-ratio" -- \
  "$ZAYA" tokenizer train --input "$WORK/bomb.gz" --vocab-size 300 --out "$WORK/t.json"

# 2. Special files where a regular file is expected, refused before anything is read.
REG="a character device; expected a regular file"
expect_error prepare-dev-zero "--input /dev/zero: $REG" -- \
  "$ZAYA" data prepare --input /dev/zero --out "$WORK/out" --name z --no-progress
expect_error tokenizer-train-dev-zero "--input /dev/zero: $REG" -- \
  "$ZAYA" tokenizer train --input /dev/zero --vocab-size 300 --out "$WORK/t.json"
expect_error generate-prompts-dev-zero "--prompts /dev/zero: $REG" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/tok.json" --prompts /dev/zero
expect_error eval-tasks-dev-zero "--tasks /dev/zero: $REG" -- \
  "$ZAYA" eval --model "$M" --tokenizer "$WORK/tok.json" --tasks /dev/zero
mkfifo "$WORK/fifo.jsonl"
expect_error prepare-fifo "--input $WORK/fifo.jsonl: a FIFO (named pipe); expected a regular file" -- \
  "$ZAYA" data prepare --input "$WORK/fifo.jsonl" --out "$WORK/out" --name f --no-progress
expect_error generate-prompts-fifo "a FIFO (named pipe); expected a regular file" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/tok.json" --prompts "$WORK/fifo.jsonl"
expect_error generate-prompts-directory "--prompts $WORK: a directory; expected a regular file" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/tok.json" --prompts "$WORK"

# 3. A task line nested 100,000 deep: an error naming FILE:LINE, not a SIGSEGV.
python3 -c '
import sys
good = "{\"context\": \"the cat\", \"choices\": [\" sat\", \" ran\"], \"gold\": 0}\n"
open(sys.argv[1], "w").write(good + "[" * 100000 + "]" * 100000 + "\n")
open(sys.argv[2], "w").write("{\"prompt\": \"the\", \"max_tokens\": 4}\n{\"prompt\": " + "[" * 100000 + "]" * 100000 + "}\n")
' "$WORK/deep.jsonl" "$WORK/deep_prompts.jsonl"
DEEP="nested more than 512 levels deep"
expect_error eval-tasks-nested "$WORK/deep.jsonl:2: JSON $DEEP" -- \
  "$ZAYA" eval --model "$M" --tokenizer "$WORK/tok.json" --tasks "$WORK/deep.jsonl"
expect_error generate-prompts-nested "$WORK/deep_prompts.jsonl:2: JSON $DEEP" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/tok.json" --prompts "$WORK/deep_prompts.jsonl"
cat > "$WORK/train.json" <<JSON
{$MODEL,
 "data": {"dir": "$WORK/data", "sources": ["s"],
          "phases": [{"name": "a", "tokens": 1024, "seq_len": 16, "rope_theta": 10000.0,
                      "mixture": {"s": 1.0}}]},
 "train": {"seed": 1, "micro_batch": 4, "global_batch": 8, "eval_every": 4, "eval_windows": 2,
           "out_dir": "$WORK/run", "tokenizer": "$WORK/tok.json", "sample_tokens": 0,
           "optim": {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 1, "schedule": "cosine"}},
 "eval": {"tasks": ["$WORK/deep.jsonl"]}}
JSON
expect_error train-eval-tasks-nested "$WORK/deep.jsonl:2: JSON $DEEP" -- \
  "$ZAYA" --threads 1 train --no-progress --config "$WORK/train.json"
# A micro-batch whose step cannot fit in this machine's memory: refused before step 1, naming the
# field, the phase and what would fit (it ran into the OOM killer at step 1 before).
sed 's/"micro_batch": 4, "global_batch": 8/"micro_batch": 2000000, "global_batch": 2000000/; /"eval": /d; s/"schedule": "cosine"}},$/"schedule": "cosine"}}}/' \
  "$WORK/train.json" > "$WORK/huge_batch.json"
expect_error train-micro-batch-memory "'train.micro_batch' 2000000 at data phase 'a' (seq_len 16) needs at least" -- \
  "$ZAYA" --threads 1 train --no-progress --config "$WORK/huge_batch.json"
if [[ -e $WORK/run ]]; then fail "train-micro-batch-memory: the run directory was made"; fi
{ printf '{"model": '; python3 -c 'print("[" * 100000 + "]" * 100000 + "}")'; } > "$WORK/deep_config.json"
expect_error config-nested "$WORK/deep_config.json: JSON $DEEP" -- \
  "$ZAYA" info --config "$WORK/deep_config.json"

# 4. A one-line record over --max-record-bytes: FILE:LINE, the limit and the flag.
python3 -c '
import json, sys
open(sys.argv[1], "w").write(json.dumps({"text": "short"}) + "\n" + json.dumps({"text": "x" * 5000}) + "\n")
' "$WORK/long.jsonl"
expect_error prepare-long-line "$WORK/long.jsonl:2: a line longer than the limit of 1000 bytes" -- \
  "$ZAYA" data prepare --input "$WORK/long.jsonl" --out "$WORK/out" --name l --no-progress \
  --max-record-bytes 1000
expect_error tokenizer-train-long-line "--max-record-bytes" -- \
  "$ZAYA" tokenizer train --input "$WORK/long.jsonl" --vocab-size 300 --out "$WORK/t.json" \
  --max-record-bytes 1000
expect_error eval-tasks-long-line "$WORK/deep.jsonl:2: a line longer than the limit of 1000 bytes" -- \
  "$ZAYA" eval --model "$M" --tokenizer "$WORK/tok.json" --tasks "$WORK/deep.jsonl" \
  --max-record-bytes 1000
expect_error generate-prompts-long-line "deep_prompts.jsonl:2: a line longer than the limit" -- \
  "$ZAYA" generate --model "$M" --tokenizer "$WORK/tok.json" --prompts "$WORK/deep_prompts.jsonl" \
  --max-record-bytes 1000
# Within the limit the same file prepares.
if "$ZAYA" data prepare --input "$WORK/long.jsonl" --out "$WORK/out" --name ok --no-progress \
    --max-record-bytes 6000 > "$WORK/ok.log" 2>&1; then
  echo "ok   prepare-within-limit"; passes=$((passes + 1))
else
  fail "prepare-within-limit"; tail -3 "$WORK/ok.log"
fi

echo "bounded_inputs: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
