#!/usr/bin/env bash
# bf16 activation storage against fp32 storage over a longer run (issue 41's proof): the small
# config's model (configs/small.json) on cpu-as-device with bf16 weights and gradients, STEPS
# steps of 8 sequences of 128 tokens from the Brown slice, once with each storage: every step's
# loss side by side (the largest relative difference and the last losses), the activation bytes
# and the tokens per second of each. Then the bf16 run again at another thread count (bitwise the
# same losses) and stopped halfway and resumed (bitwise the same final weights).
# Usage: bench/bf16_activations.sh [STEPS] [WORK]   (defaults 200, /tmp/zaya-bf16-activations)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
ZAYA=${ZAYA:-$SRC/build/zaya}
STEPS=${1:-200}; WORK=${2:-/tmp/zaya-bf16-activations}
PY=/usr/bin/python3
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 4096 || exit 1
$PY - "$SRC/configs/small.json" "$WORK" "$STEPS" <<'PY'
import json, sys
src, work, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = json.load(open(src))
c["model"]["max_seq_len"] = 128
c["data"] = {"dir": work + "/data", "sources": ["brown"],
             "phases": [{"name": "a", "tokens": steps * 8 * 128, "seq_len": 128,
                         "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]}
t = c["train"]
t.update(micro_batch=4, global_batch=8, eval_every=10**6, log_every=1, sample_tokens=0,
         checkpoint_every=steps // 2, tokenizer=work + "/tokenizer.json")
t["optim"]["warmup_steps"] = 20
t["optim"].pop("batch_ramp", None)  # the whole batch from step 1
json.dump(c, open(work + "/small.json", "w"))
PY
run() {  # run NAME THREADS [flags...]
  local name=$1 threads=$2; shift 2
  "$ZAYA" --threads "$threads" train --config "$WORK/small.json" --out "$WORK/$name" --no-progress \
    --device cpu-as-device --precision bf16 "$@" > "$WORK/$name.log" 2>&1 \
    || { echo "run $name failed:"; tail -20 "$WORK/$name.log"; exit 1; }
}
run fp32 2
run bf16 2 --activation-storage bf16
run bf16-t1 1 --activation-storage bf16
run resume 2 --activation-storage bf16 --max-steps $((STEPS / 2))
run resume 2 --activation-storage bf16 --resume auto
$PY - "$WORK" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def records(name):
    return [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
a, b, t1 = records("fp32"), records("bf16"), records("bf16-t1")
la, lb = [r["loss"] for r in a], [r["loss"] for r in b]
rel = [abs(x - y) / abs(x) for x, y in zip(la, lb)]
worst = max(range(len(rel)), key=rel.__getitem__)
print(f"{len(la)} steps of the small model, 8 x 128 tokens each, cpu-as-device, bf16 weights")
print(f"  last loss: fp32 storage {la[-1]:.6f}, bf16 storage {lb[-1]:.6f} "
      f"({rel[-1] * 100:.3f} % apart)")
print(f"  largest difference: {rel[worst] * 100:.3f} % at step {a[worst]['step']}; "
      f"mean over the steps {statistics.mean(rel) * 100:.3f} %")
act = [json.load(open(f"{work}/{n}/summary.json"))["activation_bytes"] for n in ("fp32", "bf16")]
print(f"  activation bytes: fp32 {act[0]}, bf16 {act[1]} ({act[1] / act[0]:.3f}x)")
tps = [statistics.median(r["tokens_per_s"] for r in x[5:]) for x in (a, b)]
print(f"  tokens/s (median from step 6): fp32 {tps[0]:.0f}, bf16 {tps[1]:.0f} "
      f"({tps[1] / tps[0]:.3f}x)")
print("  bf16 at 1 and 2 threads: " +
      ("bitwise the same losses" if [r["loss"] for r in t1] == lb else "LOSSES DIFFER"))
PY
if cmp -s "$WORK/bf16/model/model.safetensors" "$WORK/resume/model/model.safetensors"; then
  echo "  stopped at step $((STEPS / 2)) and resumed: bitwise the same final weights"
else
  echo "  stopped and resumed: FINAL WEIGHTS DIFFER"
fi
