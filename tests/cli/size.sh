#!/usr/bin/env bash
# zaya size end to end: ZAYA1-base's published counts through the CLI (--config, --json), a proposal
# written as a config that zaya info and zaya bench step accept, a measured profile of this machine
# (a quick one: a small GEMM grid, one probe step) that predicts a step, and under mpirun the
# collectives and the shared-machine rates added to it.
#   tests/cli/size.sh ZAYA SRC WORK [MPIRUN]
set -euo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-}
PY=/usr/bin/python3
rm -rf "$WORK"; mkdir -p "$WORK"
fails=0
check() {  # check OK-BOOL WHAT
  if [[ $1 == 1 ]]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi
}

# 1. ZAYA1-base: 8.3B non-embedding, 760M active (8,303,355,728 and 753,608,528 from its shapes).
"$ZAYA" size --profile mi300x --config "$SRC/configs/zaya1-base.json" --world 1024 --seq 4096 \
  --json > "$WORK/base.json"
ok=$($PY -c "
import json; c = json.load(open('$WORK/base.json'))['candidates'][0]
p = c['params']
print(int(p['non_embedding'] == 8303355728 and p['active_non_embedding'] == 753608528
          and c['max_micro_batch'] >= 1 and c['step_seconds']['total'] > 0))")
check "$ok" "zaya size --config zaya1-base.json: 8,303,355,728 / 753,608,528 parameters, fits an MI300X"

# 2. A proposal for an H100 cluster, written as a config that the rest of zaya reads.
"$ZAYA" size --profile h100 --active-params 760M --world 64 --write "$WORK/proposed.json" \
  > "$WORK/proposed.txt"
cat "$WORK/proposed.txt"
"$ZAYA" info --config "$WORK/proposed.json" > "$WORK/info.txt"
ok=$($PY -c "
import re; t = open('$WORK/info.txt').read()
a = int(re.search(r'active non-embedding \(top-1\)\s+([\d,]+)', t).group(1).replace(',', ''))
print(int(abs(a / 760e6 - 1) < 0.15))")
check "$ok" "the written config reads back with ~760M active parameters"
out=$("$ZAYA" size --profile h100 --active-params 760M --world 64 --write "$WORK/proposed.json" 2>&1) && rc=0 || rc=$?
check "$([[ $rc -ne 0 && $out == *"already exists and this command did not make it; nothing was changed. Pass --force"* ]] && echo 1 || echo 0)" \
  "--write does not replace an existing file"

# 3. A measured profile of this machine (quick), then a prediction from it.
"$ZAYA" --threads 2 size profile --out "$WORK/hw.json" --threads-list 1,2 --grid-max 256 \
  --gemm-min-time 0.002 --probe-steps 1 --membw-elements 4000000 > "$WORK/profile.txt"
ok=$($PY -c "
import json; p = json.load(open('$WORK/hw.json'))
r = p['rates']
print(int(p['measured'] and [x['threads'] for x in r] == [1, 2] and
          all(len(x['gemm_m_n_k_gflops']) == 27 and x['membw_gbs'] > 0 and x['ns_per_logit'] > 0
              for x in r) and p['runtime_bytes'] > 0))")
check "$ok" "zaya size profile writes the rates of 1 and 2 threads (27 grid points each)"
"$ZAYA" size --profile "$WORK/hw.json" --config "$SRC/configs/small.json" > "$WORK/small.txt"
ok=$(grep -qE '^step \(32 sequences, 4 micro-batches per rank, 2 threads per rank\): [0-9.]+ s' \
  "$WORK/small.txt" && echo 1 || echo 0)
check "$ok" "a step of configs/small.json predicted from the measured profile"
out=$("$ZAYA" size --profile "$WORK/hw.json" --config "$SRC/configs/small.json" --world 2 2>&1) && rc=0 || rc=$?
check "$([[ $rc -ne 0 && $out == *"no measured collectives"* ]] && echo 1 || echo 0)" \
  "2 ranks need the collectives measured"

if [[ -n "$MPIRUN" ]]; then
  "$MPIRUN" -np 2 --oversubscribe --allow-run-as-root "$ZAYA" size profile --out "$WORK/hw.json" \
    --grid-max 256 --gemm-min-time 0.002 --probe-steps 1 --membw-elements 4000000 \
    > "$WORK/profile2.txt"
  ok=$($PY -c "
import json; p = json.load(open('$WORK/hw.json'))
print(int(p['comm']['world'] == 2 and p['comm']['busbw_gbs'] > 0 and
          any(r['ranks'] == 2 and r['threads'] == 1 for r in p['rates'])))")
  check "$ok" "mpirun -np 2 zaya size profile adds the collectives and the rates of 2 ranks sharing the machine"
  "$ZAYA" size --profile "$WORK/hw.json" --config "$SRC/configs/small.json" --world 2 > "$WORK/small2.txt"
  ok=$(grep -qE '1 thread per rank\): [0-9.]+ s = .* communication [0-9.]+' "$WORK/small2.txt" && echo 1 || echo 0)
  check "$ok" "a 2-rank step predicted with its communication"
else
  echo "SKIP the mpirun part: this build has no MPI"
fi

echo "size: $fails failed"
exit $((fails > 0))
