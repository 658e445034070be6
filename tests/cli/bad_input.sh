#!/usr/bin/env bash
# Bad input through the command line: each case must exit non-zero with a message that names the
# file, field or flag at fault, and must not crash (no signal, no sanitizer report).
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
rm -rf "$WORK"; mkdir -p "$WORK"
fails=0; passes=0

# expect_error NAME EXPECTED_SUBSTRING -- command...
expect_error() {
  local name=$1 expected=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -eq 0 || $rc -ge 128 ]]; then
    echo "FAIL $name: exit code $rc (want 1..127)"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  if [[ "$out" != *"$expected"* ]]; then
    echo "FAIL $name: message lacks '$expected':"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  if [[ "$out" == *"Sanitizer"* || "$out" == *"runtime error"* ]]; then
    echo "FAIL $name: sanitizer report"; echo "$out" | tail -20; fails=$((fails + 1)); return
  fi
  echo "ok   $name: $(echo "$out" | grep -m1 -E 'error|Error|not built' )"
  passes=$((passes + 1))
}

printf '{"model": {"vocab_size": 10,' > "$WORK/malformed.json"
expect_error malformed-json "malformed JSON" -- "$ZAYA" info --config "$WORK/malformed.json"

sed 's/"head_dim"/"head_dims"/' "$SRC/configs/tiny.json" > "$WORK/unknown.json"
expect_error unknown-field "unknown field 'model.head_dims'" -- "$ZAYA" info --config "$WORK/unknown.json"

grep -v '"router_dim"' "$SRC/configs/tiny.json" > "$WORK/missing.json"
expect_error missing-field "missing required field 'model.router_dim'" -- "$ZAYA" info --config "$WORK/missing.json"

sed 's/"num_kv_heads": 2/"num_kv_heads": 3/' "$SRC/configs/tiny.json" > "$WORK/nodiv.json"
expect_error sizes-do-not-divide "must be divisible by 'model.num_kv_heads'" -- "$ZAYA" info --config "$WORK/nodiv.json"

expect_error missing-file "cannot open config file" -- "$ZAYA" info --config "$WORK/nope.json"
expect_error bad-flag "--batch" -- "$ZAYA" bench step --config "$SRC/configs/tiny.json" --batch x
expect_error no-subcommand "subcommand" -- "$ZAYA"
expect_error gemm-device "--device: 'tpu' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu)" -- "$ZAYA" bench gemm --device tpu
if [[ ! -e /dev/nvidiactl && ! -e /dev/nvidia0 ]]; then
  # No GPU here: refused with the reason (no usable GPU, or a build without the CUDA backend).
  expect_error gemm-cuda-no-gpu "--device cuda: " -- "$ZAYA" bench gemm --device cuda --shapes 8x8x8
  expect_error membw-cuda-no-gpu "--device cuda: " -- "$ZAYA" bench membw --device cuda
fi
expect_error gemm-bf16 "--dtype bf16" -- "$ZAYA" bench gemm --dtype bf16
expect_error gemm-bad-shape "--shapes: '12x3' is not MxNxK" -- "$ZAYA" bench gemm --shapes 4x4x4,12x3
expect_error gemm-bad-model "cannot open config file" -- "$ZAYA" bench gemm --shapes "model:$WORK/nope.json"
expect_error membw-times "--times" -- "$ZAYA" bench membw --times 1
expect_error size-no-profile "zaya size needs --profile" -- "$ZAYA" size --active-params 1M
expect_error size-unknown-profile "neither a file nor a built-in profile" -- "$ZAYA" size --profile "$WORK/nope.json" --active-params 1M
printf '{"format": "zaya-hardware-profile", "version": 1}' > "$WORK/profile.json"
expect_error size-bad-profile "$WORK/profile.json: missing field 'name'" -- "$ZAYA" size --profile "$WORK/profile.json" --active-params 1M
expect_error size-no-goal "zaya size needs a goal" -- "$ZAYA" size --profile h100
expect_error size-bad-amount "--active-params: '12Q' is not a positive amount" -- "$ZAYA" size --profile h100 --active-params 12Q
expect_error size-budget-no-tokens "--flops and --gpu-hours need --tokens" -- "$ZAYA" size --profile h100 --flops 1e21
expect_error size-config-and-goal "--config evaluates one shape" -- "$ZAYA" size --profile h100 --config "$SRC/configs/tiny.json" --active-params 1M
expect_error size-bad-global-batch "global batch 6 is not a multiple of micro-batch 4" -- "$ZAYA" size --profile h100 --config "$SRC/configs/tiny.json" --micro-batch 4 --global-batch 6
echo '{}' > "$WORK/exists.json"
expect_error size-profile-exists "'$WORK/exists.json' exists; pass --force" -- "$ZAYA" size profile --out "$WORK/exists.json"
expect_error size-pick "--pick 9: only" -- "$ZAYA" size --profile h100 --active-params 760M --world 64 --candidates 2 --pick 9
expect_error membw-threads "--threads-list" -- "$ZAYA" bench membw --elements 4096 --threads-list 0

