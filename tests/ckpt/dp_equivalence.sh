#!/usr/bin/env bash
# Data parallelism with ZeRO-1 in CI: a tiny ZAYA1 on 400 KB of the Brown corpus, 20 steps of a
# 12-sequence global batch (micro-batches of 2), at 1, 2 and 3 ranks under mpirun, once with
# AdamW for every tensor and once with Muon for the matrices (whose shards split matrices, so
# the Muon boundary exchange runs). Checks:
#  - equivalence: every step's loss at 2 and 3 ranks matches 1 rank within TOL relative (sums
#    are in rank order, so a world size is bitwise reproducible, but 1, 2 and 3 ranks add the
#    micro-batch gradients in different groupings); the largest difference is printed;
#  - overlap: the reduce-scatter in small buckets overlapping the backward, and not overlapping,
#    gives bitwise the losses of the default at 3 ranks;
#  - reshape: a 2-rank checkpoint at step 10 continues at 1 and at 3 ranks, and steps 11..20
#    match the uninterrupted 2-rank run within TOL; the final val loss is printed.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-mpirun}
TOL=1e-5
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
source "$SRC/tests/ckpt/train_runs.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
config() {  # config NAME MUON
  cat > "$WORK/$1.json" <<JSON
{
  "model": {"vocab_size": 300, "hidden_size": 32, "num_stages": 4, "num_q_heads": 2,
            "num_kv_heads": 1, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 32},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": 7680, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 5, "micro_batch": 2, "global_batch": 12, "eval_every": 10, "eval_windows": 6,
            "log_every": 5, "sample_tokens": 0, "checkpoint_every": 10, "keep_last": 5,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "schedule": "cosine",
                      "router_bias_lr": 1e-2, "muon": $2}}
}
JSON
}
# compare A B FROM: the losses of steps >= FROM and the validation losses, within TOL.
compare() {
  $PY "$SRC/tests/ckpt/compare_losses.py" "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$3" \
    "$TOL" 20
}
for opt in adamw muon; do
  muon=false; [[ $opt == muon ]] && muon=true
  config "$opt" "$muon"
  for np in 1 2 3; do
    run "$np" "$WORK/$opt-np$np.log" --config "$WORK/$opt.json" --out "$WORK/$opt-np$np" || exit 1
  done
  for np in 2 3; do
    check "$opt: 20 steps at $np ranks match 1 rank within $TOL" compare "$opt-np1" "$opt-np$np" 1
  done
done
check "muon at 3 ranks: split (and rebalanced) matrices go through the Muon exchange" \
  bash -c "grep -q 'KiB in the Muon exchange' '$WORK/muon-np3.log' && ! grep -q 'and 0.0 KiB in the Muon' '$WORK/muon-np3.log'"

# The reduce-scatter overlapping the backward (on by default): in buckets of 999 floats, most of
# which start while the backward still runs, and switched off, the losses are bitwise those of
# the default (one bucket); sums are per element in rank order, whatever the buckets.
losses() { $PY -c "import json,sys; print([(r['loss'], r.get('val_loss')) for r in map(json.loads, open(sys.argv[1]))])" "$1"; }
sed 's/"seed": 5,/"seed": 5, "zero1_bucket_floats": 999,/' "$WORK/muon.json" > "$WORK/buckets.json"
sed 's/"seed": 5,/"seed": 5, "overlap_reduce": false,/' "$WORK/buckets.json" > "$WORK/no-overlap.json"
for name in buckets no-overlap; do
  run 3 "$WORK/$name.log" --config "$WORK/$name.json" --out "$WORK/$name" || exit 1
  check "muon at 3 ranks, $name: bitwise the default's losses" \
    test "$(losses "$WORK/muon-np3/metrics.jsonl")" == "$(losses "$WORK/$name/metrics.jsonl")"
done
check "the 999-float buckets are many, overlapping the backward" \
  grep -Eq '\(([2-9][0-9]|[0-9]{3,}) buckets, the reduce-scatter overlapping the backward\)' \
  "$WORK/buckets.log"
check "with overlap_reduce false the log says so" \
  grep -q 'buckets, the reduce-scatter after the backward)' "$WORK/no-overlap.log"

# Reshape: stop the 2-rank Muon run at step 10, continue at 1 and at 3 ranks.
run 2 "$WORK/half.log" --config "$WORK/muon.json" --out "$WORK/half" --max-steps 10 || exit 1
for np in 1 3; do
  rm -rf "$WORK/reshape-np$np"; cp -r "$WORK/half" "$WORK/reshape-np$np"
  run "$np" "$WORK/reshape-np$np.log" --config "$WORK/muon.json" --out "$WORK/reshape-np$np" \
    --resume auto || exit 1
  check "reshape 2 -> $np ranks: resumed from the 2-rank checkpoint at step 10" \
    grep -q "(saved by 2 ranks, now $np): step 10" "$WORK/reshape-np$np.log"
  check "reshape 2 -> $np ranks: steps 11..20 match the uninterrupted 2-rank run within $TOL" \
    compare muon-np2 "reshape-np$np" 11
done
echo "dp_equivalence: $passes passed, $fails failed"
exit $((fails > 0))
