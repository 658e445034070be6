#!/usr/bin/env bash
# The gradient reduce-scatter overlapping the backward, measured: the demo model
# (configs/small.json) on the Brown corpus (data/, as scripts/main.sh prepares it) under
# `mpirun -np NP`, STEPS optimizer steps of `zaya train` with train.overlap_reduce off and on, at
# the default bucket (2^21 floats over all ranks) and at BUCKET floats. Prints, per run, the time
# rank 0 waited for the reduce-scatter after its backward (summary.json grad_reduce_wait_s), the
# time in steps and the tokens/s, and the ratio of the waits against the unoverlapped run. The
# losses of all runs must be bitwise equal (checked: the bench fails otherwise).
# Usage: bench/zero1_overlap.sh [WORK]   (env: NP, STEPS, BUCKET, THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/zaya-zero1-overlap}
NP=${NP:-2}
STEPS=${STEPS:-8}
BUCKET=${BUCKET:-262144}
THREADS=${THREADS:-1}
ZAYA=./build/zaya
[[ -x $ZAYA ]] || { echo "build zaya first (cmake --preset default && cmake --build build)"; exit 1; }
[[ -f data/brown/index.json ]] || { echo "data/brown is missing: run the data steps of scripts/main.sh"; exit 1; }
mkdir -p "$WORK"
config() {  # config OVERLAP BUCKET > file
  python3 - "$1" "$2" "$PWD/data" <<'PY'
import json, sys
overlap, bucket, data = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3]
c = json.load(open("configs/small.json"))
c.pop("description", None)
c["data"]["dir"] = data
t = c["train"]
t.update({"eval_every": 1000000, "eval_windows": 1, "log_every": 1, "sample_tokens": 0,
          "checkpoint_every": 0, "overlap_reduce": overlap, "zero1_bucket_floats": bucket})
t["optim"].pop("batch_ramp", None)
print(json.dumps(c, indent=1))
PY
}
echo "zero1 overlap: configs/small.json, $NP ranks x $THREADS thread(s), $STEPS steps ($(nproc) cores)"
printf '%-28s %10s %12s %10s %9s\n' run buckets "reduce wait" "steps s" "tokens/s"
base=""
for run in "0 2097152" "1 2097152" "0 $BUCKET" "1 $BUCKET"; do
  set -- $run
  name="overlap$1-bucket$2"
  config "$1" "$2" > "$WORK/$name.json"
  rm -rf "$WORK/$name"
  mpirun -np "$NP" --oversubscribe --allow-run-as-root "$ZAYA" --threads "$THREADS" train \
    --no-progress --config "$WORK/$name.json" --out "$WORK/$name" --max-steps "$STEPS" \
    > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
  buckets=$(grep -o '([0-9]* buckets' "$WORK/$name.log" | tr -d '(' | cut -d' ' -f1)
  python3 - "$WORK/$name" "$name" "$buckets" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"{sys.argv[2]:<28} {sys.argv[3]:>10} {s['grad_reduce_wait_s']:>10.3f} s {s['train_s']:>10.2f}"
      f" {s['tokens'] / s['train_s']:>9.0f}")
PY
  losses=$(python3 -c "import json,sys; print([r['loss'] for r in map(json.loads, open(sys.argv[1]))])" "$WORK/$name/metrics.jsonl")
  if [[ -z $base ]]; then base=$losses; elif [[ $losses != "$base" ]]; then
    echo "FAIL: $name's losses differ from the first run's"; exit 1; fi
done
echo "losses: bitwise equal in all four runs"
