#!/usr/bin/env bash
# Training throughput under CPU contention (issue 11 §3): tokens/s of `zaya train` alone and with
# a competing load of LOAD busy processes, three ways: the default (the thread count adapts to the
# CPU the run is given, train/thread_governor.h), all cores held with --fixed-threads, and one
# thread. The fair share when LOAD busy processes compete with zaya's T threads on C cores is about
# C·T/(T+LOAD) cores; a collapse far below that is threads waiting at barriers for a sibling that
# the scheduler has taken off its core.
# tokens/s counts the steps after the first two (warm-up), from the run's metrics; the loaded
# default run also prints its thread changes.
# Usage: bench/contention.sh ZAYA CONFIG [STEPS] [LOAD]   (CONFIG: a zaya config with its data)
set -euo pipefail
ZAYA=$1; CONFIG=$2; STEPS=${3:-8}; LOAD=${4:-$(nproc)}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$WORK"' EXIT

run() {  # run NAME, with the flags in global (before train) and flags (after)
  local out=$WORK/$1; shift
  "$ZAYA" "${global[@]}" train --config "$CONFIG" --out "$out" --max-steps "$STEPS" --no-progress \
    "${flags[@]}" \
    > "$out.log" 2>&1
  /usr/bin/python3 -c "
import json
r = [json.loads(l) for l in open('$out/metrics.jsonl')][2:]
print('%.0f' % (sum(x['step_tokens'] for x in r) / sum(x['step_tokens'] / x['tokens_per_s'] for x in r)))"
}
load_on() { for _ in $(seq 1 "$LOAD"); do (while :; do :; done) & done; }
load_off() { kill $(jobs -p) 2> /dev/null || true; wait 2> /dev/null || true; }

echo "zaya train, $STEPS steps of $CONFIG on $(nproc) cores; competing load: $LOAD busy processes"
printf '%-34s %12s %12s %8s\n' "threads" "alone tok/s" "loaded tok/s" "ratio"
for mode in "adaptive (default)" "all cores, --fixed-threads" "one thread (--threads 1)"; do
  global=() flags=()
  [[ $mode == *fixed* ]] && flags=(--fixed-threads)
  [[ $mode == one* ]] && global=(--threads 1)
  name=${mode%% *}
  alone=$(run "alone_$name")
  load_on
  loaded=$(run "loaded_$name")
  load_off
  printf '%-34s %12s %12s %8s\n' "$mode" "$alone" "$loaded" \
    "$(/usr/bin/python3 -c "print('%.2f' % ($loaded / $alone))")"
  grep '^threads:' "$WORK/loaded_$name.log" | sed 's/^/    loaded: /' || true
done
