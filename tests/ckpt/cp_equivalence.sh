#!/usr/bin/env bash
# Context parallelism in CI: a tiny ZAYA1 on 400 KB of the Brown corpus, 3 Muon steps of four
# 30-token sequences (30 does not divide into 4 or 6 chunks: unequal chunks), then a context
# extension (ZAYA1's recipe in small): a step of two 60-token sequences at another RoPE base. At
# 1 rank, at context parallel 2 and 3, and on a data 2 x context 2 grid of 4 ranks. Checks:
#  - equivalence: every step's loss and the validation loss match 1 rank within TOL relative
#    (ring attention merges blocks and sums gradient shares in another order: not bitwise);
#  - reshape: a checkpoint of the 2 x 2 grid at step 2 continues at context parallel 2 alone and
#    at 1 rank, and steps 3..4 match the uninterrupted run within TOL;
#  - determinism: the context-parallel run again, and with train.recompute, gives bitwise the
#    same losses;
#  - errors: a context parallel that does not divide the ranks, and sequences too short for it.
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=${4:-mpirun}
TOL=1e-5
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
source "$SRC/tests/ckpt/train_runs.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
seq_len=30
cat > "$WORK/cp.json" <<JSON
{
  "model": {"vocab_size": 300, "hidden_size": 32, "num_stages": 4, "num_q_heads": 2,
            "num_kv_heads": 1, "head_dim": 8, "num_experts": 4, "expert_hidden": 32,
            "router_dim": 8, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "max_seq_len": 64},
  "data": {"dir": "$WORK/data", "sources": ["brown"],
           "phases": [{"name": "a", "tokens": $((12 * seq_len)), "seq_len": $seq_len, "rope_theta": 10000.0, "mixture": {"brown": 1.0}},
                      {"name": "long", "tokens": $((4 * seq_len)), "seq_len": $((2 * seq_len)), "global_batch": 2, "rope_theta": 100000.0, "mixture": {"brown": 1.0}}]},
  "train": {"seed": 5, "micro_batch": 1, "global_batch": 4, "eval_every": 2, "eval_windows": 4,
            "log_every": 1, "sample_tokens": 0, "checkpoint_every": 2, "keep_last": 5,
            "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 1, "schedule": "cosine",
                      "router_bias_lr": 1e-2, "muon": true}}
}
JSON
# compare A B FROM: the losses of steps >= FROM and the validation losses, within TOL.
compare() {
  $PY "$SRC/tests/ckpt/compare_losses.py" "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" "$3" \
    "$TOL" 4
}
losses() { $PY -c "import json,sys; print([r['loss'] for r in map(json.loads, open(sys.argv[1]))])" "$1"; }

run 1 "$WORK/np1.log" --config "$WORK/cp.json" --out "$WORK/np1" || exit 1
run 2 "$WORK/cp2.log" --config "$WORK/cp.json" --out "$WORK/cp2" --context-parallel 2 || exit 1
check "2 ranks are a grid of data 1 x context 2" grep -q "2 ranks (data 1 x context 2)" "$WORK/cp2.log"
check "the last step is the long phase's: two sequences of 60 tokens" $PY -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(not (r[2]['seq_len'] == 30 and r[2]['batch_sequences'] == 4 and
              r[3]['seq_len'] == 60 and r[3]['batch_sequences'] == 2))" "$WORK/cp2/metrics.jsonl"
check "context parallel 2: 4 Muon steps match 1 rank within $TOL" compare np1 cp2 1
run 3 "$WORK/cp3.log" --config "$WORK/cp.json" --out "$WORK/cp3" --context-parallel 3 || exit 1
check "context parallel 3: 4 Muon steps match 1 rank within $TOL" compare np1 cp3 1
run 4 "$WORK/grid.log" --config "$WORK/cp.json" --out "$WORK/grid" --context-parallel 2 || exit 1
check "4 ranks are a grid of data 2 x context 2" grep -q "4 ranks (data 2 x context 2)" "$WORK/grid.log"
check "data 2 x context 2: 4 Muon steps match 1 rank within $TOL" compare np1 grid 1
run 2 "$WORK/cp2b.log" --config "$WORK/cp.json" --out "$WORK/cp2b" --context-parallel 2 || exit 1
check "context parallel 2 twice: bitwise the same losses" \
  test "$(losses "$WORK/cp2/metrics.jsonl")" == "$(losses "$WORK/cp2b/metrics.jsonl")"
