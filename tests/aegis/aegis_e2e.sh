#!/usr/bin/env bash
# Aegis end to end: one fault drill per invocation against the reference run of setup.sh, or (sigkill,
# sigterm, no_exec, no_step) one check of the supervisor itself with a stand-in job and no fixture.
# Usage: aegis_e2e.sh ZAYA SRC WORK SCENARIO   (NP in the environment: ranks, default 1)
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; SCENARIO=$4
source "$SRC/tests/aegis/lib.sh"
OUT=$WORK/$SCENARIO; LOG=$WORK/$SCENARIO.log
mkdir -p "$WORK"  # the stand-in scenarios run without the setup fixture

case $SCENARIO in
kill)  # kill the last rank at step 7 of 20 (checkpoints every 5)
  ZAYA_FAULTS="kill@7:rank=$LAST_RANK" run_aegis "$OUT" "$LOG" --max-restarts 2
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "one crash detected, one restart" test "$(events "$OUT" crash)/$(state "$OUT" "['restarts_used']")" = 1/1
  # Checkpoints commit in the background, so whether step 5's was complete when rank 1 died at
  # step 7 depends on the machine's load: the restart must resume from the newest checkpoint the
  # first attempt announced as saved, or from step 0 if it announced none.
  check "the restart resumed from the newest checkpoint saved before the crash" \
    resumed_from_newest_saved "$OUT" "$LOG"
  check "recovery recorded (fault to first new step)" test "$(events "$OUT" recovered)" = 1
  check "final weights bitwise equal to the uninterrupted run" same_model "$OUT"
  check "20 finite metric lines" finite_metrics "$OUT" 20
  ;;
hang)  # rank 0 hangs at step 6; the timeout comes from the observed step intervals
  # The factor is large enough that the derived timeout, not the 1 s floor, decides even when this
  # machine is idle (steps of ~0.05 s).
  ZAYA_FAULTS="hang@6:rank=0" run_aegis "$OUT" "$LOG" --hang-floor 1 --hang-factor 100
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "one hang detected after step 5" \
    test "$(events "$OUT" hang)/$(state "$OUT" "['faults'][0]['step']")" = 1/5
  # The first attempt's heartbeats (archived by Aegis) give the step intervals it saw. The hang
  # must be detected after the timeout and within a second of it: the supervisor polls every
  # 0.05 s, but on a loaded 2-core CI machine a poll can wait for the scheduler.
  check "timeout = max(floor, factor x longest step interval); detected within it (+ polling)" py "
import glob, json, sys
files = sorted(glob.glob('$OUT/aegis/heartbeat-attempt-1/rank-*.jsonl'))
gaps, steps = [], []
for f in files:  # fewer than 20 intervals in all, so every one is in the watch's window
    mine = [b for b in map(json.loads, open(f)) if b['phase'] == 'step']
    steps.append(len(mine))
    gaps += [b['time'] - a['time'] for a, b in zip(mine, mine[1:]) if b['step'] == a['step'] + 1]
expect = max(1.0, 100 * max(gaps))
e = [json.loads(l) for l in open('$OUT/aegis/events.jsonl') if '\"hang\"' in l][0]
print('steps per rank', steps, 'longest interval %.3f s: expected timeout %.3f s, got %.3f s, detected after %.3f s'
      % (max(gaps), expect, e['timeout_s'], e['stalled_s']))
sys.exit(not (len(files) == $NP and steps == [5] * $NP and abs(e['timeout_s'] - expect) < 1e-6 and expect > 1.0 and
              expect < e['stalled_s'] <= expect + 1.0))"
  # A hung rank cannot finish its step, so the graceful stop that zaya train makes of SIGTERM
  # cannot happen: the grace period ends in SIGKILL.
  check "the hung job was stopped (SIGTERM, then SIGKILL after the grace period)" \
    grep -qE '"how":"(SIGTERM|SIGKILL after [0-9.]+ s grace)"' "$OUT/aegis/events.jsonl"
  check "final weights bitwise equal to the uninterrupted run" same_model "$OUT"
  ;;
nan)  # step 9's loss turns NaN: roll back, skip step 9's samples, finish with finite losses
  ZAYA_FAULTS="nan@9" run_aegis "$OUT" "$LOG"
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "nan at step 9, then a rollback" \
    test "$(events "$OUT" nan)/$(events "$OUT" rollback)/$(state "$OUT" "['faults'][0]['step']")" = 1/1/9
  # Step 9 drew samples [sum of steps 1-8's batches, + step 9's batch) of the reference run.
  check "skip_windows.json holds exactly step 9's samples" py "
