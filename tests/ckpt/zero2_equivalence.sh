#!/usr/bin/env bash
# ZeRO-2 (train.zero_stage 2: the gradients sharded, each backward's moved to their owner ranks
# as it runs and their memory given back) against ZeRO-1, a tiny ZAYA1 with Muon on the Brown
# slice (matrices split across ranges, so the Muon exchange runs). Checks:
#  - bitwise: with one micro-batch per rank per step, 16 steps at 2 and at 3 ranks give ZeRO-1's
#    losses, norms, loads and final weights bit for bit, on the CPU and on cpu-as-device with bf16
#    weights and gradients (the gradients read through the bf16 storage);
#  - several micro-batches per rank: each backward reduced on its own, the sums added in
#    micro-batch order, within 1e-5 of ZeRO-1 (which adds a rank's micro-batches first);
#  - resume across the stages: a ZeRO-1 checkpoint at step 8 continued with ZeRO-2 gives the
#    uninterrupted ZeRO-1 run's steps 9..16 bitwise, and a ZeRO-2 checkpoint continued with
#    ZeRO-1 too; a 2-rank ZeRO-2 checkpoint continues at 3 ranks (reshape);
#  - the log says which stage ran (and at one rank that there is nothing to shard).
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3; MPIRUN=$4
PY=/usr/bin/python3
source "$SRC/tests/check.sh"
source "$SRC/tests/train/device_run_config.sh"
bash "$SRC/tests/train/prepare_brown_slice.sh" "$ZAYA" "$SRC" "$WORK" 300 || exit 1
write_device_run_config "$WORK"
# variant NAME GLOBAL_BATCH ZERO_STAGE: WORK/NAME.json, train.json with those two fields (and
# the tokens of 16 steps).
variant() {
  $PY -c "
import json, sys
c = json.load(open('$WORK/train.json'))
c['train']['global_batch'] = int(sys.argv[2]); c['train']['zero_stage'] = int(sys.argv[3])
c['data']['phases'][0]['tokens'] = 16 * 32 * int(sys.argv[2])  # 16 steps of 32-token sequences
json.dump(c, open('$WORK/' + sys.argv[1] + '.json', 'w'))" "$@"
}
run() {  # run NP NAME CONFIG args...
  local np=$1 name=$2 cfg=$3; shift 3
  rm -rf "$WORK/$name"
  "$MPIRUN" -np "$np" --oversubscribe --allow-run-as-root "$ZAYA" --threads 1 train \
    --config "$WORK/$cfg.json" --no-progress --out "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { echo "zaya train $name failed:"; cat "$WORK/$name.log"; return 1; }
}
same_weights() { cmp "$WORK/$1/model/model.safetensors" "$WORK/$2/model/model.safetensors"; }
# resumed_like A B: B's records equal A's but the timing and the routers' health window (which a
# resumed run starts again).
resumed_like() {
  $PY -c "
import json, sys
skip = ('tokens_per_s', 'mfu', 'time_s', 'memory', 'routers')
strip = lambda r: {k: v for k, v in r.items() if k not in skip}
a, b = [[strip(json.loads(l)) for l in open('$WORK/' + r + '/metrics.jsonl')] for r in sys.argv[1:3]]
sys.exit(not (len(a) == len(b) == 16 and a == b))" "$1" "$2"
}

for np in 2 3; do
  variant "z1-np$np" $((2 * np)) 1
  variant "z2-np$np" $((2 * np)) 2
  run $np "z1-np$np" "z1-np$np" || exit 1
  run $np "z2-np$np" "z2-np$np" || exit 1
  check "$np ranks: the log says ZeRO-2 ran, gradients sharded" \
    grep -q "^ZeRO-2: .*gradients sharded" "$WORK/z2-np$np.log"
  check "$np ranks, one micro-batch per rank: ZeRO-2's 16 steps are bitwise ZeRO-1's" \
    same_metrics "z1-np$np" "z2-np$np"
  check "$np ranks: ZeRO-2's final weights are bitwise ZeRO-1's" same_weights "z1-np$np" "z2-np$np"
done

