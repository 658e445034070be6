# Sourced by the --device tests (ckpt/device_equivalence.sh, gpu/gpu_train.sh): writes
# WORK/train.json, a tiny ZAYA1 on the Brown slice of prepare_brown_slice.sh, 16 Muon steps of
# four 32-token sequences in two micro-batches (so gradients accumulate), a checkpoint every 4;
# and device_run and same_metrics, for running it and comparing two runs.
write_device_run_config() {  # write_device_run_config WORK
  cat > "$1/train.json" <<JSON
{
  "model": {"vocab_size": 300, "hidden_size": 32, "num_stages": 4, "num_q_heads": 2,
            "num_kv_heads": 1, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 32},
  "data": {"dir": "$1/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": 2048, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 13, "micro_batch": 2, "global_batch": 4, "eval_every": 4, "eval_windows": 4,
            "log_every": 1, "sample_tokens": 0, "checkpoint_every": 4, "keep_last": 3,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 2, "schedule": "cosine",
                      "router_bias_lr": 1e-2, "muon": true}}
}
JSON
}

# device_run NP LOG args...: `zaya train` on WORK/train.json at NP ranks (MPIRUN launches more
# than one), its output in LOG, printed when it fails.
device_run() {
  local np=$1 log=$2; shift 2
  local launch=()
  if ((np > 1)); then launch=("$MPIRUN" -np "$np" --oversubscribe --allow-run-as-root); fi
  "${launch[@]}" "$ZAYA" --threads 1 train --config "$WORK/train.json" --no-progress "$@" > "$log" 2>&1 \
    || { echo "zaya train $* failed:"; cat "$log"; return 1; }
}

# same_metrics A B: the runs WORK/A and WORK/B have 16 steps whose records are equal but the
# timing (losses, val losses, norms, loads).
same_metrics() {
  /usr/bin/python3 -c "
import json, sys
strip = lambda r: {k: v for k, v in r.items() if k not in ('tokens_per_s', 'mfu', 'time_s', 'memory')}
a, b = [[strip(json.loads(l)) for l in open(f'$WORK/{r}/metrics.jsonl')] for r in sys.argv[1:3]]
sys.exit(not (len(a) == len(b) == 16 and a == b))" "$1" "$2"
}