import json, sys
b = [json.loads(l)['batch_sequences'] for l in open('$WORK/A/metrics.jsonl')]
w = json.load(open('$OUT/skip_windows.json'))
print('skip window', w)
sys.exit(not (len(w) == 1 and w[0]['begin'] == sum(b[:8]) and w[0]['end'] == sum(b[:9])))"
  check "the rollback quarantined only checkpoints of step >= 9 (moved, not deleted)" py "
import json, os, sys
e = [json.loads(l) for l in open('$OUT/aegis/events.jsonl') if '\"rollback\"' in l][0]
moved = [os.path.basename(p) for p in e['quarantined'] if 'final-outputs' not in p]
print('quarantined', moved)
sys.exit(not (all(int(n[5:13]) >= 9 and os.path.isdir('$OUT/ckpt-quarantine/' + n) for n in moved)
              and os.path.isdir('$OUT/ckpt/step-00000005')))"
  check "resumed from the newest checkpoint saved before step 9" resumed_from_newest_saved "$OUT" "$LOG" 9
  check "20 finite metric lines" finite_metrics "$OUT" 20
  # Independent reference: a plain run given the same skip window from the start.
  mkdir -p "$WORK/nan_ref" && cp "$OUT/skip_windows.json" "$WORK/nan_ref/"
  launch_command "$WORK/nan_ref"
  "${LAUNCH[@]}" > "$WORK/nan_ref.log" 2>&1
  check "final weights equal a fault-free run that skips the same window" \
    cmp "$WORK/nan_ref/model/model.safetensors" "$OUT/model/model.safetensors"
  check "and differ from the run that trained on the window" bash -c "! cmp -s '$WORK/A/model/model.safetensors' '$OUT/model/model.safetensors'"
  ;;
ckpt_die)  # die while writing the checkpoint of step 10
  ZAYA_FAULTS="ckpt_die@10" run_aegis "$OUT" "$LOG"
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "the death was detected as a crash" test "$(events "$OUT" crash)" = 1
  check "the half-written step-10 checkpoint was never loaded: resumed from step 5" bash -c \
    "grep -q 'resumed from $OUT/ckpt/step-00000005 (saved by .*): step 5' '$LOG' && ! grep -q 'resumed from $OUT/ckpt/step-00000010' '$LOG'"
  check "final weights bitwise equal to the uninterrupted run" same_model "$OUT"
  ;;
budget)  # two crashes, one restart allowed
  ZAYA_FAULTS="kill@3,kill@4" run_aegis "$OUT" "$LOG" --max-restarts 1
  check "aegis exits 3 (restart budget exhausted)" test "$AEGIS_RC" = 3
  check "state: failed, the cause names the budget and the crash" py "
import json, sys
s = json.load(open('$OUT/aegis/state.json'))
print(s['cause'])
sys.exit(not (s['outcome'] == 'failed' and 'restart budget exhausted (1 of 1' in s['cause'] and ('signal 9' in s['cause'] or 'crash: rank' in s['cause'])))"
  check "the report on stderr names the cause" grep -q "^\[aegis\] failed: restart budget exhausted" "$LOG"
  check "zaya aegis status reports it" bash -c "'$ZAYA' aegis status '$OUT' | grep -q '^outcome     failed (restart budget exhausted'"
  ;;
rules)  # a stop rule over the job's output ends the run; a restart rule restarts it
  echo '[{"regex": "^step 5/[0-9]+ ", "action": "stop"}]' > "$WORK/stop_rules.json"
  run_aegis "$OUT" "$LOG" --rules "$WORK/stop_rules.json"
  check "aegis exits 2 (stopped by a rule)" test "$AEGIS_RC" = 2
  check "the rule event quotes the line" grep -q '"kind":"rule".*matched: step 5/20' "$OUT/aegis/events.jsonl"
  check "state: stopped, no restart" test "$(state "$OUT" "['outcome']")/$(state "$OUT" "['restarts_used']")" = stopped/0
  # A restart rule catches a hang from its log line long before the 60 s hang floor would.
  echo '[{"regex": "^fault injection: hang@", "action": "restart"}]' > "$WORK/restart_rules.json"
  ZAYA_FAULTS="hang@6:rank=0" run_aegis "$OUT.restart" "$LOG.restart" --rules "$WORK/restart_rules.json" \
    --hang-floor 60
  check "restart rule: exit 0, one rule event, no hang event" \
    test "$AEGIS_RC/$(events "$OUT.restart" rule)/$(events "$OUT.restart" hang)" = 0/1/0
  check "restart rule: final weights bitwise equal to the uninterrupted run" same_model "$OUT.restart"
  ;;
