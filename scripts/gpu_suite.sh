#!/usr/bin/env bash
# The GPU suite on a lent GPU machine (docs/gpu.md), from the bundle of scripts/gpu_bundle.sh:
# the op and model tests against the CPU (gpu.ops), then `zaya train --device cuda` against the
# CPU (gpu.train). Prints each part's result; exits non-zero if either failed or was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
rc=0
echo "== gpu.ops"
.gpu-bundle/bin/zaya_gpu_tests "$@"; r=$?; echo "gpu.ops exit $r"; ((r == 0)) || rc=1
echo "== gpu.train"
export ZAYA_BROWN_TEXT=$PWD/.gpu-bundle/brown.txt
bash tests/gpu/gpu_train.sh "$PWD/.gpu-bundle/bin/zaya" "$PWD" "${TMPDIR:-/tmp}/zaya-gpu-train"
r=$?; echo "gpu.train exit $r"; ((r == 0)) || rc=1
exit $rc
