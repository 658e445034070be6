#!/usr/bin/env bash
# Checkpoints in CI: a tiny ZAYA1 on 400 KB of the Brown corpus, 20 steps, a checkpoint every 5.
# Run A goes straight through; run B stops at step 10 and resumes with --resume auto: its final
# model.safetensors must be byte-identical to A's. Then the newest checkpoint of B's first half is
# damaged three ways (truncated shard, flipped byte, missing COMPLETE): each is detected and named,
# moved aside for inspection, --resume auto falls back to step 5, and the run still ends bitwise
# equal to A.
# With NP > 1 every zaya train runs as NP data-parallel ranks under MPIRUN (ZeRO-1, one file per
# rank), and the damage hits the last rank's file.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; NP=${4:-1}; MPIRUN=${5:-mpirun}
LAUNCH=()
if ((NP > 1)); then LAUNCH=("$MPIRUN" -np "$NP" --oversubscribe --allow-run-as-root); fi
RANKS="$NP rank$( ((NP > 1)) && echo s)"
# The same 20-step schedule at any NP dividing 4: every rank takes whole micro-batches of the
# ramp's first batch of 4 sequences.
MICRO=$((4 / NP))
LAST=$(printf 'rank-%05d.safetensors' $((NP - 1)))
source "$SRC/tests/check.sh"
run() {  # run LOG args...: zaya train, keeping the log; a failure is printed
  local log=$1; shift
  "${LAUNCH[@]}" "$ZAYA" --threads 1 train --config "$WORK/train.json" --no-progress "$@" > "$log" 2>&1 \
    || { echo "zaya train $* failed:"; cat "$log"; return 1; }
}
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
# 20 steps: 8 sequences of 32 tokens at full batch, a ramp from 4, two phases.
cat > "$WORK/train.json" <<JSON
{
  "model": {"vocab_size": 300, "hidden_size": 32, "num_stages": 4, "num_q_heads": 2,
            "num_kv_heads": 1, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 32},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": 3072, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}},
                      {"name": "b", "tokens": 896, "seq_len": 16, "rope_theta": 20000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 11, "micro_batch": $MICRO, "global_batch": 8, "eval_every": 7, "eval_windows": 4,
            "log_every": 5, "out_dir": "$WORK/A", "sample_tokens": 0,
            "checkpoint_every": 5, "keep_last": 2, "keep_every": 10,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "schedule": "cosine",
                      "router_bias_lr": 1e-2, "batch_ramp": {"start_sequences": 4, "ramp_steps": 4}}}
}
JSON
run "$WORK/A.log" || exit 1
steps=$(grep -c . "$WORK/A/metrics.jsonl")
check "run A: 20 steps ($steps)" test "$steps" = 20
check "retention keep_last 2, keep_every 10: step 10, 15, 20 remain" \
  test "$(cd "$WORK/A/ckpt" && echo step-*)" = "step-00000010 step-00000015 step-00000020"
check "zaya ckpt inspect: complete, verified" bash -c \
  "'$ZAYA' ckpt inspect '$WORK/A/ckpt/step-00000020' > '$WORK/inspect.log' && grep -q 'step 20, world size $NP' '$WORK/inspect.log'"

# Run B: stop at 10, resume to the end.
run "$WORK/B1.log" --out "$WORK/B" --max-steps 10 || exit 1
cp -r "$WORK/B" "$WORK/B_at10"
run "$WORK/B2.log" --out "$WORK/B" --resume auto || exit 1
check "run B resumed from step 10" grep -q "resumed from $WORK/B/ckpt/step-00000010 (saved by $RANKS, now $NP): step 10" "$WORK/B2.log"
check "resumed final model is bitwise equal to the uninterrupted one" \
  cmp "$WORK/A/model/model.safetensors" "$WORK/B/model/model.safetensors"
# B's first half also evaluated at its last step (10), so val_loss is compared where both have it.
check "resumed metrics equal apart from tokens_per_s (and B's extra evaluation at step 10)" /usr/bin/python3 -c "
import json, sys
strip = lambda r: {k: v for k, v in r.items() if k not in ('tokens_per_s', 'val_loss', 'mfu', 'time_s', 'memory', 'routers')}
a, b = [[json.loads(l) for l in open(f'$WORK/{r}/metrics.jsonl')] for r in ('A', 'B')]
same = [strip(x) == strip(y) and x.get('val_loss', y.get('val_loss')) == y.get('val_loss', x.get('val_loss'))
        for x, y in zip(a, b)]