two_faults)  # a crash and a hang in one run: recovery times and goodput (see docs/aegis.md)
  ZAYA_FAULTS="kill@7:rank=$LAST_RANK,hang@13:rank=0" run_aegis "$OUT" "$LOG" --hang-floor 2
  check "aegis exits 0 after two restarts" test "$AEGIS_RC/$(state "$OUT" "['restarts_used']")" = 0/2
  check "two recoveries recorded" test "$(events "$OUT" recovered)" = 2
  check "final weights bitwise equal to the uninterrupted run" same_model "$OUT"
  "$ZAYA" aegis status "$OUT" | tee "$WORK/two_faults.status"
  check "status: 2 restarts, goodput line" bash -c \
    "grep -q '^attempts    3 (2 restarts of 3 allowed)' '$WORK/two_faults.status' && grep -q '^goodput' '$WORK/two_faults.status'"
  ;;
straggler)  # needs two ranks
  if [[ $NP -lt 2 ]]; then echo "straggler: skipped, needs NP >= 2"; exit 77; fi
  ZAYA_FAULTS="slow:rank=1:factor=3" run_aegis "$OUT" "$LOG" --straggler-factor 1.5
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "rank 1 reported as a straggler" grep -q '"kind":"straggler".*"rank":1' "$OUT/aegis/events.jsonl"
  ;;
sigkill)  # the supervisor dies by SIGKILL: its job (leader and the helpers it started) must not outlive it
  rm -rf "$OUT"; mkdir -p "$OUT"
  # A job that never steps, with a background helper in its process group; it records both pids.
  "$ZAYA" aegis --run-dir "$OUT" --poll 0.05 --startup-timeout 600 -- \
    bash -c "sleep 300 & echo \$! > '$OUT/helper.pid'; echo \$\$ > '$OUT/leader.pid'; wait" > "$LOG" 2>&1 &
  AEGIS_PID=$!
  for _ in $(seq 100); do [[ -s $OUT/helper.pid && -s $OUT/leader.pid ]] && break; sleep 0.05; done
  check "the job started (leader and helper pids recorded)" test -s "$OUT/helper.pid" -a -s "$OUT/leader.pid"
  LEADER=$(cat "$OUT/leader.pid"); HELPER=$(cat "$OUT/helper.pid")
  check "both job processes run under the supervisor" kill -0 "$LEADER" "$HELPER"
  kill -KILL "$AEGIS_PID"; wait "$AEGIS_PID" 2>/dev/null
  gone() { ! kill -0 "$1" 2>/dev/null; }
  for _ in $(seq 40); do gone "$LEADER" && gone "$HELPER" && break; sleep 0.05; done
  check "the job's leader is gone within 2 s of the supervisor's death" gone "$LEADER"
  check "and so is the helper it started" gone "$HELPER"
  kill -KILL "$LEADER" "$HELPER" 2>/dev/null  # leave nothing behind whatever the verdict
  ;;
