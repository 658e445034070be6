#!/usr/bin/env bash
# The device registry through the command line (docs/backends.md): `zaya info --devices` lists
# every registered device with whether it is usable here and what it can do, and a --device name
# that is not registered is refused with the same listing by every command that takes --device.
set -uo pipefail
ZAYA=$1; SRC=$2
source "$SRC/tests/check.sh"
TINY="$SRC/configs/tiny.json"
# cuda's plugin named at a path that does not exist: unusable here, with that reason, on any
# machine.
export ZAYA_CUDA_BACKEND=/nonexistent/libzaya_cuda_backend.so
out=$("$ZAYA" info --devices 2>&1); rc=$?
check "info --devices exits 0" test "$rc" -eq 0
for line in "  cpu           usable here" "  cpu-as-device usable here" "  cuda-emu      usable here" \
    "  cuda          not usable here: the backend plugin /nonexistent/libzaya_cuda_backend.so is missing" \
    "  auto          a choice: cpu here" \
    "own memory, bf16 (the default), host collectives (MPI), one rank only, memory figures"; do
  check "info --devices: '$line'" grep -qF -- "$line" <<< "$out"
done
listed() {  # listed NAME command...: refused, naming the flag, with every registered device
  local name=$1; shift
  local text; text=$("$@" 2>&1); local code=$?
  check "$name: exits 1" test "$code" -eq 1
  check "$name: names the bad value" grep -qF -- \
    "--device: 'tpu' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu); the registered devices:" <<< "$text"
  for d in "cpu " "cuda " "auto " "cpu-as-device " "cuda-emu "; do
    check "$name: lists $d" grep -qE -- "^  $d" <<< "$text"
  done
  check "$name: says why cuda is not usable" grep -qF "  cuda          not usable here: " <<< "$text"
}
listed "bench step" "$ZAYA" bench step --config "$TINY" --device tpu --steps 1
listed "bench gemm" "$ZAYA" bench gemm --device tpu --shapes 8x8x8
listed "bench comm" "$ZAYA" bench comm --device tpu -b 8 -e 8
listed "bench membw" "$ZAYA" bench membw --device tpu
# Capabilities, not names: cpu-as-device has no timings of its own; cuda's refusal carries why.
text=$("$ZAYA" bench gemm --device cpu-as-device --shapes 8x8x8 2>&1)
check "bench gemm refuses a device without timings" grep -qF -- \
  "--device cpu-as-device: no timings of its own" <<< "$text"
text=$("$ZAYA" bench step --config "$TINY" --device cuda --steps 1 2>&1)
check "cuda refused with the reason" grep -qF -- \
  "--device cuda: the backend plugin /nonexistent/libzaya_cuda_backend.so is missing" <<< "$text"
echo "devices: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
