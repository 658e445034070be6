#!/usr/bin/env bash
# Fixture of the Aegis end-to-end tests: a tiny ZAYA1 on 400 KB of the Brown corpus (20 steps of
# about 50 ms on one thread, a checkpoint every 5) and its uninterrupted reference run WORK/A.
# Usage: setup.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; SCENARIO=setup
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
source "$SRC/tests/aegis/lib.sh"
# The model of configs/tiny.json over the slice's 300-token vocabulary; steps long enough (global
# batch 128) that the checkpoint of step 5, written in the background, is on disk before the drills
# at step 7 strike.
/usr/bin/python3 - "$SRC/configs/tiny.json" "$WORK" > "$WORK/train.json" <<'PY' || exit 1
import json, sys
model = json.load(open(sys.argv[1]))["model"]
model.update(vocab_size=300, max_seq_len=32)
work = sys.argv[2]
print(json.dumps({
    "model": model,
    "data": {"dir": work + "/data", "sources": ["brown"],
             "phases": [{"name": "a", "tokens": 131072, "seq_len": 32, "rope_theta": 10000.0,
                         "mixture": {"brown": 1.0}}]},
    "train": {"seed": 5, "micro_batch": 32, "global_batch": 128, "max_steps": 20,
              "eval_every": 10, "eval_windows": 4, "log_every": 5, "sample_tokens": 0,
              "checkpoint_every": 5, "keep_last": 10, "keep_every": 0,
              "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "schedule": "cosine",
                        "router_bias_lr": 1e-2}}}, indent=1))
PY
launch_command "$WORK/A"
"${LAUNCH[@]}" > "$WORK/A.log" 2>&1 || { echo "reference run failed:"; cat "$WORK/A.log"; exit 1; }
check "reference run: 20 steps" test "$(grep -c . "$WORK/A/metrics.jsonl")" = 20
finish