sigkill_train)  # the same with the real job: every rank (and mpirun) dies with the supervisor
  rm -rf "$OUT"; launch_command "$OUT"
  ZAYA_FAULTS="hang@4:rank=0" "$ZAYA" aegis --run-dir "$OUT" --poll 0.05 --hang-floor 600 -- \
    "${LAUNCH[@]}" > "$LOG" 2>&1 &
  AEGIS_PID=$!
  # Every rank has done step 3 (rank 0 then hangs, the others wait for it in a collective).
  ranks_pids() { py "
import glob, json
beats = [json.load(open(f)) for f in sorted(glob.glob('$OUT/heartbeat/rank-*.json'))]
if len(beats) == $NP and all(b['step'] >= 3 for b in beats): print(' '.join(str(b['pid']) for b in beats))" 2>/dev/null; }
  PIDS=""
  for _ in $(seq 200); do PIDS=$(ranks_pids); [[ -n $PIDS ]] && break; sleep 0.1; done
  check "all $NP ranks made steps under the supervisor" test -n "$PIDS"
  LEADER=$(py "import json; print([json.loads(l) for l in open('$OUT/aegis/events.jsonl') if '\"launch\"' in l][0]['pid'])")
  kill -KILL "$AEGIS_PID"; wait "$AEGIS_PID" 2>/dev/null
  gone() { for p in "$@"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
  for _ in $(seq 60); do gone $LEADER $PIDS && break; sleep 0.05; done
  check "the launch command's process ($LEADER) is gone within 3 s" gone $LEADER
  check "and every rank ($PIDS)" gone $PIDS
  kill -KILL $LEADER $PIDS 2>/dev/null
  ;;
sigterm)  # SIGTERM to the supervisor: it stops the job (grace, then SIGKILL) before it exits
  rm -rf "$OUT"; mkdir -p "$OUT"
  # The job ignores SIGINT and SIGTERM: only the SIGKILL after --grace ends it.
  "$ZAYA" aegis --run-dir "$OUT" --poll 0.05 --grace 0.5 -- \
    bash -c "trap '' INT TERM; echo \$\$ > '$OUT/leader.pid'; while :; do sleep 0.1; done" > "$LOG" 2>&1 &
  AEGIS_PID=$!
  for _ in $(seq 100); do [[ -s $OUT/leader.pid ]] && break; sleep 0.05; done
  LEADER=$(cat "$OUT/leader.pid")
  kill -TERM "$AEGIS_PID"; wait "$AEGIS_PID"; AEGIS_RC=$?
  check "aegis exits 130 (interrupted)" test "$AEGIS_RC" = 130
  check "the job was gone when aegis exited" bash -c "! kill -0 $LEADER 2>/dev/null"
  check "the event log says how it was stopped" grep -q '"kind":"interrupted".*SIGKILL after 0.5 s grace' "$OUT/aegis/events.jsonl"
  kill -KILL "$LEADER" 2>/dev/null
  ;;
collective_timeout)  # the collective watchdog: rank 2 of 3 SIGSTOPs itself at step 6; ranks 0
  # and 1 report the collective they wait in after --collective-timeout, Aegis names rank 2, stops
  # every process of the job (mpirun's ranks sit in process groups of their own) and restarts it
  if [[ $NP == 1 ]]; then echo "collective_timeout needs mpirun (NP > 1)"; exit 77; fi
  py "
import json
c = json.load(open('$WORK/train.json'))
c['train']['global_batch'] = 96  # 3 ranks x micro-batch 32
json.dump(c, open('$WORK/train3.json', 'w'), indent=1)"
  three=(mpirun -np 3 --oversubscribe --allow-run-as-root -x ZAYA_FAULTS -x OMP_NUM_THREADS
         "$ZAYA" --threads 1 train --config "$WORK/train3.json" --no-progress)
  rm -rf "$WORK/A3"
  ZAYA_FAULTS="" "${three[@]}" --out "$WORK/A3" > "$WORK/A3.log" 2>&1
  check "uninterrupted 3-rank reference: 20 steps" finite_metrics "$WORK/A3" 20
  TIMEOUT=4
  rm -rf "$OUT"
  ZAYA_FAULTS="stop@6:rank=2" "$ZAYA" aegis --run-dir "$OUT" --backoff 0.2 --poll 0.05 --grace 2 -- \
    "${three[@]}" --out "$OUT" --collective-timeout $TIMEOUT > "$LOG" 2>&1
  AEGIS_RC=$?
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "one collective timeout: rank 2 never entered, ranks 0 and 1 waited; named within the timeout + 3 s" py "
import json, sys
ev = [json.loads(l) for l in open('$OUT/aegis/events.jsonl')]
t = [e for e in ev if e['kind'] == 'collective_timeout']
print([(e['message'], round(e['detected_at'] - e['since'], 2)) for e in t])
sys.exit(not (len(t) == 1 and t[0]['missing'] == [2] and t[0]['waiting'] == [0, 1]
              and t[0]['group'] == 'world' and t[0]['timeout_s'] == $TIMEOUT
              and $TIMEOUT <= t[0]['detected_at'] - t[0]['since'] <= $TIMEOUT + 3))"
  check "each waiting rank printed its report (collective, sequence number, since when)" \
    test "$(grep -c '^zaya: collective timeout: rank [01] has waited' "$LOG")" = 2
  # A rank of the first attempt left running (orphaned, then continued by the kernel) would
  # train on and write later checkpoints, which the restart would resume from.
  check "the restart resumed from the newest checkpoint saved before step 6 (no rank ran on)" \
    resumed_from_newest_saved "$OUT" "$LOG" 6
  check "final weights bitwise equal to the uninterrupted 3-rank run" \
    cmp "$WORK/A3/model/model.safetensors" "$OUT/model/model.safetensors"
  ;;
