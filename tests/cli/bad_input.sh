#!/usr/bin/env bash
# Bad input through the command line: each case must exit non-zero with a message that names the
# file, field or flag at fault, and must not crash (no signal, no sanitizer report). No case may
# reach a user with a raw library message (issue 31): expect_error fails on "unexpected error"
# (zaya.cpp's catch-all for exceptions that are not zaya::Error), "filesystem error", "max_size()"
# and CLI11's own "not in range" (whose bounds ran to 309 digits).
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
  if [[ "$out" == *"unexpected error"* || "$out" == *"filesystem error"* ||
        "$out" == *"max_size()"* || "$out" == *"not in range"* ]]; then
    echo "FAIL $name: a raw library message"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  echo "ok   $name: $(echo "$out" | grep -m1 -E 'error|Error|not built|: must ' )"
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

expect_error missing-file "--config: must be an existing file, got '$WORK/nope.json' (nothing is there)" -- "$ZAYA" info --config "$WORK/nope.json"
expect_error bad-flag "--batch" -- "$ZAYA" bench step --config "$SRC/configs/tiny.json" --batch x
expect_error no-subcommand "subcommand" -- "$ZAYA"
expect_error gemm-device "--device: 'tpu' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu)" -- "$ZAYA" bench gemm --device tpu
if [[ ! -e /dev/nvidiactl && ! -e /dev/nvidia0 ]]; then
  # No GPU here: refused with the reason (no usable GPU, or a build without the CUDA backend).
  expect_error gemm-cuda-no-gpu "--device cuda: " -- "$ZAYA" bench gemm --device cuda --shapes 8x8x8
  expect_error membw-cuda-no-gpu "--device cuda: " -- "$ZAYA" bench membw --device cuda
fi
expect_error gemm-bf16 "--dtype bf16" -- "$ZAYA" bench gemm --dtype bf16
# Modes are parsed once, at the flag, naming it and listing the modes (issue 40).
expect_error precision-unknown "--precision: 'fp16' is not one of auto, bf16, fp32" -- \
  "$ZAYA" bench step --config "$SRC/configs/tiny.json" --precision fp16
expect_error weight-storage-unknown "--weight-storage: 'bf32' is not one of bf16, fp32" -- \
  "$ZAYA" train --config "$SRC/configs/tiny.json" --weight-storage bf32
expect_error serve-precision-unknown "--precision: 'FP32' is not one of auto, bf16, fp32" -- \
  "$ZAYA" serve --model "$WORK" --precision FP32
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
expect_error size-profile-exists "'$WORK/exists.json' already exists and this command did not make it; nothing was changed. Pass --force" -- "$ZAYA" size profile --out "$WORK/exists.json"
expect_error size-pick "--pick 9: only" -- "$ZAYA" size --profile h100 --active-params 760M --world 64 --candidates 2 --pick 9
expect_error membw-threads "--threads-list" -- "$ZAYA" bench membw --elements 4096 --threads-list 0

# expect_warning NAME EXPECTED_SUBSTRING -- command...: accepted (exit 0), the change named.
expect_warning() {
  local name=$1 expected=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne 0 || "$out" != *"$expected"* ]]; then
    echo "FAIL $name: exit $rc, want 0 and '$expected':"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  echo "ok   $name: $(echo "$out" | grep -m1 'warning')"; passes=$((passes + 1))
}

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
expect_error threads-negative "--threads: must be an integer from 0 to 4096, got -1" -- "$ZAYA" --threads -1 info --config "$SRC/configs/tiny.json"
expect_error unknown-subcommand "unknown subcommand 'frobnicate'" -- "$ZAYA" frobnicate
expect_error sample-negative-temperature "--temperature: must be a number ≥ 0, got '-1'" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer x --temperature -1
expect_error sample-nan-temperature "--temperature: must be a number ≥ 0, got 'nan'" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer x --temperature nan
head -c 2000 "$ZAYA" > "$WORK/elf.bin"
printf 'hello world, this is text.\n' > "$WORK/text.txt"
"$ZAYA" tokenizer train --input "$WORK/text.txt" --vocab-size 300 --out "$WORK/tok300.json" > /dev/null 2>&1
expect_error data-prepare-binary "not a text file (a NUL byte at offset" -- "$ZAYA" data prepare --tokenizer "$WORK/tok300.json" --input "$WORK/elf.bin" --name x --out "$WORK/prep"
expect_error sample-foreign-tokenizer "not this model's tokenizer" -- "$ZAYA" sample --model "$WORK/dump/model" --tokenizer "$WORK/tok300.json"

