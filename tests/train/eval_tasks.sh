#!/usr/bin/env bash
# Benchmark tasks during training (the config's "eval" section, train/train_tasks.h) and
# `zaya eval --tasks` under mpirun, on a tiny model trained on a slice of the Brown corpus:
#   - a run with eval.tasks writes bitwise the losses and the weights of the same run without it
#     (scoring touches no random state and no data order);
#   - the tasks are scored every `every` steps and at the end: in metrics.jsonl, in the progress
#     line, in summary.json, tasks.svg; the last scores equal `zaya eval --tasks` on the saved model;
#   - a bad task file refuses the run before step 1, naming the file and the line, writing nothing;
#     so does a choice longer than the model's context (and `zaya eval --tasks` before scoring);
#     a batch of 2147483647 scores as a batch of 5;
#   - with MPI: `mpirun -np 2 zaya eval --tasks` prints the results and writes the samples of one
#     rank (items split over the ranks), and a 2-rank training run with tasks keeps its losses and
#     scores its tasks as `zaya eval --tasks` does on its saved model.
# Usage: eval_tasks.sh ZAYA SRC WORK [MPIEXEC]
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIEXEC=${4:-}
PY=/usr/bin/python3
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 512 || exit 1
fails=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
# Held-out tasks from the validation documents, as the main job builds them (and a LAMBADA-style
# cloze task from the same text).
$PY "$SRC/scripts/val_documents.py" "$ZAYA" "$WORK/tokenizer.json" "$WORK/data/brown" "$WORK/val.txt" > /dev/null || exit 1
$PY "$SRC/scripts/next_sentence_task.py" "$WORK/val.txt" "$WORK/next_sentence.jsonl" --items 24 || exit 1
$PY - "$WORK/val.txt" "$WORK/cloze.jsonl" <<'PY' || exit 1
import json, re, sys
text = " ".join(open(sys.argv[1], encoding="utf-8").read().split())
sents = [s for s in re.split(r"(?<=[.!?])\s+", text) if 6 <= len(s.split()) <= 20][:9]
open(sys.argv[2], "w").write("".join(json.dumps({"text": s}) + "\n" for s in sents))
PY
# The main job's word-order task: four distinct orders of the same last words, the gold one real.
$PY "$SRC/scripts/word_order_task.py" "$WORK/val.txt" "$WORK/word_order.jsonl" --items 30 > /dev/null || exit 1
check "word_order_task.py: 30 items of four distinct orders of the same words, gold the real one" \
  $PY - "$WORK/val.txt" "$WORK/word_order.jsonl" <<'PY'
import json, sys
text = " ".join(open(sys.argv[1], encoding="utf-8").read().split())
items = [json.loads(l) for l in open(sys.argv[2])]
ok = len(items) == 30 and len({i["gold"] for i in items}) > 1
for i in items:
    c = i["choices"]
    ok &= len(set(c)) == 4 and all(sorted(x.split()) == sorted(c[0].split()) for x in c)
    ok &= (i["context"] + " " + c[i["gold"]]) in text
sys.exit(0 if ok else 1)
PY
config() {  # config OUT EVAL_SECTION
  cat <<JSON
{
  "model": {"vocab_size": 512, "hidden_size": 64, "num_stages": 4, "num_q_heads": 4,
            "num_kv_heads": 2, "head_dim": 8, "num_experts": 4, "expert_hidden": 64,
            "router_dim": 16, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 128},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": 3840, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 3, "micro_batch": 4, "global_batch": 8, "eval_every": 4, "eval_windows": 4,
            "log_every": 100, "out_dir": "$1", "tokenizer": "$WORK/tokenizer.json", "sample_tokens": 0,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "schedule": "cosine"}}$2
}
JSON
}
EVAL=", \"eval\": {\"tasks\": [\"$WORK/next_sentence.jsonl\", \"$WORK/cloze.jsonl\"], \"every\": 5, \"limit\": 20, \"batch\": 5}"
config "$WORK/plain" "" > "$WORK/plain.json"
config "$WORK/tasks" "$EVAL" > "$WORK/tasks.json"
train() { "$ZAYA" --threads 1 train --no-progress --fixed-threads "$@"; }
train --config "$WORK/plain.json" > "$WORK/plain.log" 2>&1 || { cat "$WORK/plain.log"; exit 1; }
train --config "$WORK/tasks.json" > "$WORK/tasks.log" 2>&1 || { cat "$WORK/tasks.log"; exit 1; }
cat "$WORK/tasks.log"
# The saved model scored by zaya eval --tasks, at 1 rank: the expected in-training figures.
score() {  # score MODEL OUT_PREFIX [launcher...]
  local model=$1 out=$2; shift 2
  "$@" "$ZAYA" --threads 1 eval --model "$model" --tokenizer "$WORK/tokenizer.json" \
    --tasks "$WORK/next_sentence.jsonl,$WORK/cloze.jsonl" --limit 20 --batch 5 \
    --log-samples "$out.samples.jsonl" > "$out.json" 2> "$out.err"
}
check "zaya eval --tasks on the run's model" score "$WORK/tasks/model" "$WORK/one"

