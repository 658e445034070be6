#!/usr/bin/env bash
# `zaya data prepare` on every input form: the same documents as text (blank-line separated),
# JSON Lines, .jsonl.gz and .jsonl.zst, in one file or seven, a directory or a glob, at
# --threads 1 and 2, give byte-identical shards and index.json (apart from made_by and report,
# which describe the input files). Damaged inputs stop with FILE:LINE (or a byte offset) and the
# reason and leave no index.json; --skip-bad, --dedup exact and --min-chars are counted.
set -euo pipefail
ZAYA=$1; WORK=$2; HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK"; mkdir -p "$WORK/in"
cd "$WORK"

python3 - <<'PY'
import gzip, json
docs = []
for d in range(400):
    words = " ".join(f"w{(d * 7 + i) % 113}" for i in range(5 + d % 40))
    para = f"Doc {d}: café ünïcode – {words}."
    docs.append(para + ("\nsecond line" if d % 3 == 0 else ""))
open("in/docs.txt", "w", encoding="utf-8").write("\n\n".join(docs) + "\n")
lines = [json.dumps({"text": t, "meta": {"id": f"doc-{i}"}}, ensure_ascii=i % 2 == 0) for i, t in enumerate(docs)]
open("in/docs.jsonl", "w").write("\n".join(lines) + "\n")
with gzip.open("in/docs.jsonl.gz", "wt") as f: f.write("\n".join(lines) + "\n")
for k in range(7):
    part = lines[k * len(lines) // 7:(k + 1) * len(lines) // 7]
    open(f"in/part-{k}.jsonl", "w").write("\n".join(part) + "\n")
PY
zstd -q in/docs.jsonl -o in/docs.jsonl.zst
mkdir parts; cp in/part-*.jsonl parts/
gzip parts/part-1.jsonl; zstd -q --rm parts/part-4.jsonl   # a mixed directory

prep() {  # prep NAME ARGS...: prepares into out/NAME
  local name=$1; shift
  "$ZAYA" data prepare --out out --name "$name" --val-fraction 0.1 --shard-tokens 5000 \
    --no-progress "$@" > "out-$name.txt"
}
prep txt --input in/docs.txt --threads 1
prep jsonl --input in/docs.jsonl --threads 1
prep gz --input in/docs.jsonl.gz --threads 2
prep zst --input in/docs.jsonl.zst --threads 2
prep seven --input 'in/part-*.jsonl' --threads 2
prep dir --input parts --threads 1
prep zst3 --input in/docs.jsonl.zst --threads 3

python3 - <<'PY'
import json, filecmp
base = json.load(open("out/txt/index.json"))
assert base["documents"] == 400, base["documents"]
assert len(base["train"]["shards"]) > 3
def core(i):  # what does not describe the input files
    return {k: v for k, v in i.items() if k not in ("made_by", "report", "source")}
for name in ("jsonl", "gz", "zst", "seven", "dir", "zst3"):
    idx = json.load(open(f"out/{name}/index.json"))
    assert core(idx) == core(base), f"{name}: index.json differs from the text input's"
    for split in ("train", "val"):
        for s in idx[split]["shards"]:
            assert filecmp.cmp(f"out/txt/{s['file']}".replace("txt/", "txt/"), f"out/{name}/{s['file']}", shallow=False), (name, s)
    assert idx["report"]["documents"] == 400 and idx["report"]["tokens"] == base["report"]["tokens"]
files = json.load(open("out/dir/index.json"))["report"]["files"]
assert [f["compression"] for f in files] == ["none", "gzip", "none", "none", "zstd", "none", "none"], files
assert json.load(open("out/zst/index.json"))["report"]["files"][0]["compression"] == "zstd"
print("ok: text, jsonl, gz, zst, 7 files, a directory; threads 1, 2, 3: identical shards and index")
PY

expect_fail() {  # expect_fail SUBSTRING -- command...: fails, says SUBSTRING, leaves no index.json
  local want=$1; shift 2; local out
  rm -rf out/bad
  if out=$("$@" --out out --name bad --no-progress 2>&1); then echo "FAIL: exit 0 for $*"; exit 1; fi
  [[ "$out" == *"$want"* ]] || { echo "FAIL: message lacks '$want': $out"; exit 1; }
  [[ ! -e out/bad/index.json ]] || { echo "FAIL: index.json left after an error: $*"; exit 1; }
  # Nothing partial taken as done: a file refused while read has no part (a finished file's
  # work); an empty file is read to its end, so its (empty) part is kept for --resume.
  if [[ -z ${PART_KEPT:-} ]] && compgen -G "out/bad/.prepare/*.part*" > /dev/null; then
    echo "FAIL: a part left after an error: $(ls out/bad/.prepare)"; exit 1
  fi
  echo "ok: $want"
}
head -c 3000 in/docs.jsonl.gz > in/cut.jsonl.gz
head -c 3000 in/docs.jsonl.zst > in/cut.jsonl.zst
python3 - <<'PY'
good = open("in/docs.jsonl").read().splitlines()
open("in/badline.jsonl", "w").write("\n".join(good[:10] + ['{"text": "unclosed'] + good[10:]) + "\n")
open("in/wrongtype.jsonl", "w").write("\n".join(good[:4] + ['{"text": ["a", "list"]}'] + good[4:]) + "\n")
open("in/nokey.jsonl", "w").write("\n".join(good[:6] + ['{"body": "x"}'] + good[6:]) + "\n")
open("in/nul.txt", "wb").write(b"fine text\n\nbinary\x00junk\n")
open("in/latin1.txt", "wb").write("ok\n\ncaf\u00e9\n".encode("latin-1"))
open("in/empty.txt", "w").write("")
# a 100 MB single line (an unclosed string) between two good ones
with open("in/long.jsonl", "w") as f:
    f.write(good[0] + '\n{"text": "' + "x" * (100 << 20) + '\n' + good[1] + '\n')
PY
mkdir -p in/nothing
# --threads 1 tokenizes on the main thread and more threads on workers of their own: both stop on a damaged stream, a file that cannot be opened as what it claims and a bad record.
cp in/docs.jsonl in/fake.jsonl.gz
for threads in 1 2; do
  expect_fail "cut.jsonl.gz: truncated gzip stream" -- "$ZAYA" data prepare --input in/cut.jsonl.gz --threads $threads
  expect_fail "cut.jsonl.zst: truncated zstd stream" -- "$ZAYA" data prepare --input in/cut.jsonl.zst --threads $threads
  expect_fail "fake.jsonl.gz: named .gz but its content is not gzip" -- "$ZAYA" data prepare --input in/fake.jsonl.gz in/docs.jsonl --threads $threads
  expect_fail "badline.jsonl:11: not a JSON line" -- "$ZAYA" data prepare --input in/badline.jsonl in/docs.jsonl --threads $threads
done
rm in/fake.jsonl.gz
expect_fail "badline.jsonl:11: not a JSON line" -- "$ZAYA" data prepare --input in/badline.jsonl
expect_fail "wrongtype.jsonl:5: field 'text' is an array, expected a string" -- "$ZAYA" data prepare --input in/wrongtype.jsonl
expect_fail "nokey.jsonl:7: no field 'text'" -- "$ZAYA" data prepare --input in/nokey.jsonl
expect_fail "nul.txt:3: not a text file (a NUL byte at offset 17)" -- "$ZAYA" data prepare --input in/nul.txt
expect_fail "latin1.txt:3: invalid UTF-8 at byte offset 7" -- "$ZAYA" data prepare --input in/latin1.txt
PART_KEPT=1 expect_fail "--input: no training documents" -- "$ZAYA" data prepare --input in/empty.txt
# Past the default --max-record-bytes (64 MiB): refused while read; under a higher limit the line
# is read whole and refused as JSON.
expect_fail "long.jsonl:2: a line longer than the limit of 67108864 bytes" -- "$ZAYA" data prepare --input in/long.jsonl
expect_fail "long.jsonl:2: not a JSON line" -- "$ZAYA" data prepare --input in/long.jsonl --max-record-bytes 200000000
rm in/long.jsonl
expect_fail "in/nothing: the directory holds no input file" -- "$ZAYA" data prepare --input in/nothing
expect_fail "the pattern matches no file" -- "$ZAYA" data prepare --input 'in/*.parquet'
expect_fail "docs.jsonl:1: no field 'body'" -- "$ZAYA" data prepare --input in/docs.jsonl --text-key body
expect_fail "docs.txt:1: not a JSON line" -- "$ZAYA" data prepare --input in/docs.txt --format jsonl

# --skip-bad: the bad records are counted by reason; the good ones kept (the truncated file's
# complete lines before the cut included).
prep skip --input in/badline.jsonl in/wrongtype.jsonl in/nokey.jsonl in/cut.jsonl.gz --skip-bad
"$ZAYA" data prepare --out out-t1 --name skip --val-fraction 0.1 --shard-tokens 5000 --no-progress \
  --input in/badline.jsonl in/wrongtype.jsonl in/nokey.jsonl in/cut.jsonl.gz --skip-bad --threads 1 > /dev/null
python3 "$HERE/same_outputs.py" out/skip out-t1/skip
python3 - <<'PY'
import json
r = json.load(open("out/skip/index.json"))["report"]
assert r["skipped"]["bad_json"] == 1 and r["skipped"]["not_string"] == 1, r["skipped"]
assert r["skipped"]["missing_key"] == 1 and r["skipped"]["damaged_stream"] == 1, r["skipped"]
cut = r["files"][3]
assert 0 < cut["documents"] < 400, cut
assert r["files"][0]["documents"] == 400 and r["files"][0]["skipped"] == {"bad_json": 1}
print(f"ok: --skip-bad counted {r['skipped']}; {cut['documents']} documents kept before the cut")
PY
grep -q "skipped 1 record(s): bad_json" out-skip.txt

# --dedup exact and --min-chars: the text and its JSON Lines twin, read twice, keep 400 documents.
prep dedup --input in/docs.txt in/docs.jsonl.zst in/docs.txt --dedup exact --min-chars 60
python3 - <<'PY'
import json
i = json.load(open("out/dedup/index.json"))
short = sum(1 for l in open("in/docs.jsonl") if len(json.loads(l)["text"]) < 60)
assert 0 < short < 100, short
r = i["report"]
assert r["dropped"]["too_short"] == 3 * short, (r["dropped"], short)
assert r["dropped"]["duplicate"] == 2 * (400 - short), r["dropped"]
assert i["documents"] == 400 - short
print(f"ok: --dedup exact dropped {r['dropped']['duplicate']}, --min-chars {r['dropped']['too_short']}")
PY

# --id-key: documents.jsonl lists the kept documents' ids in order with split and token offset.
prep ids --input in/docs.jsonl --id-key meta.id
python3 - <<'PY'
import json
rows = [json.loads(l) for l in open("out/ids/documents.jsonl")]
assert [r["id"] for r in rows] == [f"doc-{i}" for i in range(400)]
idx = json.load(open("out/ids/index.json"))
for split in ("train", "val"):
    mine = [r for r in rows if r["split"] == split]
    assert sum(r["tokens"] for r in mine) == idx[split]["tokens"]
    assert all(a["offset"] + a["tokens"] == b["offset"] for a, b in zip(mine, mine[1:]))
print("ok: --id-key ids, splits and offsets")
PY
# zaya tokenizer train reads the same inputs: one tokenizer from .jsonl, .jsonl.gz and .jsonl.zst.
for f in docs.jsonl docs.jsonl.gz docs.jsonl.zst; do
  "$ZAYA" tokenizer train --input "in/$f" --vocab-size 400 --out "tok-$f.json" 2> /dev/null > /dev/null
done
cmp tok-docs.jsonl.json tok-docs.jsonl.gz.json && cmp tok-docs.jsonl.json tok-docs.jsonl.zst.json
echo "ok: tokenizer train: the same tokenizer from .jsonl, .jsonl.gz and .jsonl.zst"
echo "data.prepare_formats: all passed"
