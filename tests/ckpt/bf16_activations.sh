#!/usr/bin/env bash
# bf16 activation storage end to end (--activation-storage bf16, model/stored_activations.h) on
# cpu-as-device, which stands in for a GPU's memory, with bf16 weights and gradients:
#  - the log says so; the losses move (the storage is live) and the last stays within 2 % of
#    fp32 storage's, the bf16 criterion of tests/ckpt/bf16_storage_equivalence.sh; step 1's loss
#    is fp32 storage's (the forward computes in fp32);
#  - bitwise repeatable, at another thread count too, and a checkpoint resumes bitwise;
#  - with selective recompute within 2 % too and in fewer activation bytes; under full recompute
#    (each stage's residual stream stored in bf16) within 2 % of fp32 storage's full recompute, in
#    fewer bytes;
#  - at 2 ranks with ZeRO-2 (when MPIRUN is given): resumes bitwise;
#  - refused on the CPU backend (the fp32 oracle), before the run directory is made.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-}
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/train/device_run_config.sh"
write_device_run_config "$WORK"
run() { device_run "$@" --device cpu-as-device --precision bf16; }  # run NP LOG args...
# config NAME EDIT: WORK/NAME.json, train.json with the python edit of its train section t
config() {
  $PY -c "
import json
c = json.load(open('$WORK/train.json'))
t = c['train']
$2
json.dump(c, open('$WORK/$1.json', 'w'))"
}
# within NAME REFERENCE: the runs differ and the last losses are within 2 %; step 1's is equal.
within() {
  $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open(f'$WORK/{r}/metrics.jsonl')] for r in ('$2', '$1')]
print('  step 1: %r and %r; last: %.6f (fp32 storage) and %.6f (bf16)' % (a[0], b[0], a[-1], b[-1]))
sys.exit(not (len(b) == 16 and a != b and a[0] == b[0] and abs(a[-1] - b[-1]) <= 0.02 * abs(a[-1])))"
}
act_bytes() {  # act_bytes RUN: summary.json's activation bytes
  $PY -c "import json; print(json.load(open('$WORK/$1/summary.json'))['activation_bytes'])"
}

run 1 "$WORK/fp32.log" --out "$WORK/fp32" || exit 1
run 1 "$WORK/act16.log" --out "$WORK/act16" --activation-storage bf16 || exit 1
check "the log says the activations are stored in bf16" \
  grep -q "^device: cpu-as-device.*; activations stored in bf16 (computed in fp32)" "$WORK/act16.log"
check "... and says nothing of it with fp32 storage" \
  bash -c "! grep -q 'activations stored in bf16' '$WORK/fp32.log'"
check "bf16 activations: other losses, step 1's the same, the last within 2 % of fp32's" \
  within act16 fp32
check "bf16 activations take fewer activation bytes (summary.json)" \
  test "$(act_bytes act16)" -lt "$(act_bytes fp32)"
"$ZAYA" --threads 2 train --config "$WORK/train.json" --no-progress --device cpu-as-device \
  --precision bf16 --activation-storage bf16 --out "$WORK/act16-t2" > "$WORK/act16-t2.log" 2>&1 \
  || { echo "2-thread run failed:"; cat "$WORK/act16-t2.log"; }
check "bitwise repeatable at 2 threads: the losses" $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open(f'$WORK/{r}/metrics.jsonl')] for r in ('act16', 'act16-t2')]
sys.exit(not (len(a) == 16 and a == b))"
check "bitwise repeatable at 2 threads: the final weights" \
  cmp "$WORK/act16/model/model.safetensors" "$WORK/act16-t2/model/model.safetensors"
run 1 "$WORK/resume-1.log" --out "$WORK/resume" --activation-storage bf16 --max-steps 8 || exit 1
run 1 "$WORK/resume-2.log" --out "$WORK/resume" --activation-storage bf16 --resume auto || exit 1
check "resumed at step 8, bitwise the uninterrupted run" \
  cmp "$WORK/act16/model/model.safetensors" "$WORK/resume/model/model.safetensors"
for mode in selective full; do
  config "recompute-$mode" "t['recompute'] = '$mode'"
  "$ZAYA" --threads 1 train --config "$WORK/recompute-$mode.json" --no-progress \
    --device cpu-as-device --precision bf16 --activation-storage bf16 --out "$WORK/act16-$mode" \
    > "$WORK/act16-$mode.log" 2>&1 || { echo "recompute $mode failed:"; cat "$WORK/act16-$mode.log"; }
done
check "with selective recompute: the last loss within 2 % of fp32 storage's" within act16-selective fp32
check "... in fewer activation bytes than without recompute" \
  test "$(act_bytes act16-selective)" -lt "$(act_bytes act16)"
"$ZAYA" --threads 1 train --config "$WORK/recompute-full.json" --no-progress \
  --device cpu-as-device --precision bf16 --out "$WORK/fp32-full" > "$WORK/fp32-full.log" 2>&1 \
  || { echo "fp32 full recompute failed:"; cat "$WORK/fp32-full.log"; }
check "under full recompute (the residual streams stored): within 2 % of fp32 storage's" \
  within act16-full fp32-full
check "... in fewer activation bytes than fp32 storage's" \
  test "$(act_bytes act16-full)" -lt "$(act_bytes fp32-full)"
if [[ -n "$MPIRUN" ]]; then
  config zero2 "t['zero_stage'] = 2"
  cp "$WORK/train.json" "$WORK/train-zero1.json"
  cp "$WORK/zero2.json" "$WORK/train.json"  # device_run reads WORK/train.json
  run 2 "$WORK/z2.log" --out "$WORK/z2" --activation-storage bf16 || exit 1
  run 2 "$WORK/z2-resume-1.log" --out "$WORK/z2-resume" --activation-storage bf16 --max-steps 8 || exit 1
  run 2 "$WORK/z2-resume-2.log" --out "$WORK/z2-resume" --activation-storage bf16 --resume auto || exit 1
  cp "$WORK/train-zero1.json" "$WORK/train.json"
  check "2 ranks, ZeRO-2, bf16 activations: the last loss within 2 % of 1 rank's fp32 storage" \
    within z2 fp32
  check "2 ranks, ZeRO-2, bf16 activations: resumed at step 8, bitwise the uninterrupted run" \
    cmp "$WORK/z2/model/model.safetensors" "$WORK/z2-resume/model/model.safetensors"
else
  echo "skip 2 ranks: no MPI in this build"
fi
"$ZAYA" train --config "$WORK/train.json" --out "$WORK/bad" --device cpu \
  --activation-storage bf16 > "$WORK/bad.log" 2>&1
check "--activation-storage bf16 on the CPU backend is refused, saying why" \
  grep -q "activation-storage bf16 is for a device's memory (cuda, or cpu-as-device standing in for one); the cpu backend keeps its activations in fp32" "$WORK/bad.log"
check "... before the run directory is made" test ! -e "$WORK/bad"
echo "$passes passed, $fails failed"
((fails == 0))
