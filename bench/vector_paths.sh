#!/usr/bin/env bash
# The portable binary's vector paths against builds for one instruction set (docs/cpu-paths.md):
# `zaya bench step` (and `bench decode` at batch 16) of the portable build on its auto path against
# a -march=native build, and forced to avx2 against a -march=x86-64-v3 build on its own code (its
# avx2 path: auto would take the avx512 path it carries beside it). The runs alternate
# (A B A B ...) so that drift of the machine's speed falls on both; each figure is the median.
# Usage: bench/vector_paths.sh PORTABLE_ZAYA NATIVE_ZAYA V3_ZAYA [CONFIG] [ROUNDS]
#   e.g. bench/vector_paths.sh build/zaya build-native/zaya build-v3/zaya configs/small.json 5
# (cmake --preset native && cmake --build build-native --target zaya;
#  cmake -S . -B build-v3 -G Ninja -DZAYA_MARCH=x86-64-v3 && cmake --build build-v3 --target zaya)
set -euo pipefail
PORTABLE=$1; NATIVE=$2; V3=$3; CONFIG=${4:-configs/small.json}; ROUNDS=${5:-5}
step() {  # step ZAYA [global flags...]: tokens/s of one bench step run
  local zaya=$1; shift
  "$zaya" "$@" bench step --config "$CONFIG" --batch 4 --seq 256 --steps 8 --warmup 1 --json |
    /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["tokens_per_s"])'
}
decode() {  # decode ZAYA [global flags...]: batch-16 decode tokens/s
  local zaya=$1 json; shift
  json=$(mktemp)
  "$zaya" "$@" bench decode --config "$CONFIG" --batch-list 16 --prompt 32 --new-tokens 224 \
    --json "$json" > /dev/null 2>&1
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rows"][0]["tokens_per_s"])' "$json"
  rm -f "$json"
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
"$PORTABLE" info --config "$CONFIG" | grep -E '^  (in this binary|chosen):'
for what in step decode; do
  a=() b=() c=() d=()
  for ((r = 0; r < ROUNDS; ++r)); do
    a+=("$($what "$PORTABLE")") b+=("$($what "$NATIVE")")
    c+=("$($what "$PORTABLE" --vector-path avx2)") d+=("$($what "$V3" --vector-path avx2)")
  done
  # The median of each round's ratio (the machine's speed drifts between rounds, not within one).
  ratio() { paste <(printf '%s\n' "${!1}") <(printf '%s\n' "${!2}") | awk '{print $1 / $2}' | median; }
  pa=$(printf '%s\n' "${a[@]}" | median) na=$(printf '%s\n' "${b[@]}" | median)
  pc=$(printf '%s\n' "${c[@]}" | median) vd=$(printf '%s\n' "${d[@]}" | median)
  echo "bench $what ($CONFIG, $ROUNDS rounds, tokens/s medians; ratio: the median of the rounds' ratios):"
  echo "  portable auto $pa | native $na | ratio $(ratio 'a[@]' 'b[@]')"
  echo "  portable avx2 $pc | x86-64-v3 (avx2) $vd | ratio $(ratio 'c[@]' 'd[@]')"
  echo "  all runs: auto ${a[*]} | native ${b[*]} | avx2 ${c[*]} | v3 ${d[*]}"
done
