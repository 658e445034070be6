#!/usr/bin/env bash
# The grid drill: a tiny ZAYA1 on a data x context grid of NP ranks under `zaya aegis`; one rank
# is SIGKILLed mid-run (ZAYA_FAULTS) and the supervisor restarts the job on NP2 ranks
# (--restart-ranks), the same context parallel, fewer data ranks, the same global batch. Checks:
# the run finishes; it resumed from a checkpoint of the NP-rank grid; its losses match an
# uninterrupted NP-rank run within TOL relative. Prints wall times, the recovery time (fault to
# the first new step) and the peak resident memory per rank.
# Usage: grid_drill.sh ZAYA SRC WORK NP CP NP2 [MPIRUN]
#   CI: 4 ranks (data 2 x context 2) -> 2; the issue's drill: 64 (16 x 4) -> 48 (12 x 4).
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; NP=$4; CP=$5; NP2=$6; MPIRUN=${7:-mpirun}
TOL=1e-5
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
export OMP_NUM_THREADS=1
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
# The global batch divides by both grids' data ranks (micro-batch 1).
D1=$((NP / CP)); D2=$((NP2 / CP))
GB=$($PY -c "import math; print(math.lcm($D1, $D2))")
STEPS=8
cat > "$WORK/drill.json" <<JSON
{
  "model": {"vocab_size": 300, "hidden_size": 32, "num_stages": 4, "num_q_heads": 2,
            "num_kv_heads": 1, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 64},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": $((STEPS * GB * 32)), "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 5, "micro_batch": 1, "global_batch": $GB, "context_parallel": $CP,
            "eval_every": 4, "eval_windows": 4, "log_every": 1, "sample_tokens": 0,
            "checkpoint_every": 2, "keep_last": 3,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 1, "schedule": "cosine",
                      "router_bias_lr": 1e-2, "muon": true}}
}
JSON
MPI=("$MPIRUN" --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 -x ZAYA_FAULTS
     -x OMP_NUM_THREADS)
train() {  # train OUT NP: the launch command
  echo "${MPI[@]}" -np "$2" "$ZAYA" --threads 1 train --config "$WORK/drill.json" --out "$1" \
    --no-progress
}
t0=$(date +%s.%N)
ZAYA_FAULTS= $(train "$WORK/ref" "$NP") > "$WORK/ref.log" 2>&1 \
  || { echo "the uninterrupted $NP-rank run failed:"; tail -20 "$WORK/ref.log"; exit 1; }
t1=$(date +%s.%N)
# The last rank dies at the start of step 6 (checkpoints every 2 steps).
rm -rf "$WORK/drill"
ZAYA_FAULTS="kill@6:rank=$((NP - 1))" "$ZAYA" aegis --run-dir "$WORK/drill" --backoff 0.2 \
  --poll 0.1 --grace 5 --max-restarts 2 --restart-ranks "$NP2" -- $(train "$WORK/drill" "$NP") \
  > "$WORK/drill.log" 2>&1
rc=$?
t2=$(date +%s.%N)
check "aegis exits 0 after the kill" test "$rc" = 0
check "one crash, one restart" $PY -c "
import json, sys
s = json.load(open('$WORK/drill/aegis/state.json'))
sys.exit(not (s['restarts_used'] == 1 and len(s['faults']) == 1))"
check "the restart ran on $NP2 ranks and resumed a checkpoint of the $NP-rank grid" \
  grep -q "(saved by $NP ranks, now $NP2): step" "$WORK/drill.log"
check "every step's loss matches the uninterrupted $NP-rank run within $TOL" \
  $PY "$SRC/tests/ckpt/compare_losses.py" "$WORK/ref/metrics.jsonl" "$WORK/drill/metrics.jsonl" 1 \
  "$TOL" "$STEPS"
$PY - "$WORK" "$NP" "$NP2" "$CP" "$t0" "$t1" "$t2" <<'PY'
import json, sys
work, np1, np2, cp, t0, t1, t2 = sys.argv[1], *map(int, sys.argv[2:5]), *map(float, sys.argv[5:8])
state = json.load(open(f"{work}/drill/aegis/state.json"))
recovered = state.get("recoveries", [])
ref = json.load(open(f"{work}/ref/summary.json"))["peak_rss_bytes_per_rank"]
drill = json.load(open(f"{work}/drill/summary.json"))["peak_rss_bytes_per_rank"]
print(f"  grid {np1 // cp} x {cp} -> {np2 // cp} x {cp}: uninterrupted run {t1 - t0:.1f} s, "
      f"drill {t2 - t1:.1f} s")
if recovered:
    r = recovered[0]
    print(f"  recovery (fault to the first new step): {r['recovery_s']:.1f} s (detection "
          f"{r['detect_s']:.1f} s, backoff {r['backoff_s']:.1f} s); downtime "
          f"{state.get('downtime_s', 0):.1f} s")
mib = lambda xs: f"max {max(xs) / 2**20:.0f} MiB, mean {sum(xs) / len(xs) / 2**20:.0f} MiB"
print(f"  peak RSS per rank: {np1} ranks {mib(ref)}; after the restart, {np2} ranks {mib(drill)}")
PY
echo "grid_drill: $passes passed, $fails failed"
exit $((fails > 0))
