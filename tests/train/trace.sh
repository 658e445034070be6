#!/usr/bin/env bash
# zaya train --trace (issue 42, point 3), at two ranks under mpirun on a tiny model: the file is
# one Chrome Trace Event JSON (read here by Python's json, as Perfetto's importer reads it) with
# both ranks (pid 0 and 1); each rank has every stage's forward and backward span in each traced
# step, the step's parts, and its collectives with their bytes; the ranks' clocks start together;
# and the losses are bitwise those of the same run without a trace. A FILE that exists is refused,
# and a bad --trace-steps is named.
set -euo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIEXEC=${4:-}
PY=/usr/bin/python3
rm -rf "$WORK"; mkdir -p "$WORK"
if [[ -z $MPIEXEC ]]; then echo "no mpirun in this build: the two-rank trace is not run"; exit 0; fi
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 512
cat > "$WORK/train.json" <<JSON
{
  "model": {"vocab_size": 512, "hidden_size": 64, "num_stages": 4, "num_q_heads": 4,
            "num_kv_heads": 2, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 16, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 32},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": 16384, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 3, "micro_batch": 4, "global_batch": 16, "eval_every": 100, "checkpoint_every": 2,
            "log_every": 1, "out_dir": "$WORK/plain",
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 2, "schedule": "cosine"}}
}
JSON
mpi=("$MPIEXEC" -np 2 --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS)
OMP_NUM_THREADS=1 "${mpi[@]}" "$ZAYA" train --config "$WORK/train.json" --max-steps 4 --no-progress \
  > "$WORK/plain.log" 2>&1 || { cat "$WORK/plain.log"; exit 1; }
OMP_NUM_THREADS=1 "${mpi[@]}" "$ZAYA" train --config "$WORK/train.json" --out "$WORK/traced" \
  --max-steps 4 --no-progress --trace "$WORK/trace.json" --trace-steps 2:3 \
  > "$WORK/traced.log" 2>&1 || { cat "$WORK/traced.log"; exit 1; }
fails=0
expect_refusal() {  # expect_refusal WHAT PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  if out=$("$ZAYA" train --config "$WORK/train.json" --max-steps 1 --no-progress "$@" 2>&1); then
    echo "FAIL: $what was accepted"; fails=$((fails + 1))
  elif ! grep -q -- "$pattern" <<< "$out"; then
    echo "FAIL: $what: the message does not say '$pattern': $out"; fails=$((fails + 1))
  else
    echo "ok: $what is refused: $(grep -m1 -- "$pattern" <<< "$out")"
  fi
}
expect_refusal "--trace onto an existing file" "--trace" --out "$WORK/again" --trace "$WORK/trace.json"
expect_refusal "--trace-steps 3:2" "--trace-steps" --out "$WORK/bad" --trace "$WORK/t2.json" --trace-steps 3:2
$PY - "$WORK" "$fails" <<'PY'
import json, sys
work, fails = sys.argv[1], int(sys.argv[2])
passes = 0
def check(ok, what):
    global passes, fails
    print(("ok: " if ok else "FAIL: ") + what)
    passes += ok
    fails += not ok
trace = json.load(open(f"{work}/trace.json"))
events = trace["traceEvents"]
spans = [e for e in events if e["ph"] == "X"]
check({e["pid"] for e in spans} == {0, 1}, "one file, both ranks (pid 0 and 1)")
names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
check(names == {"rank 0", "rank 1"}, f"the processes are named by rank ({sorted(names)})")
for pid in (0, 1):
    mine = [e for e in spans if e["pid"] == pid]
    def count(name):
        return sum(e["name"] == name for e in mine)
    # 2 traced steps, 2 micro-batches each (16 sequences over 2 ranks of 4).
    check(all(count(f"stage {i} forward") == 4 and count(f"stage {i} backward") == 4 for i in range(4)),
          f"rank {pid}: every stage's forward and backward in each micro-batch of the 2 traced steps")
    check(count("head forward") == 4 and count("head backward") == 4, f"rank {pid}: the head's spans")
    parts = {"data", "forward", "backward", "reduce_wait", "optimizer"}
    check(all(count(p) >= 2 for p in parts), f"rank {pid}: the step's parts {sorted(parts)}")
    coll = [e for e in mine if e["cat"] == "collective"]
    kinds = {e["name"].split(" ", 1)[1] for e in coll}
    check(any(e["args"]["bytes"] > 1000 for e in coll) and all(e["args"]["bytes"] >= 0 for e in coll),
          f"rank {pid}: collectives with their bytes ({sorted(kinds)})")
    check(any("reduce_scatter" in k for k in kinds) and any("all_gather" in k for k in kinds),
          f"rank {pid}: the gradients' reduce-scatter and the weights' all-gather")
    check(all(e["dur"] >= 0 and e["ts"] >= 0 for e in mine), f"rank {pid}: times from the start, durations >= 0")
first = {pid: min(e["ts"] for e in spans if e["pid"] == pid) for pid in (0, 1)}
check(abs(first[0] - first[1]) < 2e6, f"the ranks' first spans within 2 s of each other on one clock ({first})")
fw = sorted(e["ts"] for e in spans if e["name"] == "stage 0 forward" and e["pid"] == 0)
check(len(fw) == 4 and fw == sorted(fw), "spans in time order within a rank")
load = lambda run: [(r["step"], r["loss"]) for r in map(json.loads, open(f"{work}/{run}/metrics.jsonl"))]
check(load("plain") == load("traced") and len(load("plain")) == 4,
      "the losses with --trace are bitwise those without")
print(f"trace: {passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
PY
