#!/usr/bin/env bash
# `zaya data prepare --resume` after a kill -9: the run is killed at exact points through the test
# hook ZAYA_PREPARE_KILL_AT=POINT:N (while a part is written, before a part's rename, while a
# shard is written, before a shard's rename, before index.json's rename, after it before the
# parts are removed), at random moments with kill -9 from outside (RANDOM_KILLS of them), and by
# a write failure (a file size limit standing in for a full disk); each time --resume (killed
# again in some drills) must end with outputs byte-identical to an uninterrupted run's (index.json
# apart from made_by.created_utc and made_by.elapsed_s, which differ between any two runs), and no
# leftover .prepare directory. Usage: prepare_resume.sh ZAYA WORK [RANDOM_KILLS] [SEED]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ZAYA=$1; WORK=$2; RANDOM_KILLS=${3:-2}; SEED=${4:-1}
rm -rf "$WORK"; mkdir -p "$WORK/in"
cd "$WORK"
RANDOM=$SEED

python3 - <<'PY'
import gzip, json
lines = []
for d in range(2100):
    words = " ".join(f"w{(d * 7 + i) % 97}" for i in range(8 + d % 50))
    text = f"Doc {d % 1900}: {words}."  # 200 repeats for --dedup
    lines.append(json.dumps({"text": text, "id": f"d{d}"}))
for k in range(7):
    part = "\n".join(lines[k * 300:(k + 1) * 300]) + "\n"
    if k % 3 == 1:
        with gzip.open(f"in/part-{k}.jsonl.gz", "wt") as f: f.write(part)
    else:
        open(f"in/part-{k}.jsonl", "w").write(part)
PY
zstd -q --rm in/part-3.jsonl -o in/part-3.jsonl.zst

prep() {  # prep NAME [ARGS...]: prepares into out/NAME; returns zaya's exit status
  local name=$1; shift
  ${EXEC:-} "$ZAYA" data prepare --input in --out "out/$name" --name src --val-fraction 0.1 --shard-tokens 20000 \
    --dedup exact --id-key id --threads "${THREADS:-2}" --no-progress "$@" > /dev/null 2> "err-$name.txt"
}
prep ref
ls out/ref/src/train-00004.bin > /dev/null  # several shards

same() { python3 "$HERE/same_outputs.py" out/ref "out/$1"; }  # same NAME: out/NAME equals out/ref

drill() {  # drill NAME POINT:N [POINT:N for the resume]: killed at POINT:N, resumed, compared
  local name=$1 first=$2 second=${3:-} rc=0
  ZAYA_PREPARE_KILL_AT=$first prep "$name" || rc=$?
  [[ $rc == 137 ]] || { echo "FAIL: $name: exit $rc, expected 137 (killed at $first)"; exit 1; }
  [[ ! -e "out/$name/src/index.json" ]] || [[ $first == cleanup:* ]] ||
    { echo "FAIL: $name: index.json exists after a kill at $first"; exit 1; }
  if [[ -n $second ]]; then
    rc=0; ZAYA_PREPARE_KILL_AT=$second prep "$name" --resume || rc=$?
    [[ $rc == 137 ]] || { echo "FAIL: $name: resume exit $rc, expected 137 ($second)"; exit 1; }
  fi
  prep "$name" --resume || { echo "FAIL: $name: --resume failed: $(cat "err-$name.txt")"; exit 1; }
  same "$name"
  echo "ok: killed at $first${second:+, then at $second}: --resume gives identical outputs"
}
drill a part-write:700 part-write:400
drill b part-commit:4
THREADS=1 drill c shard-write:100 shard-commit:2  # one thread: tokenized on the main thread
THREADS=1 drill g part-write:300
drill d shard-commit:3
drill e index-commit:1
drill f cleanup:1

# A write failure (EFBIG under a 96 KiB file size limit, as a full disk gives ENOSPC): an error
# naming the file, no index.json; then --resume without the limit.
rc=0; (trap '' XFSZ; ulimit -f 96; prep full) || rc=$?
[[ $rc == 1 ]] && grep -q "write failed" err-full.txt ||
  { echo "FAIL: full disk: exit $rc: $(cat err-full.txt)"; exit 1; }
[[ ! -e out/full/src/index.json ]]
prep full --resume; same full
echo "ok: a write failure, then --resume: identical outputs"

# --resume under other reading options is refused, naming the difference.
ZAYA_PREPARE_KILL_AT=part-commit:2 prep other || true
if prep other --resume --text-key body; then echo "FAIL: resumed under another --text-key"; exit 1; fi
grep -q "text_key was \"text\", now \"body\"" err-other.txt || { cat err-other.txt; exit 1; }
echo "ok: --resume under another --text-key refused"

# kill -9 from outside at random moments (RANDOM_KILLS of them, each followed by --resume).
full_ms=$( { /usr/bin/time -f %e bash -c "$(declare -f prep); ZAYA=$ZAYA prep timing" ; } 2>&1 | tail -1)
killed=0
for ((k = 0; k < RANDOM_KILLS; ++k)); do
  name=rand$k
  delay=$(python3 -c "import random; random.seed($SEED * 1000 + $k); print(round(random.uniform(0.02, 1.1) * $full_ms, 3))")
  (EXEC=exec prep "$name") & pid=$!  # exec: $pid is zaya itself
  sleep "$delay"
  if kill -9 $pid 2> /dev/null; then killed=$((killed + 1)); fi
  wait $pid || true
  prep "$name" --resume || { echo "FAIL: $name: --resume failed: $(cat "err-$name.txt")"; exit 1; }
  same "$name"
  rm -rf "out/$name"
done
echo "ok: $killed of $RANDOM_KILLS random kill -9 landed before the end; each --resume identical"
echo "data.prepare_resume: all passed"
