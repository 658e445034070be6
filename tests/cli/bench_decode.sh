#!/usr/bin/env bash
# zaya bench decode's bound: STREAM triad measured before and after the decodes, the bound at the
# higher of the two (a shared host moves its bandwidth by a third between minutes while the
# decode's steps hold still), and every row's bound and fraction stated against it, in the JSON
# and in the printed lines.
#   tests/cli/bench_decode.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
PY=/usr/bin/python3
rm -rf "$WORK"; mkdir -p "$WORK"
source "$SRC/tests/check.sh"

"$ZAYA" --threads 2 bench decode --config "$SRC/configs/tiny.json" --batch-list 1,3 --prompt 8 \
  --new-tokens 4 --json "$WORK/decode.json" > "$WORK/decode.out" 2>&1 \
  || { echo "bench decode failed:"; cat "$WORK/decode.out"; exit 1; }
cat "$WORK/decode.out"
check "the JSON: both triads, the bound's the higher, each row's bound at it" \
  $PY - "$WORK/decode.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
before, after, bw = j["bandwidth_before_gbs"], j["bandwidth_after_gbs"], j["bandwidth_gbs"]
ok = before > 0 and after > 0 and bw == max(before, after)
ok = ok and [r["batch"] for r in j["rows"]] == [1, 3]
for r in j["rows"]:
    want = r["batch"] / (r["bytes_per_step"] / (bw * 1e9))
    ok = ok and r["bytes_per_step"] > 0 and abs(r["bound_tokens_per_s"] - want) <= 1e-9 * want
sys.exit(0 if ok else 1)
PY
check "the printed lines: both triads and each row's fraction of the bound at the higher" \
  $PY - "$WORK/decode.json" "$WORK/decode.out" <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
m = re.search(r"STREAM triad ([0-9.]+) GB/s before the decodes, ([0-9.]+) after: "
              r"the bound takes ([0-9.]+)\n", text)
ok = m is not None and [float(x) for x in m.groups()] == [
    round(j[k], 1) for k in ("bandwidth_before_gbs", "bandwidth_after_gbs", "bandwidth_gbs")]
for r in j["rows"]:
    pct = round(100 * r["tokens_per_s"] / r["bound_tokens_per_s"])
    line = re.search(rf"batch +{r['batch']}: .* at {j['bandwidth_gbs']:.1f} GB/s, ([0-9]+)% of it",
                     text)
    ok = ok and line is not None and abs(int(line.group(1)) - pct) <= 1
sys.exit(0 if ok else 1)
PY
echo "bench decode: $passes passed, $fails failed"
((fails == 0))
