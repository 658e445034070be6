#!/usr/bin/env bash
# Issue 12's training proof on a lent GPU: the Brown demo config (configs/small.json) for 100
# steps on the GPU in bf16 must end within 2 % of the CPU's fp32 run; it also prints both runs'
# tokens/s. Run by scripts/gpu_suite.sh from the bundle (scripts/gpu_bundle.sh packs the prepared
# Brown shards and tokenizer as brown-data.tar.gz).
# Usage: brown_demo.sh ZAYA SRC DATA_TAR WORK
# A dry run of the script without a GPU: DEMO_DEVICE=cpu-as-device DEMO_STEPS=3 (the second run
# then computes in fp32 on the CPU's ops, and must match within the same 2 %). DEMO_BATCH=N trains
# N sequences a step without the batch ramp (the rehearsal's cuda-emu: a step of the config's
# 16 to 32 sequences takes minutes on the emulator).
set -uo pipefail
ZAYA=$1; SRC=$2; DATA_TAR=$3; WORK=$4
DEVICE=${DEMO_DEVICE:-cuda}; STEPS=${DEMO_STEPS:-100}
PY=/usr/bin/python3
command -v "$PY" > /dev/null || PY=python3
rm -rf "$WORK"; mkdir -p "$WORK/data"
# Python's tarfile reads it without the gzip tool, which the GPU machine may lack.
$PY -c "import sys, tarfile; tarfile.open(sys.argv[1], 'r:gz').extractall(sys.argv[2])" \
  "$DATA_TAR" "$WORK/data" || exit 1
$PY - "$SRC/configs/small.json" "$WORK" "${DEMO_BATCH:-}" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
work = sys.argv[2]
c["data"]["dir"] = work + "/data"
c["train"]["tokenizer"] = work + "/data/tokenizer.json"
c["train"]["sample_tokens"] = 0
if sys.argv[3]:
    c["train"]["micro_batch"] = c["train"]["global_batch"] = int(sys.argv[3])
    c["train"]["optim"].pop("batch_ramp", None)
json.dump(c, open(work + "/small.json", "w"), indent=1)
PY
source "$SRC/tests/check.sh"
for device in cpu "$DEVICE"; do
  "$ZAYA" train --config "$WORK/small.json" --out "$WORK/$device" --device "$device" \
    --max-steps "$STEPS" --no-progress > "$WORK/$device.log" 2>&1 \
    || { echo "zaya train --device $device failed:"; cat "$WORK/$device.log"; exit 1; }
  grep -E "^device:|^trained" "$WORK/$device.log"
done
check "$STEPS steps: $DEVICE (bf16 on cuda) ends within 2 % of the cpu's fp32 loss" $PY -c "
import json, sys
last = lambda r: [json.loads(l) for l in open(f'$WORK/{r}/metrics.jsonl')][-1]
a, b = last('cpu'), last('$DEVICE')
print('  step %d: cpu fp32 loss %.4f at %.0f tok/s; $DEVICE loss %.4f at %.0f tok/s (%.1fx)' % (
    a['step'], a['loss'], a['tokens_per_s'], b['loss'], b['tokens_per_s'], b['tokens_per_s'] / a['tokens_per_s']))
sys.exit(not (a['step'] == b['step'] == $STEPS and abs(a['loss'] - b['loss']) <= 0.02 * abs(a['loss'])))"
echo "$passes passed, $fails failed"
((fails == 0))