health|gpu_health)  # Aegis reads the hardware, on two "hosts" (this one and hostB, as in
  # bad_host) whose counters the test changes mid-run. health: a real node_exporter per host over
  # a fake sysfs tree. gpu_health: a stand-in NVML (tests/aegis/fake_nvml.cpp, its state file per
  # host), read on this host by aegis itself (--gpu-health) and on hostB through zaya
  # health-exporter (--node-exporter). An uncorrectable memory error on this host (EDAC; a GPU's
  # ECC): the job stops (SIGTERM: its step finished and checkpointed), the host is marked bad and
  # the run goes on on hostB alone. Carrier flaps (a GPU's Xid event) on hostB: a restart on both
  # hosts, bitwise the uninterrupted run.
  if [[ $NP != 2 ]]; then echo "$SCENARIO needs mpirun -np 2 (NP=2)"; exit 77; fi
  if [[ $SCENARIO == health ]]; then
    EXPORTER=$(command -v prometheus-node-exporter || true)
    if [[ -z $EXPORTER ]]; then echo "prometheus-node-exporter is not installed (scripts/setup.sh)"; exit 77; fi
    cat > "$WORK/health_rules.json" <<'JSON'
[{"metric": "node_edac_uncorrectable_errors_total", "increase": 0, "action": "mark_bad_host"},
 {"metric": "node_network_carrier_changes_total", "increase": 3, "within_s": 60, "action": "restart"}]
JSON
  else
    FAKE_NVML=${ZAYA_FAKE_NVML:-$(dirname "$ZAYA")/tests/unit/libzaya_test_fake_nvml.so}
    if [[ ! -f $FAKE_NVML ]]; then echo "no stand-in NVML at $FAKE_NVML (ZAYA_FAKE_NVML)"; exit 1; fi
    cat > "$WORK/gpu_rules.json" <<'JSON'
[{"metric": "zaya_gpu_ecc_errors_total", "labels": {"type": "uncorrected"}, "increase": 0,
  "action": "mark_bad_host"},
 {"metric": "zaya_gpu_xid_errors_total", "increase": 0, "action": "restart"}]
