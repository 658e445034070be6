#!/usr/bin/env bash
# `zaya bench decode` on each CPU vector path of one binary, side by side (docs/cpu-paths.md):
# each round runs every path in turn (the machine's speed drifts between rounds, not within one);
# per path, the median over the rounds of tokens/s and of the fraction of the memory bound the
# same run measured, at each batch size; and the median of the rounds' ratios to the first path.
# Usage: bench/decode_paths.sh [CONFIG] [ROUNDS] [THREADS] [BATCHES]
#   e.g. PATHS="avx512 avx2" bench/decode_paths.sh configs/small.json 5 2 1,16
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=${1:-$ROOT/configs/small.json}
ROUNDS=${2:-5}
THREADS=${3:-$(nproc)}
BATCHES=${4:-1,16}
ZAYA=${ZAYA:-$ROOT/build/zaya}
read -r -a PATHS <<< "${PATHS:-avx512 avx2 baseline}"
[[ -x $ZAYA ]] || { echo "build zaya first: cmake --preset default && cmake --build build" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$ZAYA" info --config "$CONFIG" | grep -E '^  (in this binary|chosen):'
for ((r = 0; r < ROUNDS; ++r)); do
  for p in "${PATHS[@]}"; do
    "$ZAYA" --threads "$THREADS" --vector-path "$p" bench decode --config "$CONFIG" \
      --batch-list "$BATCHES" --json "$WORK/$p-$r.json" > /dev/null
  done
done
/usr/bin/python3 - "$WORK" "$ROUNDS" "$CONFIG" "$THREADS" "${PATHS[@]}" <<'PY'
import json, statistics, sys
work, rounds, config, threads, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
runs = {p: [json.load(open(f"{work}/{p}-{r}.json"))["rows"] for r in range(rounds)] for p in paths}
print(f"bench decode, {config}, {threads} threads, {rounds} rounds (medians; the bound: the same run's")
print("STREAM triad over the bytes a step reads)")
for i, row in enumerate(runs[paths[0]][0]):
    print(f"batch {row['batch']}:")
    for p in paths:
        rate = [runs[p][r][i]["tokens_per_s"] for r in range(rounds)]
        bound = [runs[p][r][i]["tokens_per_s"] / runs[p][r][i]["bound_tokens_per_s"] for r in range(rounds)]
        ratio = [runs[p][r][i]["tokens_per_s"] / runs[paths[0]][r][i]["tokens_per_s"] for r in range(rounds)]
        print(f"  {p:9s} {statistics.median(rate):9.1f} tokens/s  {100 * statistics.median(bound):5.1f} % of the bound"
              f"  {statistics.median(ratio):5.2f}x {paths[0]}'s   (runs: {', '.join('%.0f' % x for x in rate)})")
PY
