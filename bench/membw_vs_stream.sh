#!/usr/bin/env bash
# `zaya bench membw` against McCalpin's STREAM (stream.c, from https://www.cs.virginia.edu/stream/
# or github.com/jeffhammond/STREAM; not part of zaya), built here with the same array size, the
# same runs and OpenMP, run in the same session at each thread count. Prints both best rates and
# zaya/STREAM per kernel. STREAM is built at its best (-O3 -march=native) with gcc's loop-to-memcpy
# conversion off, so that its copy is a loop like its other three kernels and like zaya's (as a
# memcpy call it ran 20 % slower here).
# Usage: bench/membw_vs_stream.sh ZAYA STREAM_C [ELEMENTS]
set -euo pipefail
ZAYA=$1; STREAM_C=$2; N=${3:-$((1 << 25))}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -O3 -march=native -fno-tree-loop-distribute-patterns -fopenmp -mcmodel=medium -DSTREAM_ARRAY_SIZE="$N" -DNTIMES=10 -o "$WORK/stream" "$STREAM_C"
threads=(1)
for ((t = 2; t < $(nproc); t *= 2)); do threads+=("$t"); done
(($(nproc) > 1)) && threads+=("$(nproc)")
list=$(IFS=,; echo "${threads[*]}")
"$ZAYA" bench membw --elements "$N" --times 10 --threads-list "$list" --json "$WORK/zaya.json"
printf '\n%8s %-7s %12s %12s %7s\n' threads kernel "zaya GB/s" "STREAM GB/s" ratio
for t in "${threads[@]}"; do
  OMP_NUM_THREADS=$t "$WORK/stream" > "$WORK/stream.$t"
  /usr/bin/python3 - "$WORK" "$t" <<'PY'
import json, sys
work, t = sys.argv[1], int(sys.argv[2])
z = next(r for r in json.load(open(f"{work}/zaya.json"))["rows"] if r["threads"] == t)
for line in open(f"{work}/stream.{t}"):
    parts = line.split()
    if parts and parts[0].rstrip(":").lower() in ("copy", "scale", "add", "triad"):
        k = parts[0].rstrip(":").lower()
        s = float(parts[1]) / 1000  # STREAM prints its best rate in MB/s (1e6 bytes)
        print("%8d %-7s %12.2f %12.2f %7.3f" % (t, k, z[k], s, z[k] / s))
PY
done