JSON
  fi
  printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' > "$WORK/local_agent.sh"
  chmod +x "$WORK/local_agent.sh"
  printf '%s slots=1\nhostB slots=1\n' "$(hostname)" > "$WORK/hosts"
  fake_sysfs() {  # fake_sysfs DIR: one memory controller and one NIC, every counter 0
    mkdir -p "$1/devices/system/edac/mc/mc0" "$1/class/net/eth9"
    for f in ce_count ue_count ce_noinfo_count ue_noinfo_count; do echo 0 > "$1/devices/system/edac/mc/mc0/$f"; done
    echo 1 > "$1/devices/system/edac/mc/mc0/size_mb"
    for f in carrier_changes carrier_up_count carrier_down_count; do echo 0 > "$1/class/net/eth9/$f"; done
    echo 1 > "$1/class/net/eth9/carrier"; echo up > "$1/class/net/eth9/operstate"
  }
  PIDS=()
  trap 'kill "${PIDS[@]}" 2> /dev/null' EXIT
  free_port() { py "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
  serve_host() {  # serve_host NAME PORT: host NAME's exporter, its state under WORK/NAME
    if [[ $SCENARIO == health ]]; then
      fake_sysfs "$WORK/$1"
      "$EXPORTER" --path.sysfs="$WORK/$1" --web.listen-address="127.0.0.1:$2" --collector.disable-defaults \
        --collector.edac --collector.netclass > "$WORK/$1.log" 2>&1 &
    else
      printf 'gpus 2\ntemperature 0 40\ntemperature 1 41\n' > "$WORK/$1"
      ZAYA_FAKE_NVML_STATE="$WORK/$1" "$ZAYA" health-exporter --gpu "nvml:$FAKE_NVML" \
        --port "$2" > "$WORK/$1.log" 2>&1 &
    fi
    PIDS+=($!)
  }
  health_run() {  # health_run OUT LOG BUMP: runs the shell command BUMP once step 5 is done
    local out=$1 log=$2 bump=$3
    rm -rf "$out" "$WORK/here" "$WORK/hostB"
    local p1 p2 sources; p1=$(free_port); p2=$(free_port)
    serve_host hostB "$p2"
    sources=(--node-exporter "hostB=http://127.0.0.1:$p2/metrics")
    if [[ $SCENARIO == health ]]; then
      serve_host here "$p1"
      sources+=(--node-exporter "$(hostname)=http://127.0.0.1:$p1/metrics")
    else  # this host's GPUs: aegis loads the stand-in NVML itself
      printf 'gpus 2\ntemperature 0 40\ntemperature 1 41\n' > "$WORK/here"
      sources+=(--gpu-health "$(hostname)=nvml:$FAKE_NVML")
    fi
    for p in $p1 $p2; do
      [[ $SCENARIO == gpu_health && $p == "$p1" ]] && continue
      for _ in $(seq 100); do py "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$p/metrics')" 2> /dev/null && break; sleep 0.1; done
    done
    ( for _ in $(seq 1200); do
        if grep -qs '"step":5,' "$out"/heartbeat/rank-00000.jsonl; then eval "$bump"; break; fi
        sleep 0.05
      done ) &
    local bumper=$!
    # Rank 0's steps stretched 6x (slow:rank=0:factor=6 from step 3; on both ranks the stretches
    # compound, each rank measuring the other's sleep) so that the run is still going when the
    # counters change; the results do not depend on it. The grace covers finishing a stretched
    # step and checkpointing it under the sanitizers.
    ZAYA_FAKE_NVML_STATE="$WORK/here" ZAYA_FAULTS="slow@3:rank=0:factor=6" "$ZAYA" aegis --run-dir "$out" \
      --backoff 0.2 --poll 0.05 --grace 60 \
      --health-rules "$WORK/${SCENARIO/gpu_health/gpu}_rules.json" --health-interval 0.2 "${sources[@]}" \
      --hostfile "$WORK/hosts" -- \
      mpirun --hostfile "$WORK/hosts" --mca plm_rsh_agent "$WORK/local_agent.sh" --mca rtc ^hwloc \
      -np 2 --allow-run-as-root -x ZAYA_FAULTS -x OMP_NUM_THREADS \
      "$ZAYA" --threads 1 train --config "$WORK/train.json" --out "$out" --no-progress > "$log" 2>&1
    AEGIS_RC=$?
    wait "$bumper"
    kill "${PIDS[@]}" 2> /dev/null; wait "${PIDS[@]}" 2> /dev/null; PIDS=()
  }
  if [[ $SCENARIO == health ]]; then
    ECC_BUMP="echo 1 > '$WORK/here/devices/system/edac/mc/mc0/ue_count'"
    ECC_SERIES='node_edac_uncorrectable_errors_total{controller="0"}'
    FLAP_BUMP="echo 5 > '$WORK/hostB/class/net/eth9/carrier_changes'"
    FLAP_SERIES=carrier_changes
  else
    ECC_BUMP="echo 'ecc_uncorrected 1 1' >> '$WORK/here'"
    ECC_SERIES='zaya_gpu_ecc_errors_total{gpu="1",type="uncorrected",uuid="GPU-fake-1"}'
    FLAP_BUMP="echo 'xid 0 79' >> '$WORK/hostB'"
    FLAP_SERIES='zaya_gpu_xid_errors_total{gpu="0",uuid="GPU-fake-0"}'
  fi
  health_run "$OUT" "$LOG" "$ECC_BUMP"
  check "ECC: aegis exits 0" test "$AEGIS_RC" = 0
  check "ECC: a health event on this host's $ECC_SERIES, the host marked bad, a relaunch on hostB with 1 rank" py "
import json, sys
ev = [json.loads(l) for l in open('$OUT/aegis/events.jsonl')]
h = [e for e in ev if e['kind'] == 'health']
bad = [e['host'] for e in ev if e['kind'] == 'bad_host']
launches = [e['command'] for e in ev if e['kind'] == 'launch']
print([e['message'] for e in h], bad)
sys.exit(not (len(h) == 1 and h[0]['source_host'] == '$(hostname)' and h[0]['value'] == 1
              and h[0]['series'] == '''$ECC_SERIES''' and bad == ['$(hostname)'] and len(launches) == 2
              and launches[1][launches[1].index('-np') + 1] == '1'))"
  check "ECC: the job stopped on SIGTERM (its step finished and checkpointed), and the relaunch resumed from that checkpoint" py "
import json, re, sys
ev = [json.loads(l) for l in open('$OUT/aegis/events.jsonl')]
how = [e['how'] for e in ev if e['kind'] == 'job_stopped']
log = open('$LOG', errors='replace').read()
first, second = log.split('attempt 2: started', 1)
saved = re.findall(r'checkpoint saved: \S+step-(\d+)', first)
resumed = re.search(r'resumed from \S+step-(\d+)', second)
print(how, 'saved', saved[-1:], 'resumed', resumed and resumed.group(1))
sys.exit(not (how == ['SIGTERM'] and saved and resumed and resumed.group(1) == saved[-1]
              and int(saved[-1]) >= 5))"
  check "ECC: the run finished its 20 steps on hostB alone" finite_metrics "$OUT" 20
  health_run "$OUT.flap" "$LOG.flap" "$FLAP_BUMP"
  check "flap: aegis exits 0" test "$AEGIS_RC" = 0
  check "flap: one health event on hostB's $FLAP_SERIES, a restart on both hosts, no host marked bad" py "
import json, sys
ev = [json.loads(l) for l in open('$OUT.flap/aegis/events.jsonl')]
h = [e for e in ev if e['kind'] == 'health']
launches = [e['command'] for e in ev if e['kind'] == 'launch']
print([e['message'] for e in h])
sys.exit(not (len(h) == 1 and h[0]['source_host'] == 'hostB' and '''$FLAP_SERIES''' in h[0]['series']
              and not [e for e in ev if e['kind'] == 'bad_host'] and len(launches) == 2
              and launches[1][launches[1].index('-np') + 1] == '2'))"
  check "flap: final weights bitwise equal to the uninterrupted run" same_model "$OUT.flap"
  ;;
bad_host)  # a mark_bad_host rule: the relaunch leaves that host out (an Open MPI hostfile of two
  # "hosts" on this machine: this one, and hostB reached through a launch agent that runs the
  # command here; mpirun alone would take both names for one node), and at --min-ranks 2 the
  # relaunch is refused
  if [[ $NP != 2 ]]; then echo "bad_host needs mpirun -np 2 (NP=2)"; exit 77; fi
  printf '#!/bin/sh\nshift\nexec sh -c "$*"\n' > "$WORK/local_agent.sh"
  chmod +x "$WORK/local_agent.sh"
  printf '%s slots=1\nhostB slots=1\n' "$(hostname)" > "$WORK/hosts"
  echo '[{"regex": "^fault injection: hang@", "action": "mark_bad_host"}]' > "$WORK/host_rules.json"
  host_run() {  # host_run OUT LOG [aegis options...]
    local out=$1 log=$2; shift 2
    rm -rf "$out"
    ZAYA_FAULTS="hang@6:rank=0" "$ZAYA" aegis --run-dir "$out" --backoff 0.2 --poll 0.05 --grace 2 \
      --rules "$WORK/host_rules.json" --hostfile "$WORK/hosts" --hang-floor 60 "$@" -- \
      mpirun --hostfile "$WORK/hosts" --mca plm_rsh_agent "$WORK/local_agent.sh" --mca rtc ^hwloc \
      -np 2 --allow-run-as-root -x ZAYA_FAULTS -x OMP_NUM_THREADS \
      "$ZAYA" --threads 1 train --config "$WORK/train.json" --out "$out" --no-progress > "$log" 2>&1
    AEGIS_RC=$?
  }
  host_run "$OUT" "$LOG"
  check "aegis exits 0" test "$AEGIS_RC" = 0
  check "this host marked bad, the run relaunched on hostB alone with one rank" py "
