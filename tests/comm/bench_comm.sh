#!/usr/bin/env bash
# zaya bench comm under mpirun -np 2: the nccl-tests table shape, "#wrong" 0 everywhere, the
# footers; -np 3 with -c 1: "#wrong" 0 everywhere; --peer: three more columns and the peer footer;
# then a bad flag under mpirun: a non-zero exit and an error naming each rank.
set -euo pipefail
zaya=$1
mpirun=$2
run() { "$mpirun" --oversubscribe --allow-run-as-root "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(run -np 2 "$zaya" bench comm -b 8 -e 64K -c 1 -n 5 -w 1)
echo "$out"
grep -q "communicator mpi, world size 2" <<< "$out" || fail "header lacks the communicator and world"
[[ $(grep -c "^#  Rank " <<< "$out") == 2 ]] || fail "expected one line per rank"
for op in all_reduce reduce_scatter all_gather broadcast; do
  grep -q "^# Collective: $op$" <<< "$out" || fail "no table for $op"
done
[[ $(grep -c "^# Out of bounds values : 0 OK$" <<< "$out") == 4 ]] || fail "expected 4 OK footers"
[[ $(grep -c "^# Avg bus bandwidth    : " <<< "$out") == 4 ]] || fail "expected 4 busbw footers"
# Data rows: size count type redop root, then time algbw busbw #wrong out-of-place and in-place.
rows=$(grep -v "^#" <<< "$out" | grep -v "^$")
[[ $(wc -l <<< "$rows") -ge 40 ]] || fail "too few data rows"
awk 'NF != 13 { print "bad row: " $0; exit 1 }
     $9 != 0 || $13 != 0 { print "wrong values: " $0; exit 1 }
     $1 % $2 != 0 { print "size not a multiple of count: " $0; exit 1 }' <<< "$rows" ||
  fail "table rows"
# 8 bytes of float is 2 elements: all_reduce's first row; all_gather's first row splits 8 bytes
# over 2 ranks.
grep -qE "^ +8 +2 +float +sum +-1 " <<< "$rows" || fail "no 8-byte all_reduce row"
grep -qE "^ +8 +2 +float +none +0 " <<< "$rows" || fail "no 8-byte broadcast row"

# Three ranks (a non-power-of-two): every collective and size verified.
out3=$(run -np 3 "$zaya" bench comm -b 8 -e 1M -f 4 -c 1 -n 3 -w 1)
[[ $(grep -c "^# Out of bounds values : 0 OK$" <<< "$out3") == 4 ]] || fail "np 3: expected 4 OK footers"
grep -v "^#" <<< "$out3" | grep -v "^$" | awk '$9 != 0 || $13 != 0 { print "np 3 wrong values: " $0; exit 1 }' ||
  fail "np 3 rows"

# --peer: MPI's own collectives in the same run: 16 columns with numeric peer time, busbw and
# ratio (their values are timings, which a test does not judge), and the peer footer.
peer=$(run -np 2 "$zaya" bench comm -b 1K -e 64K -f 8 -n 3 -w 1 --peer --ops all_reduce)
grep -v "^#" <<< "$peer" | grep -v "^$" |
  awk 'NF != 16 || $14 !~ /^[0-9.]+$/ || $15 !~ /^[0-9.]+$/ || $16 !~ /^[0-9.]+$/ {
         print "bad peer row: " $0; exit 1 }' ||
  fail "peer rows"
grep -q "^# Avg bus bandwidth of mpi-native (out-of-place): " <<< "$peer" || fail "no peer footer"

# The buffers in a backend's memory (the CPU's stand-in for a GPU): filled and checked through
# copies, as with --device cuda; every value right.
dev=$(run -np 2 "$zaya" bench comm --device cpu-as-device -b 8 -e 64K -f 8 -c 1 -n 2 -w 1)
[[ $(grep -c "^# Out of bounds values : 0 OK$" <<< "$dev") == 4 ]] ||
  fail "cpu-as-device: expected 4 OK footers"

# A bad flag fails on every rank, and each rank's error names the rank.
set +e
err=$(run -np 2 "$zaya" bench comm -d double 2>&1 >/dev/null)
rc=$?
set -e
echo "$err" | head -5
[[ $rc -ne 0 ]] || fail "bad -d exited 0"
grep -q "\[rank 0/2\] zaya: error: -d/--datatype: 'double'" <<< "$err" || fail "no rank 0 error"
grep -q "\[rank 1/2\] zaya: error: -d/--datatype: 'double'" <<< "$err" || fail "no rank 1 error"
echo "bench_comm: OK"
