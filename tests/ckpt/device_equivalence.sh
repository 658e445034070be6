#!/usr/bin/env bash
# --device end to end: `zaya train --device cpu-as-device` takes every step of the path a GPU
# takes (the weights, gradients and optimizer state in the backend's memory for the whole run,
# the arena there, the optimizer's ops there, the host copies refreshed for checkpoints; at 2
# ranks the gradients, the summed shard, the Muon pieces and the gathered weights staged through
# host memory for MPI) with the CPU's ops, so it must give bitwise the losses and final weights
# of --device cpu. And checkpoints do not
# depend on the device: a run checkpointed on one resumes on the other and ends bitwise equal
# to the uninterrupted run. At 1 rank, and at 2 ranks (ZeRO-1) when MPIRUN is given.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-}
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/train/device_run_config.sh"
write_device_run_config "$WORK"
run() { device_run "$@"; }  # run NP LOG args...

for np in 1 2; do
  if ((np > 1)) && [[ -z "$MPIRUN" ]]; then echo "skip 2 ranks: no MPI in this build"; continue; fi
  P="np$np"
  run $np "$WORK/$P-cpu.log" --out "$WORK/$P-cpu" --device cpu || exit 1
  run $np "$WORK/$P-dev.log" --out "$WORK/$P-dev" --device cpu-as-device || exit 1
  check "$np rank(s): the log names the device and says the parameters stay there" \
    grep -q "^device: cpu-as-device.*; weights, gradients and optimizer state stay there" \
    "$WORK/$P-dev.log"
  check "$np rank(s): summary.json names the device" \
    grep -q '"device": "cpu-as-device' "$WORK/$P-dev/summary.json"
  check "$np rank(s): cpu-as-device's 16 steps are bitwise cpu's (losses, norms, loads, val)" \
    same_metrics "$P-cpu" "$P-dev"
  check "$np rank(s): cpu-as-device's final weights are bitwise cpu's" \
    cmp "$WORK/$P-cpu/model/model.safetensors" "$WORK/$P-dev/model/model.safetensors"
  # A checkpoint of one device resumes on the other.
  for pair in "cpu-as-device cpu" "cpu cpu-as-device"; do
    read -r first second <<< "$pair"
    R="$P-$first-then-$second"
    run $np "$WORK/$R-1.log" --out "$WORK/$R" --device "$first" --max-steps 8 || exit 1
    run $np "$WORK/$R-2.log" --out "$WORK/$R" --device "$second" --resume auto || exit 1
    check "$np rank(s): checkpointed on $first at step 8, resumed on $second" \
      grep -q "resumed from $WORK/$R/ckpt/step-00000008" "$WORK/$R-2.log"
    check "$np rank(s): $first then $second ends bitwise as the uninterrupted cpu run" \
      cmp "$WORK/$P-cpu/model/model.safetensors" "$WORK/$R/model/model.safetensors"
  done
done
# And at another world size: a 2-rank checkpoint of one device continues at 1 rank on the other,
# and the reverse. Another world size groups the gradient sums differently, so the steps after
# the checkpoint match the uninterrupted run of the checkpoint's world size within 1e-5, not
# bitwise (as tests/ckpt/dp_equivalence.sh's reshapes).
if [[ -n "$MPIRUN" ]]; then
  for pair in "2 cpu-as-device 1 cpu" "1 cpu 2 cpu-as-device"; do
    read -r np1 first np2 second <<< "$pair"
    R="reshape-np$np1-$first-np$np2-$second"
    run $np1 "$WORK/$R-1.log" --out "$WORK/$R" --device "$first" --max-steps 8 || exit 1
    run $np2 "$WORK/$R-2.log" --out "$WORK/$R" --device "$second" --resume auto || exit 1
    check "$np1 rank(s) on $first to $np2 rank(s) on $second: resumed at step 8" \
      grep -q "(saved by $np1 rank.*, now $np2): step 8" "$WORK/$R-2.log"
    check "$np1 rank(s) on $first to $np2 rank(s) on $second: steps 9..16 match within 1e-5" \
      $PY "$SRC/tests/ckpt/compare_losses.py" "$WORK/np$np1-cpu/metrics.jsonl" \
      "$WORK/$R/metrics.jsonl" 9 1e-5 16
  done
fi
"$ZAYA" train --config "$WORK/train.json" --out "$WORK/bad" --device gpu > "$WORK/bad.log" 2>&1
check "an unknown --device is refused by name" \
  grep -q "'gpu' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu)" "$WORK/bad.log"
check "... before the run directory is made" test ! -e "$WORK/bad"
"$ZAYA" train --config "$WORK/train.json" --out "$WORK/bad16" --device cpu --precision bf16 > "$WORK/bad16.log" 2>&1
check "--precision bf16 on the CPU is refused, saying why" \
  grep -q "precision bf16: the cpu backend computes in fp32 (bf16 GEMM inputs run on GPUs: --device cuda; cpu-as-device stands in for their bf16 weights)" "$WORK/bad16.log"
check "... before the run directory is made" test ! -e "$WORK/bad16"
echo "$passes passed, $fails failed"
((fails == 0))