import json, sys
ev = [json.loads(l) for l in open('$OUT/aegis/events.jsonl')]
bad = [e['host'] for e in ev if e['kind'] == 'bad_host']
hosts = [e for e in ev if e['kind'] == 'hosts']
launches = [e['command'] for e in ev if e['kind'] == 'launch']
second = launches[1] if len(launches) > 1 else []
print(bad, [(h['hosts'], h['ranks']) for h in hosts], second[:8])
sys.exit(not (bad == ['$(hostname)'] and len(hosts) == 1 and hosts[0]['hosts'] == ['hostB']
              and hosts[0]['ranks'] == 1 and len(launches) == 2
              and second[second.index('--hostfile') + 1] == '$OUT/aegis/hostfile'
              and second[second.index('-np') + 1] == '1'))"
  check "aegis's hostfile lists hostB alone" test "$(cat "$OUT/aegis/hostfile")" = "hostB slots=1"
  check "the run finished its 20 steps, resharded from 2 ranks to 1" finite_metrics "$OUT" 20
  host_run "$OUT.min" "$LOG.min" --min-ranks 2
  check "at --min-ranks 2: exit 5, the relaunch refused with an event, one launch" py "
import json, sys
ev = [json.loads(l) for l in open('$OUT.min/aegis/events.jsonl')]
refused = [e for e in ev if e['kind'] == 'relaunch_refused']
print($AEGIS_RC, refused)
sys.exit(not ($AEGIS_RC == 5 and len(refused) == 1 and refused[0]['ranks'] == 1
              and sum(e['kind'] == 'launch' for e in ev) == 1))"
  ;;
