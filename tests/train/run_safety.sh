#!/usr/bin/env bash
# Nothing a user types loses a run (issue 11 §2), end to end on a tiny model:
#   - numbers that do not fit their field, a phase without validation windows and a missing
#     tokenizer are refused before step 1, and nothing is written;
#   - SIGTERM and SIGUSR1 mid-run end the step, save a checkpoint and exit 0, at 1 rank and (to
#     mpirun, as Slurm or Ctrl-C would) at 2 ranks; resuming gives the uninterrupted weights;
#   - a second run into a finished run directory is refused and changes nothing; --resume auto on
#     a finished run does nothing; a resume that changes the model, data, seed or batches is
#     refused, one that changes the optimizer needs --allow-changes;
#   - when every checkpoint is damaged, --resume auto stops and deletes nothing;
#   - a torn last metrics line (a kill mid-write) does not stop a resume.
# Usage: run_safety.sh ZAYA SRC WORK [MPIEXEC] [PART]
# PART: refusals (the numbers and run directories checked before step 1), one_rank (signals,
# resume rules, torn metrics, damaged checkpoints at 1 rank), two_ranks (signals to mpirun), or
# all (the default). ctest runs the parts as three tests, side by side under the sanitizers.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIEXEC=${4:-}; PART=${5:-all}
want() { [[ $PART == all || $PART == "$1" ]]; }
export OMP_NUM_THREADS=1
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/check.sh"
py() { /usr/bin/python3 -c "$@"; }

# config NAME STEPS [python statements editing c]: writes WORK/NAME.json from the tiny model.
config() {
  /usr/bin/python3 - "$SRC/configs/tiny.json" "$WORK" "$1" "$2" "${3:-}" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))["model"]
