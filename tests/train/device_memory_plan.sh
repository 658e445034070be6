#!/usr/bin/env bash
# The memory plan against the memory a run takes (issue 41): on cpu-as-device, which counts every
# byte it allocates as a GPU's allocator would, three configs (the tiny model, a wider one, the
# small demo model at a short length) × recompute none, selective and full × 1 and 2 ranks
# (ZeRO-1) and 2 ranks (ZeRO-2), bf16 activations, bf16 weights and the LM head in blocks: each run's peak device memory
# (summary.json, device_peak_bytes_per_rank, every rank) within 10 % of its plan
# (device_plan_bytes: the plan `zaya info` and `zaya train --device-memory` count,
# train/train_memory.h). The peak is the
# whole run's: the weights, gradients, optimizer state and Muon matrices, ZeRO-1's buffers and the
# step arenas, reserved at the plan's size before step 1 (--peak-tflops skips the start-up's
# measuring product, which would take memory the plan does not count). Every step is
# checkpointed: a checkpoint's snapshot is taken in host memory, never on the device.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIEXEC=${4:-}
PY=/usr/bin/python3
rm -rf "$WORK"; mkdir -p "$WORK"
source "$SRC/tests/check.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
# config NAME MODEL_CONFIG SEQ MICRO_BATCH RECOMPUTE [python edits of the model m] [ZERO_STAGE]
config() {
  $PY - "$SRC/configs/$2" "$WORK" "$1" "$3" "$4" "$5" "${6:-}" "${7:-1}" <<'PY'
import json, sys
src, work, name, seq, mb, recompute, edit, zero = sys.argv[1:9]
m = json.load(open(src))["model"]
m.update(vocab_size=300, max_seq_len=int(seq))
exec(edit)
c = {"model": m,
     "data": {"dir": work + "/data", "sources": ["brown"],
              "phases": [{"name": "a", "tokens": 10**6, "seq_len": int(seq), "rope_theta": 10000.0,
                          "mixture": {"brown": 1.0}}]},
     "train": {"seed": 5, "micro_batch": int(mb), "global_batch": 2 * int(mb), "max_steps": 2,
               "eval_every": 1000, "log_every": 1, "sample_tokens": 0, "checkpoint_every": 1,
               "recompute": recompute, "zero_stage": int(zero),
               "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 1, "schedule": "cosine"}}}
json.dump(c, open(f"{work}/{name}.json", "w"))
PY
}
# within NAME: every rank's peak within 10 % of the plan.
within() {
  $PY - "$WORK/$1/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
plan, peaks = s["device_plan_bytes"], s["device_peak_bytes_per_rank"]
ratios = [p / plan for p in peaks]
print(f"  plan {plan} bytes, peak per rank {peaks}: {', '.join(f'{r:.3f}' for r in ratios)}")
sys.exit(not (plan > 0 and peaks and all(0.9 <= r <= 1.1 for r in ratios)))
PY
}
run() {  # run NAME RANKS [train flags...]
  local name=$1 np=$2; shift 2
  local launch=()
  ((np > 1)) && launch=("$MPIEXEC" -np "$np" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS)
  OMP_NUM_THREADS=1 "${launch[@]}" "$ZAYA" train --config "$WORK/$name.json" --out "$WORK/$name-$np" \
    --device cpu-as-device --peak-tflops 1 --no-progress "$@" > "$WORK/$name-$np.log" 2>&1 \
    || { echo "run $name at $np rank(s) failed:"; cat "$WORK/$name-$np.log"; return 1; }
}
ranks=(1)
[[ -n $MPIEXEC ]] && ranks=(1 2)
for rc in none selective full; do
  config "tiny-$rc" tiny.json 32 8 "$rc"
  config "wide-$rc" tiny.json 64 3 "$rc" 'm.update(hidden_size=96, expert_hidden=40, head_dim=12, num_stages=4)'
  config "small-$rc" small.json 64 2 "$rc"
  for name in "tiny-$rc" "wide-$rc" "small-$rc"; do
    for np in "${ranks[@]}"; do
      run "$name" "$np" && check "$name at $np rank(s): peak device memory within 10 % of the plan" within "$name-$np"
    done
  done
done
# ZeRO-2 at 2 ranks: the gradients given back as they move (in 2 MiB granules, as a GPU's virtual
# memory maps them): the same configs, and the small model's peak below ZeRO-1's.
if [[ -n $MPIEXEC ]]; then
  for rc in none selective full; do
    config "tiny-$rc-z2" tiny.json 32 8 "$rc" "" 2
    config "wide-$rc-z2" tiny.json 64 3 "$rc" 'm.update(hidden_size=96, expert_hidden=40, head_dim=12, num_stages=4)' 2
    config "small-$rc-z2" small.json 64 2 "$rc" "" 2
    for name in "tiny-$rc-z2" "wide-$rc-z2" "small-$rc-z2"; do
      run "$name" 2 && check "$name (ZeRO-2) at 2 ranks: peak device memory within 10 % of the plan" \
        within "$name-2"
    done
    check "small, recompute $rc: ZeRO-2's peak at most 0.95x ZeRO-1's" \
      $PY - "$WORK/small-$rc-2/summary.json" "$WORK/small-$rc-z2-2/summary.json" <<'PY'
import json, sys
one, two = [max(json.load(open(f))["device_peak_bytes_per_rank"]) for f in sys.argv[1:3]]
print(f"  peak per rank: ZeRO-1 {one} bytes, ZeRO-2 {two} bytes ({two / one:.3f}x)")
sys.exit(not two < 0.95 * one)
PY
  done
  cp "$WORK/small-selective-z2.json" "$WORK/small-selective-z2-bf16.json"
  run small-selective-z2-bf16 2 --precision bf16 \
    && check "small, ZeRO-2 with bf16 weights and gradients at 2 ranks: within 10 % of the plan" \
      within small-selective-z2-bf16-2
fi
# bf16 activation storage (--activation-storage bf16, model/stored_activations.h): the same
# configs at 1 and 2 ranks, and at 2 ranks with ZeRO-2; under none and selective recompute the small
# model's peak is below fp32 storage's (under full recompute nothing is stored in bf16).
for rc in none selective full; do
  for name in "tiny-$rc" "wide-$rc" "small-$rc"; do
    cp "$WORK/$name.json" "$WORK/$name-act16.json"
    for np in "${ranks[@]}"; do
      run "$name-act16" "$np" --activation-storage bf16 \
        && check "$name with bf16 activations at $np rank(s): peak device memory within 10 % of the plan" \
          within "$name-act16-$np"
    done
  done
  [[ $rc == full ]] && continue
  check "small, recompute $rc: bf16 activations' peak below fp32's" \
    $PY - "$WORK/small-$rc-1/summary.json" "$WORK/small-$rc-act16-1/summary.json" <<'PY'
import json, sys
fp32, bf16 = [max(json.load(open(f))["device_peak_bytes_per_rank"]) for f in sys.argv[1:3]]
print(f"  peak: fp32 activations {fp32} bytes, bf16 {bf16} bytes ({bf16 / fp32:.3f}x)")
sys.exit(not bf16 < fp32)
PY
done
if [[ -n $MPIEXEC ]]; then
  for name in tiny-selective-z2 wide-none-z2 small-selective-z2; do
    cp "$WORK/$name.json" "$WORK/$name-act16.json"
    run "$name-act16" 2 --activation-storage bf16 --precision bf16 \
      && check "$name, bf16 activations, weights and gradients at 2 ranks: within 10 % of the plan" \
        within "$name-act16-2"
  done
fi
for name in tiny-none small-selective; do
  cp "$WORK/$name.json" "$WORK/$name-bf16.json"
  run "$name-bf16" 1 --precision bf16 \
    && check "$name with bf16 weights and gradients: within 10 % of the plan" within "$name-bf16-1"
done
# The LM head and loss in blocks (train.lm_head_chunk_*): one block of logits, not all of them.
$PY -c "
import json
c = json.load(open('$WORK/small-none.json'))
c['train'].update(lm_head_chunk_tokens=32, lm_head_chunk_vocab=100)
json.dump(c, open('$WORK/small-chunks.json', 'w'))"
run small-chunks 1 \
  && check "small with the LM head in blocks: within 10 % of the plan" within small-chunks-1
[[ -n $MPIEXEC ]] || echo "no mpirun in this build: the 2-rank runs are not run"
echo "device memory plan: $passes passed, $fails failed"
((fails == 0))