hostile_log)  # docs/aegis.md's example rules and a backtracking one against huge lines: no crash, no hang
  rm -rf "$OUT"
  cat > "$WORK/hostile_rules.json" <<'JSON'
[{"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},
 {"regex": "uncorrectable ECC error on (\\S+)", "action": "mark_bad_host"},
 {"regex": "(x+)+y", "action": "stop"},
 {"regex": "CUDA error: out of memory", "action": "stop"}]
JSON
  # A 100,000-character line, then 10 MB without a newline, then a line a rule must still catch.
  T0=$(date +%s.%N)
  "$ZAYA" aegis --run-dir "$OUT" --poll 0.05 --max-restarts 0 --rules "$WORK/hostile_rules.json" -- \
    /usr/bin/python3 -c "
import sys
sys.stdout.write('NCCL WARN ' + 'x' * 100000 + '\\n'); sys.stdout.flush()
sys.stdout.write('x' * 10000000); sys.stdout.flush()
sys.stdout.write('\\nCUDA error: out of memory\\n'); sys.stdout.flush()" > "$LOG" 2>&1
  AEGIS_RC=$?
  T=$(py "print(round($(date +%s.%N) - $T0, 2))")
  check "aegis exits 2 (the stop rule after the huge lines matched), in ${T} s (< 20 s)" \
    py "import sys; print('exit code', $AEGIS_RC); sys.exit(not ($AEGIS_RC == 2 and $T < 20))"
  check "the rule event names the out-of-memory rule" \
    grep -q '"kind":"rule".*log rule 3 .*matched: CUDA error: out of memory' "$OUT/aegis/events.jsonl"
  check "the 10 MB line was echoed cut at 64 KiB" grep -q 'line cut at 65536 bytes' "$LOG"
  check "the log holds no 10 MB line" test "$(wc -L < "$LOG")" -lt 200000
  ;;
no_exec)  # a launch command that does not exist: named with the reason, exit non-zero, no restart
  rm -rf "$OUT"
  "$ZAYA" aegis --run-dir "$OUT" --backoff 0.2 --max-restarts 3 -- zaya-no-such-command --out "$OUT" \
    > "$LOG" 2>&1
  AEGIS_RC=$?
  check "aegis exits 127 at once" test "$AEGIS_RC" = 127
  check "the message names the command and the reason" \
    grep -q "^aegis: cannot execute 'zaya-no-such-command': No such file or directory" "$LOG"
  check "no restart, one attempt" test "$(events "$OUT" restart)/$(state "$OUT" "['attempts']")" = 0/1
  check "state: failed, the cause names the command" py "
import json, sys
s = json.load(open('$OUT/aegis/state.json'))
sys.exit(not (s['outcome'] == 'failed' and 'zaya-no-such-command' in s['cause']))"
  # Found but not executable: the reason differs.
  printf '#!/bin/sh\necho hi\n' > "$WORK/not_executable.sh"; chmod -x "$WORK/not_executable.sh"
  "$ZAYA" aegis --run-dir "$OUT.noexec" -- "$WORK/not_executable.sh" > "$LOG.noexec" 2>&1
  AEGIS_RC=$?
  check "not executable: exit 127, 'Permission denied'" bash -c \
    "test $AEGIS_RC = 127 && grep -q \"^aegis: cannot execute '$WORK/not_executable.sh': Permission denied\" '$LOG.noexec'"
  ;;
no_step)  # the job exits 0 without a single training step: a failure, not a completed run
  rm -rf "$OUT"
  "$ZAYA" aegis --run-dir "$OUT" --backoff 0.2 --poll 0.05 -- bash -c "echo 'nothing to do'; exit 0" \
    > "$LOG" 2>&1
  AEGIS_RC=$?
  check "aegis exits 4 (no progress), not 0" test "$AEGIS_RC" = 4
  check "state: failed, not completed; the cause says no step was made" py "
import json, sys
s = json.load(open('$OUT/aegis/state.json'))
print(s['outcome'], '|', s['cause'])
sys.exit(not (s['outcome'] == 'failed' and 'without completing a training step' in s['cause']))"
  check "no completed event, not restarted" \
    test "$(events "$OUT" completed)/$(events "$OUT" restart)/$(events "$OUT" no_progress)" = 0/0/1
  ;;
*) echo "unknown scenario $SCENARIO"; exit 1 ;;
esac
[[ $fails == 0 ]] || { echo "--- $LOG"; tail -40 "$LOG"; }
finish
