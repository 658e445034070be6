#!/usr/bin/env bash
# The CUDA compiler launcher of zaya_cuda (CMakeLists.txt): runs the compile it is given (ccache
# first where configured), which prints ptxas's per-kernel resource report (-Xptxas=-v:
# registers, stack frame, spill stores and loads) as the build's output, and keeps that report
# beside the object as <object>.ptxas for ctest cuda.ptxas (tests/gpu/ptxas_budget.sh). ccache
# replays the report on a cache hit, so the kernels are compiled once either way.
obj=
prev=
for arg in "$@"; do
  [[ $prev == -o ]] && obj=$arg
  prev=$arg
done
[[ -n $obj ]] || exec "$@"
"$@" 2>"$obj.ptxas.tmp"
rc=$?
cat "$obj.ptxas.tmp" >&2
if ((rc == 0)); then mv "$obj.ptxas.tmp" "$obj.ptxas"; else rm -f "$obj.ptxas.tmp" "$obj.ptxas"; fi
exit $rc