sys.exit(not (len(a) == len(b) == 20 and all(same)))"

# --init-from: a fresh run that starts from A's final weights begins where A ended, not at the
# random init's loss; a model of another shape is refused naming the difference.
run "$WORK/C.log" --out "$WORK/C" --max-steps 1 --init-from "$WORK/A/model" || exit 1
check "init-from: the run says where its weights came from" grep -q "init from $WORK/A/model (hf)" "$WORK/C.log"
check "init-from: step 1 loss is A's late loss, not its first" /usr/bin/python3 -c "
import json, sys
a = [json.loads(l) for l in open('$WORK/A/metrics.jsonl')]
c = json.loads(open('$WORK/C/metrics.jsonl').readline())
print('  A step 1 %.3f, A step 20 %.3f, C step 1 %.3f' % (a[0]['loss'], a[-1]['loss'], c['loss']))
sys.exit(not abs(c['loss'] - a[-1]['loss']) < 0.5 * abs(a[0]['loss'] - a[-1]['loss']))"
sed 's/"expert_hidden": 32/"expert_hidden": 48/' "$WORK/train.json" > "$WORK/wide.json"
"${LAUNCH[@]}" "$ZAYA" --threads 1 train --config "$WORK/wide.json" --out "$WORK/W" --max-steps 1 \
  --no-progress --init-from "$WORK/A/model" > "$WORK/W.log" 2>&1
check "init-from: a model of another shape is refused, naming the field" \
  grep -q "init-from $WORK/A/model: the weights' model config differs from the run's 'model' section in expert_hidden (run 48, weights 32)" "$WORK/W.log"

# Damage the newest checkpoint (step 10) of B's first half three ways.
damage() {  # damage NAME "what to do in the copy" "expected message"
  local name=$1 act=$2 expect=$3 d=$WORK/D_$1
  rm -rf "$d"; cp -r "$WORK/B_at10" "$d"
  (cd "$d/ckpt/step-00000010" && eval "$act")
  "$ZAYA" ckpt inspect "$d/ckpt/step-00000010" > "$d.inspect.log" 2>&1
  check "$name: ckpt inspect fails and says '$expect'" bash -c \
    "grep -q INVALID '$d.inspect.log' && grep -qF '$expect' '$d.inspect.log'"
  run "$d.log" --out "$d" --resume auto || { fails=$((fails + 1)); return; }
  check "$name: --resume auto names it and skips it" bash -c \
    "grep -F 'checkpoint $d/ckpt/step-00000010: ' '$d.log' | grep -F '$expect' | grep -q ', skipped$'"
  check "$name: falls back to step 5" grep -q "resumed from $d/ckpt/step-00000005 (saved by $RANKS, now $NP): step 5" "$d.log"
  check "$name: final model still bitwise equal to run A" \
    cmp "$WORK/A/model/model.safetensors" "$d/model/model.safetensors"
  check "$name: the damaged step 10 was moved aside, and the log says so" bash -c \
    "ls -d '$d/ckpt/step-00000010.damaged-'* > /dev/null && grep -q 'damaged checkpoint $d/ckpt/step-00000010 moved aside to $d/ckpt/step-00000010.damaged-' '$d.log'"
  # ckpt inspect of the root lists the damaged one too (INVALID, so its exit status is 1).
  check "$name: step 10 was saved anew; every kept checkpoint verifies" bash -c \
    "'$ZAYA' ckpt inspect '$d/ckpt' > '$d.inspect2.log'; test \$(grep -c 'checksums verified' '$d.inspect2.log') = 3 && test \$(grep -c ': INVALID' '$d.inspect2.log') = 1"
}
damage truncated 'truncate -s -64 $LAST' "truncated or overwritten file"
damage flipped "printf '\\x5a' | dd of=$LAST bs=1 seek=5000 conv=notrunc status=none" \
  "checksum"
damage no_marker 'rm COMPLETE' "missing COMPLETE marker (incomplete write)"
check "flipped byte: the message names $LAST" \
  grep -q "$LAST checksum 0x" "$WORK/D_flipped.log"

echo "ckpt_test: $passes passed, $fails failed"
exit $((fails > 0))
