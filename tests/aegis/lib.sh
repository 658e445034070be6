#!/usr/bin/env bash
# Shared by the Aegis end-to-end tests (sourced). NP (environment, default 1) is the number of
# ranks: NP=1 launches plain `zaya train`, NP>1 launches it under mpirun.
# Expects ZAYA, SRC and WORK set; WORK/data and WORK/train.json come from setup.sh.
NP=${NP:-1}
export OMP_NUM_THREADS=1
export ZAYA_FAULTS=${ZAYA_FAULTS:-}
source "$SRC/tests/check.sh"
finish() {
  echo "$(basename "$0" .sh) $SCENARIO: $passes passed, $fails failed"
  exit $((fails > 0))
}
# The launch command of a run into OUT, as an array in LAUNCH.
launch_command() {  # launch_command OUT
  local train=("$ZAYA" --threads 1 train --config "$WORK/train.json" --out "$1" --no-progress)
  if [[ $NP == 1 ]]; then
    LAUNCH=("${train[@]}")
  else
    LAUNCH=(mpirun -np "$NP" --oversubscribe --allow-run-as-root -x ZAYA_FAULTS -x OMP_NUM_THREADS
            "${train[@]}")
  fi
}
# The rank that a "kill rank 1" drill targets: the last one.
LAST_RANK=$((NP - 1))
# run_aegis OUT LOG [aegis options...]: supervises a fresh run into OUT; sets AEGIS_RC.
run_aegis() {
  local out=$1 log=$2; shift 2
  rm -rf "$out"
  launch_command "$out"
  "$ZAYA" aegis --run-dir "$out" --backoff 0.2 --poll 0.05 --grace 2 "$@" -- "${LAUNCH[@]}" \
    > "$log" 2>&1
  AEGIS_RC=$?
}
# Python over the run's files, exit status = verdict.
py() { /usr/bin/python3 -c "$@"; }
# events OUT KIND: how many events of that kind the run's event log holds.
events() { py "import json,sys; print(sum(json.loads(l)['kind'] == '$2' for l in open('$1/aegis/events.jsonl')))"; }
state() { py "import json; print(json.load(open('$1/aegis/state.json'))$2)"; }
# resumed_from_newest_saved OUT LOG [BEFORE]: the first restart of the run resumed from the newest
# checkpoint that the first attempt printed as saved ("checkpoint saved: DIR") of a step below
# BEFORE (default: any), or from step 0 if there is none.
resumed_from_newest_saved() {
  py "
import re, sys
log = open('$2', errors='replace').read()
m = re.search(r'resumed from (\S+) \(saved by [^)]*\): step (\d+)|resume auto: no complete checkpoint', log)
if not m:
    sys.exit('no resume line in $2')
step = lambda d: int(re.search(r'step-(\\d+)', d).group(1)) if d else 0
saved = [d for d in re.findall(r'checkpoint saved: (\S+)', log[:m.start()])
         if step(d) < ${3:-1000000000}]
want = saved[-1] if saved else None
got = m.group(1)
# Rank 0 renames a checkpoint into place before it prints the line, so a crash in between leaves
# the next checkpoint committed but unannounced: it may be the one resumed, nothing older (only
# the first attempt can have written a checkpoint that the restart finds).
print('newest saved before the crash:', want, '| resumed from:', got or 'step 0')
sys.exit(not (got == want or (got is not None and step(want) < step(got) < ${3:-1000000000})))"
}
same_model() { cmp "$WORK/A/model/model.safetensors" "$1/model/model.safetensors"; }
finite_metrics() {  # finite_metrics OUT N: N metric lines, all with finite losses
  py "
import json, math, sys
rows = [json.loads(l) for l in open('$1/metrics.jsonl')]
sys.exit(not (len(rows) == $2 and all(isinstance(r['loss'], float) and math.isfinite(r['loss']) for r in rows)))"
}
