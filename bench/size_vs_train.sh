#!/usr/bin/env bash
# zaya size's predictions against real zaya train runs on this machine: for each config, the
# predicted step time (zaya size --config C --world W) against the median measured step of an
# 8-step run (steps 3-8; no batch ramp, evaluation or samples) at 1 and 2 ranks, and the
# predicted memory of one rank against the run's peak resident memory (1 rank).
#   bench/size_vs_train.sh ZAYA PROFILE CONFIG...
# PROFILE comes from `zaya size profile --out F` (+ `mpirun -np 2 zaya size profile --out F` for
# the 2-rank prediction). Run from the repository root (configs name data/ relatively); the
# configs' data must be prepared (scripts/main.sh, or the commands in docs/sizing.md).
set -euo pipefail
ZAYA=$1; PROFILE=$2; shift 2
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/zaya-size-vs-train.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
MPIRUN=(mpirun --oversubscribe --allow-run-as-root)

printf '%-28s %5s | %10s %10s %7s | %12s %12s %7s\n' config ranks "pred s" "meas s" ratio \
  "pred MiB" "RSS MiB" ratio
for cfg in "$@"; do
  name=$(basename "$cfg" .json)
  for np in 1 2; do
    run=$WORK/$name-np$np
    $PY - "$cfg" "$run" "$np" > "$WORK/run.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
t = c["train"]
t["out_dir"] = sys.argv[2]
# Every rank takes whole micro-batches: halve the micro-batch until the global batch splits.
while t["global_batch"] % (t["micro_batch"] * int(sys.argv[3])) and t["micro_batch"] > 1:
    t["micro_batch"] //= 2
t["eval_every"] = 10**9
t["log_every"] = 1
t["sample_prompts"] = []
t.get("optim", {}).pop("batch_ramp", None)
print(json.dumps(c))
PY
    launch=(); (( np > 1 )) && launch=("${MPIRUN[@]}" -np "$np")
    /usr/bin/time -o "$WORK/time" -f '%M' "${launch[@]}" "$ZAYA" train --config "$WORK/run.json" \
      --max-steps 8 --no-progress > "$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; exit 1; }
    "$ZAYA" size --profile "$PROFILE" --config "$WORK/run.json" --world "$np" --json > "$WORK/pred.json"
    $PY - "$WORK" "$run" "$name" "$np" <<'PY'
import json, statistics, sys
work, run, name, np = sys.argv[1:5]
pred = json.load(open(f"{work}/pred.json"))["candidates"][0]
seq = json.load(open(f"{work}/run.json"))["data"]["phases"][0]["seq_len"]
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
steps = [r["batch_sequences"] * seq / r["tokens_per_s"] for r in rows if r["step"] >= 3]
meas = statistics.median(steps)
p = pred["step_seconds"]["total"]
line = f"{name:<28} {np:>5} | {p:10.3f} {meas:10.3f} {p / meas:7.2f} |"
if np == "1":
    rss = int(open(f"{work}/time").read().split()[-1]) * 1024
    pm = pred["memory_bytes"]["total"]
    line += f" {pm / 2**20:12.1f} {rss / 2**20:12.1f} {pm / rss:7.2f}"
else:
    line += f" {'-':>12} {'-':>12} {'-':>7}"
print(line, flush=True)
PY
  done
done