# Issue 31 §3-4: every number and path flag checked by apps/cli_checks.h, saying what was expected;
# the silent acceptances refused.
T=$SRC/configs/tiny.json
: > "$WORK/a-file"
expect_error config-is-directory "--config: must be an existing file, got '$WORK' (it is a directory)" -- "$ZAYA" info --config "$WORK"
expect_error train-out-is-file "--out: must be a directory to write into, got '$WORK/a-file' (it is a file)" -- "$ZAYA" train --config "$T" --out "$WORK/a-file"
expect_error debug-dump-out-is-file "--out: must be a directory to write into" -- "$ZAYA" debug-dump --config "$T" --out "$WORK/a-file"
expect_error debug-dump-out-under-a-file "--out: must be a directory to write into, got '$WORK/a-file/x/y' ('$WORK/a-file' is not a directory)" -- "$ZAYA" debug-dump --config "$T" --out "$WORK/a-file/x/y"
expect_error plot-out-under-a-file "--out: must name a file to write, got '$WORK/a-file/loss.svg' ('$WORK/a-file' is not a directory)" -- "$ZAYA" plot --metrics "$WORK/a-file" --out "$WORK/a-file/loss.svg"
expect_error aegis-run-dir-is-file "--run-dir: must be a directory to write into" -- "$ZAYA" aegis --run-dir "$WORK/a-file" -- true
expect_error train-max-steps-negative "--max-steps: must be a non-negative integer, got -5" -- "$ZAYA" train --config "$T" --max-steps -5
expect_error info-seq-negative "--seq: must be a positive integer, got -4" -- "$ZAYA" info --config "$T" --seq -4
expect_error info-seq-zero "--seq: must be a positive integer, got 0" -- "$ZAYA" info --config "$T" --seq 0
expect_error info-seq-2-63 "--seq: must be a positive integer up to 9223372036854775807, got 9223372036854775808" -- "$ZAYA" info --config "$T" --seq 9223372036854775808
expect_error info-seq-past-max-seq-len "--seq: 257 is past the model's max_seq_len 256" -- "$ZAYA" info --config "$T" --seq 257
expect_error debug-dump-seq-negative "--seq: must be a positive integer, got -4" -- "$ZAYA" debug-dump --config "$T" --out "$WORK/d2" --seq -4
expect_error bench-step-huge-batch "--batch: must be an integer from 1 to 65536, got 2000000000" -- "$ZAYA" bench step --config "$T" --batch 2000000000
expect_error eval-windows-zero "--windows: must be a positive integer, got 0" -- "$ZAYA" eval --model "$WORK/dump/model" --windows 0
expect_error eval-seq-zero "--seq: must be a positive integer, got 0" -- "$ZAYA" eval --model "$WORK/dump/model" --seq 0
expect_error eval-micro-batch-negative "--micro-batch: must be a positive integer, got -1" -- "$ZAYA" eval --model "$WORK/dump/model" --micro-batch -1
expect_error eval-context-parallel-zero "--context-parallel: must be a positive integer, got 0" -- "$ZAYA" eval --model "$WORK/dump/model" --context-parallel 0
expect_error eval-context-parallel-abc "--context-parallel: must be a positive integer, got 'abc'" -- "$ZAYA" eval --model "$WORK/dump/model" --context-parallel abc
expect_error seed-negative "--seed: must be an integer from 0 to 18446744073709551615, got '-1'" -- "$ZAYA" debug-dump --config "$T" --out "$WORK/d3" --seed -1
expect_error size-write-directory "--write: must name a file to write, got '$WORK' (it is a directory)" -- "$ZAYA" size --profile h100 --active-params 1M --write "$WORK"
: > "$WORK/empty.txt"
expect_error tokenizer-empty-input "--input: no text to train on (0 bytes in 1 file(s))" -- "$ZAYA" tokenizer train --input "$WORK/empty.txt" --vocab-size 300 --out "$WORK/empty-tok.json"
printf '[{"regex": "x", "action": "stop", "acton": "stop"}]' > "$WORK/rules-key.json"
expect_error aegis-rule-unknown-key "rule 0 has unknown key 'acton'" -- "$ZAYA" aegis --run-dir "$WORK/ag" --rules "$WORK/rules-key.json" -- "$ZAYA" train --config "$T" --out "$WORK/ag"
printf '[{"regex": "", "action": "stop"}]' > "$WORK/rules-empty.json"
expect_error aegis-rule-empty-regex "rule 0 has an empty 'regex'" -- "$ZAYA" aegis --run-dir "$WORK/ag" --rules "$WORK/rules-empty.json" -- "$ZAYA" train --config "$T" --out "$WORK/ag"
# data prepare refuses invalid UTF-8 (already on main; kept here as a regression case).
printf 'caf\xe9 in Latin-1\n' > "$WORK/latin1.txt"
expect_error data-prepare-latin1 "latin1.txt:1: invalid UTF-8 at byte offset 3" -- "$ZAYA" data prepare --tokenizer bytes --input "$WORK/latin1.txt" --name l --out "$WORK/prep-utf8"
printf 'cut \xe2\x82\n' > "$WORK/cut.txt"
expect_error data-prepare-truncated-utf8 "cut.txt:1: invalid UTF-8 at byte offset 4" -- "$ZAYA" data prepare --tokenizer bytes --input "$WORK/cut.txt" --name c --out "$WORK/prep-utf8"
# A model of 512 tokens with the 300-token tokenizer: sample refuses the smaller one too.
sed 's/"vocab_size": 97/"vocab_size": 512/' "$T" > "$WORK/tiny512.json"
"$ZAYA" debug-dump --config "$WORK/tiny512.json" --out "$WORK/dump512" --seq 8 > /dev/null || { echo "FAIL debug-dump 512"; fails=$((fails + 1)); }
expect_error sample-smaller-tokenizer "but the model has 512: not this model's tokenizer" -- "$ZAYA" sample --model "$WORK/dump512/model" --tokenizer "$WORK/tok300.json"
# ckpt export-hf on a checkpoint root exports its newest complete checkpoint and says which.
"$ZAYA" ckpt import-hf "$WORK/dump/model" "$WORK/ckroot" > /dev/null 2>&1
out=$("$ZAYA" ckpt export-hf "$WORK/ckroot" "$WORK/exported" 2>&1); rc=$?
if [[ $rc -eq 0 && "$out" == *"exporting its newest complete checkpoint, $WORK/ckroot/step-00000000"* &&
      -s "$WORK/exported/model.safetensors" ]]; then
  echo "ok   ckpt-export-hf-root: $(echo "$out" | head -1)"; passes=$((passes + 1))
else
  echo "FAIL ckpt-export-hf-root: exit $rc"; echo "$out" | tail -5; fails=$((fails + 1))
fi

# An HF config whose num_hidden_layers disagrees with its stages: built as the stages say, and said.
cp -r "$WORK/dump/model" "$WORK/layers"
sed -i 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 120/' "$WORK/layers/config.json"
expect_warning hf-num-hidden-layers "config.json: field 'num_hidden_layers' = 120 disagrees with 'zaya_layers', which lists" -- "$ZAYA" forward --model "$WORK/layers" --tokens 1,2,3
# A tensor shape whose element count overflows: the file and the tensor named.
cp -r "$WORK/dump/model" "$WORK/shape"
/usr/bin/python3 - "$WORK/shape/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[0]
header[name]["shape"] = [2**62, 4]
text = json.dumps(header).encode()
open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
expect_error tensor-shape-overflow "model.safetensors: tensor '" -- "$ZAYA" forward --model "$WORK/shape" --tokens 1,2,3

echo "bad_input: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
