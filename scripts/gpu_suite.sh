#!/usr/bin/env bash
# The GPU suite on a lent GPU machine (docs/gpu.md), from the bundle of scripts/gpu_bundle.sh, in
# parts that each fit the device tool's 10 minutes per command:
#   tests   the op and model tests against the CPU (gpu.ops), then `zaya train --device cuda`
#           against the CPU (gpu.train)
#   demo    the Brown demo config for 100 steps in bf16 against the CPU in fp32
#   bench   the training-step benchmarks against PyTorch (bench/gpu_step_vs_pytorch.sh):
#           ZAYA1-base's widths at depth 8, then the Brown demo model
#   all     the three in order (the default)
# Usage: bash scripts/gpu_suite.sh [PART] [gtest arguments for gpu.ops...]
# Prints each part's result; exits non-zero if any failed or was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${1:-all}
(($#)) && shift
case $PART in tests | demo | bench | all) ;; *)
  echo "gpu_suite.sh: unknown part '$PART' (tests, demo, bench or all)" >&2; exit 2 ;;
esac
ROOT=$PWD
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
rc=0
if [[ $PART == tests || $PART == all ]]; then
  echo "== gpu.ops"
  .gpu-bundle/bin/zaya_gpu_tests "$@"; r=$?; echo "gpu.ops exit $r"; ((r == 0)) || rc=1
  echo "== gpu.train"
  export ZAYA_BROWN_TEXT=$PWD/.gpu-bundle/brown.txt
  bash tests/gpu/gpu_train.sh "$PWD/.gpu-bundle/bin/zaya" "$PWD" "${TMPDIR:-/tmp}/zaya-gpu-train"
  r=$?; echo "gpu.train exit $r"; ((r == 0)) || rc=1
fi
if [[ $PART == demo || $PART == all ]]; then
  echo "== brown demo (configs/small.json, 100 steps, cuda bf16 against cpu fp32)"
  if [[ -f .gpu-bundle/brown-data.tar.xz ]]; then
    bash tests/gpu/brown_demo.sh "$PWD/.gpu-bundle/bin/zaya" "$PWD" \
      "$PWD/.gpu-bundle/brown-data.tar.xz" "${TMPDIR:-/tmp}/zaya-brown-demo"
    r=$?; echo "brown demo exit $r"; ((r == 0)) || rc=1
  else
    echo "skipped: no brown-data.tar.xz in the bundle"; rc=1
  fi
fi
if [[ $PART == bench || $PART == all ]]; then
  echo "== benchmark: configs/zaya1-base-depth8.json, batch 4 x 4096"
  bash bench/gpu_step_vs_pytorch.sh configs/zaya1-base-depth8.json 4 4096 10 || rc=1
  echo "== benchmark: configs/small.json (the Brown demo model), batch 16 x 256"
  bash bench/gpu_step_vs_pytorch.sh configs/small.json 16 256 20 || rc=1
fi
exit $rc
