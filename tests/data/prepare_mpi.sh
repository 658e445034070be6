#!/usr/bin/env bash
# `zaya data prepare` under mpirun: the 7 input files of a generated corpus are divided among the
# ranks (each tokenizes its share into parts, rank 0 writes the shards), and the shards, the
# train/val split, documents.jsonl and index.json (apart from made_by.created_utc and elapsed_s)
# are byte-identical at -np 1, 2 and 3 and to a run without mpirun. Then a rank that fails (a bad
# line in the file it tokenizes) stops every rank with the file and line named, no index.json,
# and --resume under mpirun -np 2 after a kill -9 at -np 3 gives the same outputs again.
# Usage: prepare_mpi.sh ZAYA MPIRUN WORK
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ZAYA=$1; MPIRUN=$2; WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK/in"
cd "$WORK"
export OMP_NUM_THREADS=1

python3 - <<'PY'
import gzip, json
lines = []
for d in range(1400):
    words = " ".join(f"v{(d * 11 + i) % 89}" for i in range(6 + d % 45))
    lines.append(json.dumps({"text": f"Item {d % 1300}: {words}.", "id": d}))
for k in range(7):
    n = [100, 350, 120, 260, 90, 300, 180][k]  # unequal files
    start = sum([100, 350, 120, 260, 90, 300, 180][:k])
    part = "\n".join(lines[start:start + n]) + "\n"
    if k == 2:
        with gzip.open(f"in/f{k}.jsonl.gz", "wt") as f: f.write(part)
    else:
        open(f"in/f{k}.jsonl", "w").write(part)
PY

mpi() { "$MPIRUN" --oversubscribe --allow-run-as-root "$@"; }
prep() {  # prep NAME LAUNCH...: prepares into out/NAME/src (more flags in $EXTRA)
  local name=$1; shift
  "$@" data prepare --input in --out "out/$name" --name src --val-fraction 0.1 \
    --shard-tokens 15000 --dedup exact --id-key id --threads 1 --no-progress ${EXTRA:-} > "log-$name.txt" 2>&1
}
prep plain "$ZAYA"
for np in 1 2 3; do prep "np$np" mpi -np $np "$ZAYA"; done
ls out/plain/src/train-00003.bin > /dev/null

same() { python3 "$HERE/same_outputs.py" out/plain "out/$1"; }  # same NAME: out/NAME equals out/plain
for np in 1 2 3; do same "np$np"; done
grep -q "prepared src: " log-np3.txt
[[ $(grep -c "prepared src: " log-np3.txt) == 1 ]] || { echo "FAIL: more than one rank reported"; exit 1; }
echo "ok: mpirun -np 1, 2, 3: shards, split, documents.jsonl and index.json identical"

# kill -9 (through the hook, on every rank) while parts are written at -np 3; resume at -np 2.
rc=0; prep kill mpi -np 3 -x ZAYA_PREPARE_KILL_AT=part-commit:1 "$ZAYA" || rc=$?
[[ $rc != 0 && ! -e out/kill/src/index.json ]] || { echo "FAIL: killed run: exit $rc"; exit 1; }
EXTRA=--resume prep kill mpi -np 2 "$ZAYA"
same kill
echo "ok: killed at -np 3, resumed at -np 2: identical outputs"

# A bad line in one rank's file: every rank stops, the file and line are named, no index.json.
cp in/f5.jsonl bad.jsonl && { head -n 7 bad.jsonl; echo '{"text": 5}'; tail -n +8 bad.jsonl; } > in/f5.jsonl
rc=0; prep bad mpi -np 3 "$ZAYA" || rc=$?
[[ $rc != 0 ]] || { echo "FAIL: exit 0 with a bad line"; exit 1; }
grep -q "f5.jsonl:8: field 'text' is a number, expected a string" log-bad.txt ||
  { echo "FAIL: the bad line is not named:"; cat log-bad.txt; exit 1; }
[[ ! -e out/bad/src/index.json ]]
echo "ok: a bad line on one rank stops all three, named, no index.json"
echo "data.prepare_mpi: all passed"
