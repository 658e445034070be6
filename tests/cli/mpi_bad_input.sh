#!/usr/bin/env bash
# Bad input under mpirun: seen by every rank, or by one rank alone (a file on one machine only,
# played here by giving the ranks different command lines), before MPI starts or after. Every
# case must end the whole job with a non-zero status and the message, never hang: each runs
# under `timeout` (a generous bound on termination, not a measured time). Issue 31.
#   tests/cli/mpi_bad_input.sh ZAYA SRC WORK MPIRUN
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-}
if [[ -z $MPIRUN ]]; then
  echo "SKIPPED: this build has no MPI"
  exit 77
fi
rm -rf "$WORK"; mkdir -p "$WORK"
fails=0

# expect NAME EXPECTED_SUBSTRING -- mpirun arguments...
expect() {
  local name=$1 expected=$2; shift 3
  local out rc
  out=$(timeout -k 10 120 "$MPIRUN" "$@" 2>&1); rc=$?
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "FAIL $name: the job did not end (killed by timeout after 120 s)"; echo "$out" | tail -5
    fails=$((fails + 1)); return
  fi
  if [[ $rc -eq 0 || "$out" != *"$expected"* ]]; then
    echo "FAIL $name: exit $rc, want non-zero and '$expected':"; echo "$out" | tail -5
    fails=$((fails + 1)); return
  fi
  echo "ok   $name: exit $rc, $(echo "$out" | grep -m1 -F -e "$expected")"
}

# Every rank sees the same bad input.
expect train-no-config "must be an existing file" -- \
  -np 2 "$ZAYA" train --config "$WORK/none.json"
expect eval-windows-0 "--windows: must be a positive integer, got 0" -- \
  -np 2 "$ZAYA" eval --windows 0
expect serve-ranks "zaya serve runs as one process" -- \
  -np 2 "$ZAYA" serve --model "$WORK/none"
expect data-prepare-no-tokenizer "expected a tokenizer file" -- \
  -np 2 "$ZAYA" data prepare --input "$WORK/none.jsonl" --tokenizer "$WORK/none.json" \
  --out "$WORK/out" --name x
expect blas-before-mpi "is not a kernel choice" -- \
  -np 2 "$ZAYA" --blas-kernels bogus bench comm -e 1K
# One rank alone: before MPI starts, and after (its parse fails while the other rank waits in a
# collective; this hung until the ranks compared their parse results).
expect one-rank-before-mpi "is not a kernel choice" -- \
  -np 1 "$ZAYA" --blas-kernels bogus bench comm -e 1K : -np 1 "$ZAYA" bench comm -e 1K
expect one-rank-parse "the command line ended on another rank" -- \
  -np 1 "$ZAYA" bench comm --bogus : -np 1 "$ZAYA" bench comm -e 1K
expect one-rank-missing-file "must be an existing file" -- \
  -np 1 "$ZAYA" train --config "$WORK/none.json" : -np 1 "$ZAYA" bench comm -e 1K

echo "mpi bad input: $fails failed"
exit $((fails > 0))