# Token ids ≥ vocab size, and a truncated weights file, through `zaya score`-like paths: the
# model directory written by debug-dump is damaged and loaded back by `zaya check-model`.
"$ZAYA" debug-dump --config "$SRC/configs/tiny.json" --out "$WORK/dump" --seq 8 > /dev/null || { echo "FAIL debug-dump"; fails=$((fails + 1)); }
expect_error token-out-of-vocab "token id 97 at position 3 is outside the vocabulary" -- "$ZAYA" forward --model "$WORK/dump/model" --tokens 1,2,3,97
cp -r "$WORK/dump/model" "$WORK/trunc"
truncate -s -100 "$WORK/trunc/model.safetensors"
expect_error truncated-weights "lies outside the data section" -- "$ZAYA" forward --model "$WORK/trunc" --tokens 1,2,3
expect_error train-without-data "missing section 'train'" -- "$ZAYA" train --config "$SRC/configs/tiny.json"

# Issue 11 §2: numbers that are not numbers, and messages that say what is wrong.
cp -r "$WORK/dump/model" "$WORK/nan"
/usr/bin/python3 - "$WORK/nan/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[0]
begin = 8 + n + header[name]["data_offsets"][0]
data[begin + 4:begin + 8] = struct.pack("<f", float("nan"))  # element 1 of the first tensor
open(path, "wb").write(bytes(data))
PY
expect_error nan-weights "holds nan at element 1; weights must be finite numbers" -- "$ZAYA" forward --model "$WORK/nan" --tokens 1,2,3
expect_error forward-one-token "a loss needs at least 2 tokens" -- "$ZAYA" forward --model "$WORK/dump/model" --tokens 5
expect_error forward-token-2-32 "'4294967297' is not a token id" -- "$ZAYA" forward --model "$WORK/dump/model" --tokens 1,4294967297
expect_error threads-negative "--threads: Value -1 not in range 0 to 4096" -- "$ZAYA" --threads -1 info --config "$SRC/configs/tiny.json"
expect_error unknown-subcommand "unknown subcommand 'frobnicate'" -- "$ZAYA" frobnicate
expect_error sample-negative-temperature "'-1' is not a number ≥ 0" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer x --temperature -1
expect_error sample-nan-temperature "'nan' is not a number ≥ 0" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer x --temperature nan
head -c 2000 "$ZAYA" > "$WORK/elf.bin"
printf 'hello world, this is text.\n' > "$WORK/text.txt"
"$ZAYA" tokenizer train --input "$WORK/text.txt" --vocab-size 300 --out "$WORK/tok300.json" > /dev/null 2>&1
expect_error data-prepare-binary "not a text file (a NUL byte at offset" -- "$ZAYA" data prepare --tokenizer "$WORK/tok300.json" --input "$WORK/elf.bin" --name x --out "$WORK/prep"
expect_error sample-foreign-tokenizer "not this model's tokenizer" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer "$WORK/tok300.json"

echo "bad_input: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