model.update(vocab_size=300, max_seq_len=512)
work, name, steps, edit = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
c = {"model": model,
     "data": {"dir": work + "/data", "sources": ["brown"],
              "phases": [{"name": "a", "tokens": 10**7, "seq_len": 32, "rope_theta": 10000.0,
                          "mixture": {"brown": 1.0}}]},
     "train": {"seed": 5, "micro_batch": 8, "global_batch": 16, "max_steps": steps,
               "eval_every": 1000, "eval_windows": 4, "log_every": 5, "sample_tokens": 0,
               "checkpoint_every": 5, "keep_last": 3,
               "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "schedule": "cosine"}}}
exec(edit)
json.dump(c, open(f"{work}/{name}.json", "w"), indent=1)
PY
}
train() { "$ZAYA" --threads 1 train --no-progress "$@"; }
# Every file of a run but its heartbeats (liveness beats for a supervisor, rewritten by any start).
digest() { (cd "$1" && find . -type f -not -path './heartbeat/*' | sort | xargs sha256sum) | sha256sum; }

# ---- numbers validated against the type that holds them; everything checked before step 1
if want refusals; then
expect_refused() {  # expect_refused WHAT MESSAGE EDIT
  config bad 20 "$3"
  rm -rf "$WORK/bad_out"
  local out; out=$(train --config "$WORK/bad.json" --out "$WORK/bad_out" 2>&1); local rc=$?
  check "$1: refused (exit $rc) naming it" bash -c "[[ $rc -ge 1 && $rc -lt 128 ]] && grep -qF -- \"\$1\" <<< \"\$2\"" _ "$2" "$out"
  check "$1: nothing written" test ! -e "$WORK/bad_out/metrics.jsonl"
}
expect_refused "keep_last 2^31" "'train.keep_last' must be an integer in [1, 2147483647]" 'c["train"]["keep_last"] = 2**31'
expect_refused "keep_last 2^32" "'train.keep_last' must be an integer in [1, 2147483647]" 'c["train"]["keep_last"] = 2**32'
expect_refused "micro_batch 2^32" "'train.micro_batch' must be an integer" 'c["train"]["micro_batch"] = 2**32'
expect_refused "eval_every 2^32" "'train.eval_every' must be an integer" 'c["train"]["eval_every"] = 2**32'
expect_refused "eval_windows 2^32+1" "'train.eval_windows' must be an integer" 'c["train"]["eval_windows"] = 2**32 + 1'
expect_refused "seed 2^64" "'train.seed' must be an integer" 'c["train"]["seed"] = 2**64 - 1'
expect_refused "mixture weight 1e308 twice" "mixture.brown' must be a finite number in [0, 1e+12]" 'c["data"]["phases"][0]["mixture"]["brown"] = 1e308'
expect_refused "hidden_size 2^40" "'model.hidden_size' must be ≤ 1048576" 'c["model"]["hidden_size"] = 2**40'
expect_refused "no validation window of the phase's length" "no source's validation split has a window of 200001 tokens" 'c["data"]["phases"][0]["seq_len"] = 200000; c["model"]["max_seq_len"] = 200000'
expect_refused "missing tokenizer" "nope/tokenizer.json" 'c["train"]["tokenizer"] = "'"$WORK"'/nope/tokenizer.json"; c["train"]["sample_tokens"] = 5'
# Issue 31: silent acceptances, and what the end of a run does, tried before step 1.
expect_refused "a batch ramp that starts above the batch" "'train.optim.batch_ramp.start_sequences' (64) is larger than the global batch (16) of data phase 'a'" 'c["train"]["optim"]["batch_ramp"] = {"start_sequences": 64, "ramp_steps": 10}'
"$ZAYA" tokenizer train --input "$WORK/brown.txt" --vocab-size 280 --out "$WORK/tok280.json" > /dev/null 2>&1
expect_refused "samples decoded by another tokenizer than the data's" "'train.tokenizer' $WORK/tok280.json has 280 tokens but the data was prepared with a tokenizer of 300" 'c["train"].update(tokenizer="'"$WORK"'/tok280.json", sample_tokens=5)'
# ... the other way round too (issue 31's data of 257 tokens under a tokenizer of 4096), and for
# the eval tasks, which tokenize with 'train.tokenizer' even when no sample is drawn.
"$ZAYA" tokenizer train --input "$WORK/brown.txt" --vocab-size 400 --out "$WORK/tok400.json" > /dev/null 2>&1
expect_refused "samples decoded by a larger tokenizer than the data's" "'train.tokenizer' $WORK/tok400.json has 400 tokens but the data was prepared with a tokenizer of 300" 'c["model"]["vocab_size"] = 512; c["train"].update(tokenizer="'"$WORK"'/tok400.json", sample_tokens=5)'
echo '{"text": "The jury said it did find that the election was conducted."}' > "$WORK/cloze.jsonl"
expect_refused "eval tasks tokenized by another tokenizer than the data's" "has 280 tokens but the data was prepared with a tokenizer of 300 (the sources' index.json); 'eval.tasks' would be tokenized" 'c["train"]["tokenizer"] = "'"$WORK"'/tok280.json"; c["eval"] = {"tasks": ["'"$WORK"'/cloze.jsonl"]}'
expect_refused "a sample prompt of no tokens (the end of the run)" "'train.sample_prompts'[1] encodes to no tokens" 'c["train"].update(tokenizer="'"$WORK"'/tokenizer.json", sample_tokens=5, sample_prompts=["The", ""])'
cp -r "$WORK/data" "$WORK/data_eos"
py "import json; p='$WORK/data_eos/brown/index.json'; j=json.load(open(p)); j['tokenizer']['eos_id']=300; json.dump(j, open(p, 'w'))"
expect_refused "eos_id outside the vocabulary in index.json" "index.json: field 'tokenizer.eos_id' 300 is outside the vocabulary [0, 300)" 'c["data"]["dir"] = "'"$WORK"'/data_eos"'
# Issue 41: a device backend's plan against --device-memory, before step 1: the tiny model at
# micro-batch 8 plans 6.20 MiB on cpu-as-device (every token routed to an expert); in 5000 KiB only full recompute (of the options
# built) fits.
config devmem 20
out=$(train --config "$WORK/devmem.json" --out "$WORK/devmem_out" --device cpu-as-device --device-memory 5000K 2>&1); rc=$?
check "a plan past --device-memory is refused, naming the flag and the options that fit (exit $rc)" \
  bash -c "[[ $rc -ge 1 && $rc -lt 128 ]] && grep -q 'plans 6.20 MiB of device memory per rank, more than the 4.88 MiB of --device-memory' <<< \"\$1\" && grep -q 'options that fit at this micro-batch: .*--activation-storage fp32, train.recompute \"full\", train.zero_stage 1;' <<< \"\$1\"" _ "$out"
check "... and nothing written" test ! -e "$WORK/devmem_out/metrics.jsonl"
out=$(train --config "$WORK/devmem.json" --out "$WORK/devmem_out" --device cpu-as-device --device-memory 64M 2>&1); rc=$?
check "... and in 64 MiB it trains, printing the plan (exit $rc)" \
  bash -c "[[ $rc == 0 ]] && grep -q 'device memory plan: 6.20 MiB of 64.00 MiB per rank (90.3 % free)' <<< \"\$1\"" _ "$out"
config outfile 20 'c["train"]["out_dir"] = "'"$WORK"'/brown.txt"'
out=$(train --config "$WORK/outfile.json" 2>&1); rc=$?
check "a train.out_dir that is a file is refused, named (exit $rc)" \
  bash -c "[[ $rc -ge 1 && $rc -lt 128 ]] && grep -q 'brown.txt. is a file; it must be a directory' <<< \"\$1\"" _ "$out"
config endfails 20
mkdir -p "$WORK/end_out" && : > "$WORK/end_out/model"
out=$(train --config "$WORK/endfails.json" --out "$WORK/end_out" --resume auto 2>&1); rc=$?
check "a run whose end could not write its model is refused before step 1 (exit $rc)" \
  bash -c "[[ $rc -ge 1 && $rc -lt 128 ]] && grep -q 'end_out/model. is a file; the end of the run writes the model there' <<< \"\$1\"" _ "$out"
check "... and nothing written" test ! -e "$WORK/end_out/metrics.jsonl"
config huge 20 'c["model"].update(hidden_size=2**20, vocab_size=2**31 - 1, num_stages=4096, expert_hidden=2**20)'
out=$("$ZAYA" info --config "$WORK/huge.json" 2>&1); rc=$?
check "zaya info on the largest accepted sizes prints sane counts (exit $rc)" \
  bash -c "[[ $rc == 0 ]] && grep -q 'parameters:' <<< \"\$1\" && ! grep -q -- '-[0-9]' <<< \"\$(grep total <<< \"\$1\")\"" _ "$out"
fi

# ---- the uninterrupted reference and signals at 1 rank
# Long enough that a signal sent after 8 steps arrives well before the end: 300 steps in a release
# build; under the sanitizers (ASAN_OPTIONS set by scripts/test.sh) each step is ~10x slower and
# the signals land by step ~30, so 120 steps keep the margin at a third of the time.
RUN_STEPS=300
[[ -n ${ASAN_OPTIONS:-} ]] && RUN_STEPS=120
config run $RUN_STEPS

# stop_with SIGNAL OUT [launcher...]: starts a run, signals it once 8 steps are logged, waits.
stop_with() {
  local sig=$1 out=$2; shift 2
  rm -rf "$out"
  "$@" > "$out.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do
    [[ -s $out/metrics.jsonl && $(wc -l < "$out/metrics.jsonl") -ge 8 ]] && break
    sleep 0.05
  done
  kill -"$sig" "$pid"
  wait "$pid"; STOP_RC=$?
}
if want one_rank; then
train --config "$WORK/run.json" --out "$WORK/A" > "$WORK/A.log" 2>&1
check "reference run: $RUN_STEPS steps" test "$(grep -c . "$WORK/A/metrics.jsonl")" = $RUN_STEPS
for sig in TERM USR1; do
  stop_with "$sig" "$WORK/sig_$sig" "$ZAYA" --threads 1 train --no-progress --config "$WORK/run.json" \
    --out "$WORK/sig_$sig"
  check "SIG$sig at 1 rank: exit 0" test "$STOP_RC" = 0
  check "SIG$sig at 1 rank: says why it stopped" grep -q "stopped by SIG$sig" "$WORK/sig_$sig.log"
  stopped=$(py "import json; print(json.load(open('$WORK/sig_$sig/summary.json'))['steps'])" 2> /dev/null || echo none)
  check "SIG$sig at 1 rank: stopped before the end (step $stopped) with a checkpoint of that step" \
    bash -c "[[ $stopped != none && $stopped -lt $RUN_STEPS ]] && test -f $WORK/sig_$sig/ckpt/step-$(printf %08d "${stopped/none/0}")/COMPLETE"
  train --config "$WORK/run.json" --out "$WORK/sig_$sig" --resume auto > "$WORK/sig_$sig.resume.log" 2>&1
  check "SIG$sig at 1 rank: the resumed run ends bitwise equal to the uninterrupted one" \
    cmp "$WORK/A/model/model.safetensors" "$WORK/sig_$sig/model/model.safetensors"
done

# ---- run directories
before=$(digest "$WORK/A")
out=$(train --config "$WORK/run.json" --out "$WORK/A" 2>&1); rc=$?
check "a new run into a finished run's directory is refused (exit $rc)" \
  bash -c "[[ $rc -ne 0 ]] && grep -q 'already holds a run' <<< \"\$1\"" _ "$out"
check "... and nothing of the finished run changed" test "$(digest "$WORK/A")" = "$before"
out=$(train --config "$WORK/run.json" --out "$WORK/A" --resume auto 2>&1); rc=$?
check "--resume auto on a finished run: exit 0, says so" \
  bash -c "[[ $rc == 0 ]] && grep -q 'already finished at step $RUN_STEPS' <<< \"\$1\"" _ "$out"
check "... and nothing changed" test "$(digest "$WORK/A")" = "$before"

train --config "$WORK/run.json" --out "$WORK/P" --max-steps 12 > "$WORK/P.log" 2>&1
# Issue 31: a finished run resumed with a changed global batch names the change instead of
# "already finished, nothing changed".
config changed $RUN_STEPS 'c["train"]["global_batch"] = 32'
out=$(train --config "$WORK/changed.json" --out "$WORK/P" --resume auto --max-steps 12 2>&1); rc=$?
check "a finished run resumed with a changed global batch is refused, naming it (exit $rc)" \
  bash -c "[[ $rc -ne 0 ]] && grep -q 'train.global_batch' <<< \"\$1\" && ! grep -q 'nothing changed' <<< \"\$1\"" _ "$out"
rm -f "$WORK/P/summary.json"  # as if killed after its last checkpoint
for what in 'c["train"]["global_batch"] = 32:train.global_batch' \
            'c["data"]["phases"][0]["seq_len"] = 64:data.phases' \
            'c["model"]["router_dim"] = 8:model.router_dim'; do
  config changed $RUN_STEPS "${what%%:*}"
  out=$(train --config "$WORK/changed.json" --out "$WORK/P" --resume auto 2>&1); rc=$?
  check "resume with a changed ${what##*:} is refused (exit $rc)" \
    bash -c "[[ $rc -ne 0 ]] && grep -q 'changes what the run is' <<< \"\$1\" && grep -q '${what##*:}' <<< \"\$1\"" _ "$out"
done
config changed $RUN_STEPS 'c["train"]["optim"]["lr"] = 1e-3'
out=$(train --config "$WORK/changed.json" --out "$WORK/P" --resume auto --max-steps 12 2>&1); rc=$?
check "resume with a changed lr needs --allow-changes (exit $rc)" \
  bash -c "[[ $rc -ne 0 ]] && grep -q -- '--allow-changes' <<< \"\$1\"" _ "$out"
out=$(train --config "$WORK/changed.json" --out "$WORK/P" --resume auto --max-steps 12 --allow-changes 2>&1); rc=$?
check "... and is accepted with it, the change named (exit $rc)" \
  bash -c "[[ $rc == 0 ]] && grep -q 'train.optim.lr: checkpoint 0.003, now 0.001' <<< \"\$1\"" _ "$out"

# Torn last metrics line: resume drops it and goes on.
train --config "$WORK/run.json" --out "$WORK/T" --max-steps 12 > "$WORK/T.log" 2>&1
printf '{"step": 13, "tok' >> "$WORK/T/metrics.jsonl"
rm -f "$WORK/T/summary.json"
train --config "$WORK/run.json" --out "$WORK/T" --resume auto > "$WORK/T.resume.log" 2>&1; rc=$?
check "a torn last metrics line does not stop a resume (exit $rc)" test "$rc" = 0
check "... which ends bitwise equal to the uninterrupted run" \
  cmp "$WORK/A/model/model.safetensors" "$WORK/T/model/model.safetensors"

# Every checkpoint damaged: refuse, delete nothing.
train --config "$WORK/run.json" --out "$WORK/D" --max-steps 12 > "$WORK/D.log" 2>&1
rm -f "$WORK/D/summary.json"
for d in "$WORK"/D/ckpt/step-*; do printf 'x' | dd of="$d/rank-00000.safetensors" bs=1 seek=200 conv=notrunc 2> /dev/null; done
before=$(digest "$WORK/D")
out=$(train --config "$WORK/run.json" --out "$WORK/D" --resume auto 2>&1); rc=$?
check "--resume auto with every checkpoint damaged stops (exit $rc)" \
  bash -c "[[ $rc -ne 0 ]] && grep -q 'is damaged (see above); nothing was deleted' <<< \"\$1\"" _ "$out"
check "... and deletes nothing" test "$(digest "$WORK/D")" = "$before"
fi

# ---- signals at 2 ranks, sent to mpirun (what Slurm's scancel, or Ctrl-C, reach first)
if ! want two_ranks; then
  :
elif [[ -n $MPIEXEC ]]; then
  mpi=("$MPIEXEC" -np 2 --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS)
  "${mpi[@]}" "$ZAYA" --threads 1 train --no-progress --config "$WORK/run.json" --out "$WORK/A2" > "$WORK/A2.log" 2>&1
  check "2-rank reference run: $RUN_STEPS steps" test "$(grep -c . "$WORK/A2/metrics.jsonl")" = $RUN_STEPS
  for sig in INT TERM; do
    stop_with "$sig" "$WORK/mpi_$sig" "${mpi[@]}" "$ZAYA" --threads 1 train --no-progress \
      --config "$WORK/run.json" --out "$WORK/mpi_$sig"
    stopped=$(py "import json; print(json.load(open('$WORK/mpi_$sig/summary.json'))['steps'])" 2> /dev/null || echo none)
    check "SIG$sig to mpirun -np 2: the ranks stopped early (step $stopped) and saved that step" \
      bash -c "[[ $stopped != none && $stopped -lt $RUN_STEPS ]] && test -f $WORK/mpi_$sig/ckpt/step-$(printf %08d "${stopped/none/0}")/COMPLETE"
    "${mpi[@]}" "$ZAYA" --threads 1 train --no-progress --config "$WORK/run.json" \
      --out "$WORK/mpi_$sig" --resume auto > "$WORK/mpi_$sig.resume.log" 2>&1
    check "SIG$sig to mpirun -np 2: the resumed run ends bitwise equal to the uninterrupted one" \
      cmp "$WORK/A2/model/model.safetensors" "$WORK/mpi_$sig/model/model.safetensors"
  done
else
  echo "skipped: the 2-rank signal cases (no MPI)"
fi

echo "run_safety: $passes passed, $fails failed"
exit $((fails > 0))
