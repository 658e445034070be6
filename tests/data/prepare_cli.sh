#!/usr/bin/env bash
# `zaya data prepare` end to end with the byte tokenizer: the shards' tokens, split at eos (256),
# are exactly the input documents; the val split holds about the requested share; bad flags fail
# with a message naming the flag.
set -euo pipefail
ZAYA=$1; WORK=$2
rm -rf "$WORK"; mkdir -p "$WORK"

python3 - "$WORK/in.txt" <<'PY'
import sys
docs = [f"Document {d}. " + " ".join(f"word{(d * 13 + w) % 50}" for w in range(3 + d % 17))
        for d in range(300)]
open(sys.argv[1], "w").write("\n\n".join(docs) + "\n")
PY
"$ZAYA" data prepare --input "$WORK/in.txt" --out "$WORK/out" --name tiny --val-fraction 0.2 \
  --shard-tokens 4096 --doc-separator '\n\n' --no-progress | tee "$WORK/summary.txt"
grep -q "prepared tiny: 300 documents" "$WORK/summary.txt"

python3 - "$WORK/in.txt" "$WORK/out/tiny" <<'PY'
import json, struct, sys
text, src = sys.argv[1], sys.argv[2]
index = json.load(open(f"{src}/index.json"))
def decode(split):
    data = []
    for shard in index[split]["shards"]:
        raw = open(f"{src}/{shard['file']}", "rb").read()
        magic, version, dtype, count, vocab, checksum = struct.unpack_from("<8sIIQQQ", raw)
        assert magic == b"ZAYATOK1" and version == 1 and dtype == 2 and vocab == 257, shard
        assert len(raw) == 64 + 2 * count, shard
        h = 0xcbf29ce484222325
        for b in raw[64:]:
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        assert h == checksum, f"{shard['file']}: FNV-1a 64 mismatch"
        data += struct.unpack_from(f"<{count}H", raw, 64)
    assert not data or data[-1] == 256, f"{split} does not end with eos"
    docs, cur = [], []
    for t in data:
        if t == 256: docs.append(bytes(cur).decode()); cur = []
        else: cur.append(t)
    return docs
train, val = decode("train"), decode("val")
want = [d.strip() for d in open(text).read().split("\n\n") if d.strip()]
assert sorted(train + val) == sorted(want), "documents differ from the input"
assert len(index["train"]["shards"]) > 1
share = len(val) / len(want)
assert 0.12 < share < 0.28, f"val share {share}"
print(f"ok: {len(train)} train + {len(val)} val documents decode back to the input (val {share:.2f})")
PY

expect_fail() {  # expect_fail SUBSTRING -- command...
  local want=$1; shift 2; local out
  if out=$("$@" 2>&1); then echo "FAIL: exit 0 for $*"; exit 1; fi
  [[ "$out" == *"$want"* ]] || { echo "FAIL: message lacks '$want': $out"; exit 1; }
  echo "ok: $want"
}
expect_fail "--tokenizer 'x.json'" -- "$ZAYA" data prepare --input "$WORK/in.txt" --out "$WORK/o" --name t --tokenizer x.json
expect_fail "--val-fraction" -- "$ZAYA" data prepare --input "$WORK/in.txt" --out "$WORK/o" --name t --val-fraction 2
expect_fail "--input" -- "$ZAYA" data prepare --input "$WORK/missing.txt" --out "$WORK/o" --name t
echo "data.prepare_cli: all passed"
