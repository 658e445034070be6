#!/usr/bin/env bash
# NCCL between two ranks on two GPUs: `zaya bench comm --device cuda -c 1` checks the values of
# every collective at every size (rank-order sums are exact for its fill values), then the same
# against NCCL's own reductions (--peer) for the cost of the rank-order promise.
# Usage: gpu_nccl.sh ZAYA MPIRUN. Exits 77 (skipped) without MPI or two usable GPUs.
set -uo pipefail
ZAYA=$1; MPIRUN=${2:-}
[[ -n $MPIRUN ]] || { echo "SKIPPED: built without MPI"; exit 77; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
((gpus >= 2)) || { echo "SKIPPED: gpu.nccl needs 2 GPUs, this machine has ${gpus:-0}"; exit 77; }
"$MPIRUN" -np 2 --allow-run-as-root --oversubscribe "$ZAYA" bench comm --device cuda -b 8 -e 64M \
  -c 1 --peer