$PY - "$WORK" <<'PY' || fails=$((fails + 1))
import json, sys
work = sys.argv[1]
fails = 0
def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok
load = lambda run: [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
plain, tasks = load("plain"), load("tasks")
strip = lambda r: {k: v for k, v in r.items() if k not in ("tokens_per_s", "threads", "tasks", "mfu", "time_s", "memory")}
check(len(plain) == len(tasks) == 15 and all(strip(a) == strip(b) for a, b in zip(plain, tasks)),
      f"with and without eval.tasks: {len(tasks)} metric lines with identical losses")
same = lambda p: open(f"{work}/plain/{p}", "rb").read() == open(f"{work}/tasks/{p}", "rb").read()
check(same("model/model.safetensors"), "... and bitwise equal final weights")
steps = [r["step"] for r in tasks if "tasks" in r]
check(steps == [5, 10, 15], f"tasks scored at steps {steps} (every 5 and the last)")
check(not any("tasks" in r for r in plain), "no task results without eval.tasks")
last = tasks[-1]["tasks"]
want = {}
for line in open(f"{work}/one.json"):
    r = json.loads(line)
    want.update(r["results"])
ns, cl = last.get("next_sentence", {}), last.get("cloze", {})
w_ns, w_cl = want["next_sentence"], want["cloze"]
check(ns.get("items") == 20 and cl.get("items") == 9, f"items: limit 20 of 24, and all 9 of the cloze task")
check(ns.get("acc") == w_ns["acc,none"] and ns.get("acc_norm") == w_ns["acc_norm,none"]
      and ns.get("acc_stderr") == w_ns["acc_stderr,none"] and cl.get("acc") == w_cl["acc,none"]
      and cl.get("perplexity") == w_cl["perplexity,none"],
      f"the last step's scores equal zaya eval --tasks on the saved model (next_sentence acc {ns.get('acc')}, cloze perplexity {cl.get('perplexity')})")
check(ns.get("chance") == 0.25 and "chance" not in cl, "chance: 25 % for 4 choices, none for the cloze task")
summary = json.load(open(f"{work}/tasks/summary.json"))
check(summary.get("tasks") == last, "summary.json holds the last task results")
svg = open(f"{work}/tasks/tasks.svg").read()
check(svg.startswith("<svg") and svg.count("<polyline") == 3 and "next_sentence chance" in svg,
      "tasks.svg: the two tasks' accuracy and next_sentence's chance level")
log = open(f"{work}/tasks.log").read()
check("step 5/15 |" in log and "| next_sentence acc " in log and "| cloze acc " in log
      and "tasks: cloze (9 items): acc " in log and "\nnext_sentence (20 items): acc " in log
      and "tasks plot " in log,
      "the progress lines and the summary show the tasks")
sys.exit(1 if fails else 0)
PY

# A bad task file: refused before step 1, naming the file and the line; nothing written.
printf '%s\n' '{"context": "a", "choices": ["b", "c"], "gold": 0}' '{"context": "a", "choices": ["b"], "gold": 3}' > "$WORK/bad.jsonl"
config "$WORK/bad" ", \"eval\": {\"tasks\": [\"$WORK/next_sentence.jsonl\", \"$WORK/bad.jsonl\"]}" > "$WORK/bad.json"
out=$(train --config "$WORK/bad.json" 2>&1); rc=$?
check "a bad task file refuses the run (exit $rc): $out" \
  bash -c "[[ $rc -ne 0 ]] && grep -q \"'eval.tasks'\[1\]: $WORK/bad.jsonl:2: \" <<< \"\$1\"" _ "$out"
check "... before anything of the run is written" test ! -e "$WORK/bad"
config "$WORK/bad" ", \"eval\": {\"tasks\": [\"$WORK/next_sentence.jsonl\"], \"every\": 0}" > "$WORK/bad.json"
out=$(train --config "$WORK/bad.json" 2>&1); rc=$?
check "eval.every 0 is refused, naming the field: $out" \
  bash -c "[[ $rc -ne 0 ]] && grep -q \"field 'eval.every'\" <<< \"\$1\""  _ "$out"
# A choice longer than the model's context (max_seq_len 128): refused before step 1, naming the
# file, the line and the choice, and the 'limit' that stops short of it (issue 39). It used to
# pass the plan and kill the run at its first evaluation.
$PY - "$WORK/next_sentence.jsonl" "$WORK/long_choice.jsonl" <<'PY' || exit 1
import json, sys
items = [json.loads(l) for l in open(sys.argv[1])][:3]
items[2]["choices"][1] = " ".join(["the long choice"] * 200)
open(sys.argv[2], "w").write("".join(json.dumps(i) + "\n" for i in items))
PY
config "$WORK/long" ", \"eval\": {\"tasks\": [\"$WORK/long_choice.jsonl\"]}" > "$WORK/long.json"
out=$(train --config "$WORK/long.json" 2>&1); rc=$?
check "a choice longer than the context refuses the run (exit $rc): $out" \
  bash -c "[[ $rc -ne 0 ]] && grep -q \"$WORK/long_choice.jsonl:3: choice 1 has [0-9]* tokens, more than the model's context of 128 .*the 2 items before it fit ('limit' 2\" <<< \"\$1\"" _ "$out"
check "... before anything of the run is written" test ! -e "$WORK/long"
out=$("$ZAYA" --threads 1 eval --model "$WORK/tasks/model" --tokenizer "$WORK/tokenizer.json" \
  --tasks "$WORK/long_choice.jsonl" 2>&1); rc=$?
check "... and zaya eval --tasks refuses it before scoring (exit $rc)" \
  bash -c "[[ $rc -ne 0 ]] && grep -q \"long_choice.jsonl:3: choice 1 has\" <<< \"\$1\"" _ "$out"
out=$("$ZAYA" --threads 1 eval --model "$WORK/tasks/model" --tokenizer "$WORK/tokenizer.json" \
  --tasks "$WORK/long_choice.jsonl" --limit 2 2>&1); rc=$?
check "... which scores with the limit it names (exit $rc)" test $rc -eq 0
# A batch of 2147483647 holds no more sequences than the task has choices: the same scores as
# batch 5 (it used to reserve memory for every slot and die out of memory).
"$ZAYA" --threads 1 eval --model "$WORK/tasks/model" --tokenizer "$WORK/tokenizer.json" \
  --tasks "$WORK/next_sentence.jsonl,$WORK/cloze.jsonl" --limit 20 --batch 2147483647 \
  > "$WORK/huge_batch.json" 2> "$WORK/huge_batch.err"
check "eval --batch 2147483647 scores as --batch 5 does" $PY - "$WORK/one.json" "$WORK/huge_batch.json" <<'PY'
import json, sys
results = lambda path: [json.loads(l)["results"] for l in open(path)]
sys.exit(0 if results(sys.argv[1]) == results(sys.argv[2]) and results(sys.argv[1]) else 1)
PY

if [[ -n $MPIEXEC ]]; then
  mpi=("$MPIEXEC" -np 2 --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS)
  check "mpirun -np 2 zaya eval --tasks" score "$WORK/tasks/model" "$WORK/two" "${mpi[@]}"
  check "... writes the same log-samples file as one rank" cmp "$WORK/one.samples.jsonl" "$WORK/two.samples.jsonl"
  same_results() {  # the results lines apart from timings and the rank count
    $PY - "$1" "$2" <<'PY'
import json, sys
def load(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        for k in ("seconds", "items_per_second", "ranks"):
            r["config"].pop(k)
        out.append(r)
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b and len(a) == 2 else 1)
PY
  }
  check "... and prints the same results as one rank" same_results "$WORK/one.json" "$WORK/two.json"
  check "... scored by 2 ranks" grep -q '"ranks":2' "$WORK/two.json"
  for run in plain tasks; do
    config "$WORK/${run}2" "$([[ $run == tasks ]] && echo "$EVAL")" > "$WORK/${run}2.json"
    "${mpi[@]}" "$ZAYA" --threads 1 train --no-progress --fixed-threads --config "$WORK/${run}2.json" \
      > "$WORK/${run}2.log" 2>&1 || { cat "$WORK/${run}2.log"; exit 1; }
  done
  check "zaya eval --tasks on the 2-rank run's model" score "$WORK/tasks2/model" "$WORK/one2"
  $PY - "$WORK" <<'PY' || fails=$((fails + 1))
import json, sys
work = sys.argv[1]
load = lambda run: [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
plain, tasks = load("plain2"), load("tasks2")
strip = lambda r: {k: v for k, v in r.items() if k not in ("tokens_per_s", "threads", "tasks", "mfu", "time_s", "memory")}
ok1 = len(plain) == len(tasks) == 15 and all(strip(a) == strip(b) for a, b in zip(plain, tasks))
print(("ok   " if ok1 else "FAIL ") + "2 ranks: identical losses with and without eval.tasks")
want = {}
for line in open(f"{work}/one2.json"):
    want.update(json.loads(line)["results"])
last = tasks[-1].get("tasks", {})
ok2 = (last.get("next_sentence", {}).get("acc") == want["next_sentence"]["acc,none"]
       and last.get("next_sentence", {}).get("acc_norm") == want["next_sentence"]["acc_norm,none"]
       and last.get("cloze", {}).get("perplexity") == want["cloze"]["perplexity,none"])
print(("ok   " if ok2 else "FAIL ") + "2 ranks: the last step's scores equal zaya eval --tasks (1 rank) on the saved model")
sys.exit(0 if ok1 and ok2 else 1)
PY
else
  echo "(no MPI: the 2-rank part is left out)"
fi
echo "$fails failed"
[[ $fails -eq 0 ]]
