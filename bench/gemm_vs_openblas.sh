#!/usr/bin/env bash
# `zaya bench gemm` against OpenBLAS called directly (bench/gemm_peer.c, built here with cc and
# OpenBLAS's own threading), same shapes, same run, same timing rule. The two alternate for ROUNDS
# rounds (default 3) and each keeps its best rate per shape, so a slow minute on a shared machine
# does not land on one side only. Prints both throughputs and zaya/peer per shape, and the
# geometric mean.
# Usage: bench/gemm_vs_openblas.sh ZAYA [SHAPES] [MIN_TIME]   (SHAPES as for --shapes; default sweep)
set -euo pipefail
ZAYA=$1; SHAPES=${2:-sweep}; MIN_TIME=${3:-0.3}; ROUNDS=${ROUNDS:-3}
SRC=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -std=c11 -o "$WORK/gemm_peer" "$SRC/gemm_peer.c" \
  -I/usr/include/x86_64-linux-gnu/openblas-openmp \
  -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -fopenmp
"$ZAYA" bench gemm --shapes "$SHAPES" --min-time "$MIN_TIME" --json "$WORK/zaya1.json" > "$WORK/zaya.txt"
head -2 "$WORK/zaya.txt"
# The peer computes with the kernels zaya chose.
kernels=$(/usr/bin/python3 -c "import json; print(json.load(open('$WORK/zaya1.json'))['blas_kernels'])")
export OPENBLAS_CORETYPE=$kernels
shapes=$(/usr/bin/python3 -c "
import json
for r in json.load(open('$WORK/zaya1.json'))['results']:
    print('%d,%d,%d,%d,%d' % (r['m'], r['n'], r['k'], r['trans_a'], r['trans_b']))")
# shellcheck disable=SC2086
"$WORK/gemm_peer" "$MIN_TIME" $shapes > "$WORK/peer1.txt" 2> "$WORK/peer_kernels.txt"
for ((round = 2; round <= ROUNDS; round++)); do
  "$ZAYA" bench gemm --shapes "$SHAPES" --min-time "$MIN_TIME" --json "$WORK/zaya$round.json" > /dev/null
  # shellcheck disable=SC2086
  "$WORK/gemm_peer" "$MIN_TIME" $shapes > "$WORK/peer$round.txt"
done
/usr/bin/python3 - "$WORK" "$ROUNDS" <<'PY'
import json, math, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{work}/zaya{i}.json"))["results"] for i in range(1, rounds + 1)]
z = runs[0]
for i, r in enumerate(z):
    r["gflops"] = max(run[i]["gflops"] for run in runs)
peers = [[float(l.split()[5]) for l in open(f"{work}/peer{i}.txt")] for i in range(1, rounds + 1)]
p = [max(col) for col in zip(*peers)]
zj = json.load(open(f"{work}/zaya1.json"))
peer_kernels = open(f"{work}/peer_kernels.txt").read().strip()
print("peer: OpenBLAS cblas_sgemm, its own threading (%d threads); best of %d alternating rounds each"
      % (zj["threads"], rounds))
print("BLAS kernels: zaya %s, peer %s%s" % (zj["blas_kernels"], peer_kernels,
      "" if peer_kernels == zj["blas_kernels"] else "  WARNING: different kernels"))
print("%-20s %6s %6s %6s %3s %11s %11s %7s" % ("product", "M", "N", "K", "op", "zaya GF/s", "peer GF/s", "ratio"))
logs = []
for r, g in zip(z, p):
    op = ("T" if r["trans_a"] else "N") + ("T" if r["trans_b"] else "N")
    ratio = r["gflops"] / g
    logs.append(math.log(ratio))
    print("%-20s %6d %6d %6d %3s %11.1f %11.1f %7.3f" % (r["name"][:20], r["m"], r["n"], r["k"], op, r["gflops"], g, ratio))
print("geometric mean zaya/peer: %.3f over %d shapes; worst %.3f, best %.3f" % (
    math.exp(sum(logs) / len(logs)), len(logs), math.exp(min(logs)), math.exp(max(logs))))
PY
