#!/usr/bin/env bash
# ctest cuda.ptxas: every kernel of src/backend/cuda fits the hardware's registers. ptxas's report
# for sm_90 (-Xptxas=-v, kept beside each object by scripts/nvcc_resources.sh) gives each
# function's stack frame and spill bytes; a kernel passes when all three are within its budget in
# src/backend/cuda/stack_budget.txt (0 unless a line there says otherwise, with the reason). A
# frame means per-thread arrays live in local memory (an array indexed by a runtime variable, or
# registers spilled): every access is a memory access. Prints the table of every kernel.
# Usage: ptxas_budget.sh <object dir> <budget file> <cuda source dir>
set -euo pipefail
objects=$1 budget_file=$2 sources=$3

status=0
reports=()
for src in "$sources"/*.cu; do
  report=$objects/$(basename "$src").o.ptxas
  if [[ ! -f $report ]]; then  # empty for a file without kernels
    echo "FAIL: no ptxas report for $(basename "$src") (expected $report: build zaya_cuda)"
    status=1
    continue
  fi
  if grep -q __global__ "$src" && ! grep -q 'Function properties' "$report"; then
    echo "FAIL: $report lists no kernel of $(basename "$src"): is -Xptxas=-v still in the build?"
    status=1
  fi
  reports+=("$report")
done

((${#reports[@]} > 0)) || exit 1

# Budget lines: <kernel> <bytes> <why>; '#' starts a comment. A kernel is named as declared
# (no namespace, template arguments or parameters).
declare -A budget=() used=()
lineno=0
while IFS= read -r line || [[ -n $line ]]; do
  lineno=$((lineno + 1))
  line=${line%%#*}
  [[ $line =~ ^[[:space:]]*$ ]] && continue
  read -r name bytes why <<<"$line"
  if [[ ! $bytes =~ ^[0-9]+$ || -z ${why:-} ]]; then
    echo "FAIL: $budget_file:$lineno: expected '<kernel> <bytes> <reason>', got: $line"
    status=1
    continue
  fi
  budget[$name]=$bytes
done <"$budget_file"

# One line per function: mangled name, registers, frame, spill stores, spill loads.
table=$(awk '
  /Function properties for/ { name = $NF; getline
    frame[name] = $1; st[name] = $5; ld[name] = $9; order[++n] = name; next }
  /Compiling entry function/ { entry = $7; gsub(/\047/, "", entry); next }
  /Used [0-9]+ registers/ { for (i = 1; i <= NF; ++i) if ($i == "Used") regs[entry] = $(i + 1) }
  END { for (i = 1; i <= n; ++i) { f = order[i]
    print f, (f in regs ? regs[f] : "-"), frame[f], st[f], ld[f] } }' "${reports[@]}")

printf '%-44s %5s %6s %6s %6s %6s\n' kernel regs frame spillS spillL budget
while read -r mangled regs frame st ld; do
  full=$(c++filt -p "$mangled")  # without the parameters
  full=${full#void }              # and the return type of a kernel
  full=${full//(anonymous namespace)/anon}
  base=${full%%<*}                # without the template arguments
  shown=${full#"${base%::*}::"}   # name<template arguments>
  base=${base##*::}               # name
  allowed=${budget[$base]:-0}
  [[ -n ${budget[$base]:-} ]] && used[$base]=1
  verdict=ok
  if ((frame > allowed || st > allowed || ld > allowed)); then
    verdict="FAIL: over the budget of $allowed bytes"
    status=1
  fi
  printf '%-44s %5s %6s %6s %6s %6s %s\n' "${shown:0:44}" "$regs" "$frame" "$st" "$ld" "$allowed" \
    "$verdict"
done <<<"$table"

for name in "${!budget[@]}"; do
  if [[ -z ${used[$name]:-} ]]; then
    echo "FAIL: $budget_file names '$name', which no compiled kernel is: remove the line"
    status=1
  fi
done
exit $status
