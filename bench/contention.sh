#!/usr/bin/env bash
# Training throughput under CPU contention (issue 11 §3): tokens/s of `zaya train` alone and with
# a competing load of LOAD busy processes, with all cores (OpenMP's default wait policy, and
# OMP_WAIT_POLICY=PASSIVE) and with one thread. The fair share when LOAD busy processes compete
# with zaya's T threads on C cores is about C·T/(T+LOAD) cores; a collapse far below that is
# threads waiting at barriers for a sibling that the scheduler has taken off its core.
# Usage: bench/contention.sh ZAYA CONFIG [STEPS] [LOAD]   (CONFIG: a zaya config with its data)
set -euo pipefail
ZAYA=$1; CONFIG=$2; STEPS=${3:-8}; LOAD=${4:-$(nproc)}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$WORK"' EXIT

# tokens/s over the steps after the first two (warm-up), from the run's metrics.
run() {  # run NAME [env...]
  local out=$WORK/$1; shift
  env "$@" "$ZAYA" train --config "$CONFIG" --out "$out" --max-steps "$STEPS" --no-progress \
    > "$out.log" 2>&1
  /usr/bin/python3 -c "
import json
r = [json.loads(l) for l in open('$out/metrics.jsonl')][2:]
print('%.0f' % (sum(x['step_tokens'] for x in r) / sum(x['step_tokens'] / x['tokens_per_s'] for x in r)))"
}
load_on() { for _ in $(seq 1 "$LOAD"); do (while :; do :; done) & done; }
load_off() { kill $(jobs -p) 2> /dev/null || true; wait 2> /dev/null || true; }

echo "zaya train, $STEPS steps of $CONFIG on $(nproc) cores; competing load: $LOAD busy processes"
printf '%-34s %12s %12s %8s\n' "threads, OpenMP wait policy" "alone tok/s" "loaded tok/s" "ratio"
for policy in "all cores, default" "all cores, OMP_WAIT_POLICY=PASSIVE" "one thread"; do
  envs=()
  [[ $policy == *PASSIVE ]] && envs=(OMP_WAIT_POLICY=PASSIVE)
  [[ $policy == "one thread" ]] && envs=(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)
  alone=$(run "alone_${policy// /_}" "${envs[@]}")
  load_on
  loaded=$(run "loaded_${policy// /_}" "${envs[@]}")
  load_off
  printf '%-34s %12s %12s %8s\n' "$policy" "$alone" "$loaded" \
    "$(/usr/bin/python3 -c "print('%.2f' % ($loaded / $alone))")"
done
