#!/usr/bin/env bash
# The GPU suite on a lent GPU machine (docs/gpu.md), from the bundle of scripts/gpu_bundle.sh:
# the op and model tests against the CPU (gpu.ops), `zaya train --device cuda` against the CPU
# (gpu.train), then the Brown demo config for 100 steps in bf16 against the CPU in fp32. Prints
# each part's result; exits non-zero if any failed or was skipped.
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
echo "== brown demo (configs/small.json, 100 steps, cuda bf16 against cpu fp32)"
if [[ -f .gpu-bundle/brown-data.tar.xz ]]; then
  bash tests/gpu/brown_demo.sh "$PWD/.gpu-bundle/bin/zaya" "$PWD" "$PWD/.gpu-bundle/brown-data.tar.xz" \
    "${TMPDIR:-/tmp}/zaya-brown-demo"
  r=$?; echo "brown demo exit $r"; ((r == 0)) || rc=1
else
  echo "skipped: no brown-data.tar.xz in the bundle"; rc=1
fi
exit $rc