# One rank: nothing to shard, and the log says so.
"$ZAYA" --threads 1 train --config "$WORK/z2-np2.json" --no-progress --out "$WORK/z2-np1" \
  --max-steps 2 > "$WORK/z2-np1.log" 2>&1 || { cat "$WORK/z2-np1.log"; exit 1; }
check "one rank: ZeRO-2 says there is nothing to shard" \
  grep -q "^ZeRO-2: one rank, nothing to shard" "$WORK/z2-np1.log"

# bf16 weights and gradients on cpu-as-device (the Muon gradients read through the bf16 storage).
run 2 bf16-z1 z1-np2 --device cpu-as-device --precision bf16 || exit 1
run 2 bf16-z2 z2-np2 --device cpu-as-device --precision bf16 || exit 1
check "cpu-as-device, bf16 weights and gradients: ZeRO-2 is bitwise ZeRO-1" \
  bash -c "$(declare -f same_metrics); WORK='$WORK'; same_metrics bf16-z1 bf16-z2 && cmp '$WORK/bf16-z1/model/model.safetensors' '$WORK/bf16-z2/model/model.safetensors'"

# Three micro-batches per rank.
variant z1-micro 12 1
variant z2-micro 12 2
run 2 z1-micro z1-micro || exit 1
run 2 z2-micro z2-micro || exit 1
check "three micro-batches per rank: ZeRO-2 within 1e-5 of ZeRO-1 (sums grouped per micro-batch)" \
  $PY -c "
import json, sys
a, b = [[json.loads(l)['loss'] for l in open('$WORK/' + r + '/metrics.jsonl')] for r in ('z1-micro', 'z2-micro')]
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print('  largest relative loss difference %.2e' % worst)
sys.exit(not (len(a) == len(b) == 16 and worst <= 1e-5))"

# Resume across the stages at 2 ranks: stopped at step 8, continued with the other stage.
for pair in "z1-np2 z2-np2" "z2-np2 z1-np2"; do
  set -- $pair
  run 2 "half-$1" "$1" --max-steps 8 || exit 1
  rm -rf "$WORK/cont-$1-$2"; cp -r "$WORK/half-$1" "$WORK/cont-$1-$2"
  "$MPIRUN" -np 2 --oversubscribe --allow-run-as-root "$ZAYA" --threads 1 train \
    --config "$WORK/$2.json" --no-progress --out "$WORK/cont-$1-$2" --resume auto \
    > "$WORK/cont-$1-$2.log" 2>&1 || { cat "$WORK/cont-$1-$2.log"; exit 1; }
  check "a $1 checkpoint at step 8 continued as $2: the uninterrupted run's steps, bitwise" \
    resumed_like z1-np2 "cont-$1-$2"
  check "... and its final weights" same_weights z1-np2 "cont-$1-$2"
done
# Reshape: the 2-rank ZeRO-2 checkpoint at step 8 continued at 3 ranks (global batch 12, two
# micro-batches per rank) against the uninterrupted 2-rank run of the same global batch.
run 2 reshape-half z2-micro --max-steps 8 || exit 1
rm -rf "$WORK/reshape-np3"; cp -r "$WORK/reshape-half" "$WORK/reshape-np3"
"$MPIRUN" -np 3 --oversubscribe --allow-run-as-root "$ZAYA" --threads 1 train \
  --config "$WORK/z2-micro.json" --no-progress --out "$WORK/reshape-np3" --resume auto \
  > "$WORK/reshape-np3.log" 2>&1 || { cat "$WORK/reshape-np3.log"; exit 1; }
check "reshape 2 -> 3 ranks under ZeRO-2: resumed from the 2-rank checkpoint at step 8" \
  grep -q "(saved by 2 ranks, now 3): step 8" "$WORK/reshape-np3.log"
check "reshape 2 -> 3 ranks: steps 9..16 within 1e-5 of the uninterrupted 2-rank run" \
  $PY "$SRC/tests/ckpt/compare_losses.py" "$WORK/z2-micro/metrics.jsonl" \
  "$WORK/reshape-np3/metrics.jsonl" 9 1e-5 16
echo "zero2_equivalence: $passes passed, $fails failed"
exit $((fails > 0))