sed 's/"seed": 5,/"seed": 5, "recompute": true,/' "$WORK/cp.json" > "$WORK/cp-recompute.json"
run 2 "$WORK/cp2r.log" --config "$WORK/cp-recompute.json" --out "$WORK/cp2r" \
  --context-parallel 2 || exit 1
check "context parallel 2 with train.recompute: bitwise the same losses as without" \
  test "$(losses "$WORK/cp2/metrics.jsonl")" == "$(losses "$WORK/cp2r/metrics.jsonl")"

# Reshape: the 2 x 2 grid's checkpoint at step 2 continues at context parallel 2 and at 1 rank.
rm -rf "$WORK/half"; cp -r "$WORK/grid" "$WORK/half"
rm -rf "$WORK/half/ckpt/step-00000004" "$WORK/half/summary.json"
$PY - "$WORK/half/metrics.jsonl" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] <= 2]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
for to in "2 2" "1 1"; do
  set -- $to
  rm -rf "$WORK/reshape-$1"; cp -r "$WORK/half" "$WORK/reshape-$1"
  run "$1" "$WORK/reshape-$1.log" --config "$WORK/cp.json" --out "$WORK/reshape-$1" \
    --context-parallel "$2" --resume auto || exit 1
  check "reshape (data 2 x context 2) -> $1 rank(s) at context parallel $2: resumed at step 2" \
    grep -q "(saved by 4 ranks, now $1): step 2" "$WORK/reshape-$1.log"
  check "reshape -> $1 rank(s): steps 3..4 match the uninterrupted run within $TOL" \
    compare grid "reshape-$1" 3
done

# zaya eval: the grid run's final checkpoint on the validation windows, at 1 rank and at context
# parallel 2, gives the validation loss the run logged; and the summary has every rank's memory.
want=$($PY -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]['val_loss'])" \
  "$WORK/grid/metrics.jsonl")
"$ZAYA" --threads 1 eval --model "$WORK/grid/ckpt" --config "$WORK/cp.json" --windows 4 \
  --micro-batch 1 > "$WORK/eval1.json" 2> "$WORK/eval1.log"
"$MPIRUN" -np 2 --oversubscribe --allow-run-as-root "$ZAYA" --threads 1 eval \
  --model "$WORK/grid/ckpt" --config "$WORK/cp.json" --windows 4 --micro-batch 1 \
  --context-parallel 2 > "$WORK/eval2.json" 2> "$WORK/eval2.log"
for n in 1 2; do
  check "zaya eval ($n rank(s)) gives the run's final validation loss within $TOL" $PY -c "
import json, sys
got = json.load(open(sys.argv[1]))['val_loss']; want = float(sys.argv[2])
print(f'  eval {got!r}, run {want!r}'); sys.exit(abs(got - want) > float(sys.argv[3]) * abs(want))" \
    "$WORK/eval$n.json" "$want" "$TOL"
done
check "summary.json gives the peak memory of each of the 4 ranks" $PY -c "
import json, sys
r = json.load(open(sys.argv[1]))['peak_rss_bytes_per_rank']
sys.exit(not (len(r) == 4 and all(x > 1 << 20 for x in r)))" "$WORK/grid/summary.json"

# Errors name the flag and what was expected, before anything is written.
out=$("$MPIRUN" -np 2 --oversubscribe --allow-run-as-root "$ZAYA" --threads 1 train --no-progress \
  --config "$WORK/cp.json" --out "$WORK/bad1" --context-parallel 3 2>&1)
check "context parallel 3 on 2 ranks is refused" \
  bash -c "grep -q 'context parallel 3 .* must divide the 2 ranks' <<< \"\$1\"" _ "$out"
out=$("$ZAYA" --threads 1 train --no-progress --config "$WORK/cp.json" --out "$WORK/bad2" \
  --context-parallel 8 2>&1)
check "context parallel 8 on 1 rank is refused" bash -c "grep -q 'must divide the 1 ranks' <<< \"\$1\"" _ "$out"
check "nothing was written by the refused runs" test ! -e "$WORK/bad1" -a ! -e "$WORK/bad2"
echo "cp_equivalence: $passes passed, $fails failed"
exit $((fails > 0))
