#!/usr/bin/env bash
# Decoding on the emulated CUDA device (label gpu-emu): the decoder's steps through the CUDA
# backend's kernels, its cache and states in device memory. On a random tiny model with a
# Brown-trained tokenizer: `zaya generate --device cuda-emu` gives the greedy text of
# `--device cpu`, alone and in a continuous batch; `zaya eval --tasks --device cuda-emu` the
# choices and accuracy of the CPU; `zaya serve --device cuda-emu` answers a completion with the
# CPU's greedy text; and a precision decoding cannot take is named.
#   tests/gpu/gpu_decode.sh ZAYA SRC WORK
set -uo pipefail
ZAYA=$1; SRC=$2; WORK=$3
source "$SRC/tests/cli/tiny_decode_model.sh"

# Greedy texts. The random model's greedy text is one token over and over, so these checks alone
# would miss a small error in the logits: the eval check below holds every continuation token's
# log-likelihood to the CPU's (1e-4), and gpu-emu.ops's GpuDecoder.* every logit of every step.
greedy=()
for dev in cpu cuda-emu; do
  out=$("${G[@]}" --device $dev --prompt "The jury said" --max-tokens 16 --temperature 0 --no-eos --json)
  greedy+=("$(field text <<< "$out")")
done
check "$([[ -n "${greedy[0]}" && "${greedy[0]}" == "${greedy[1]}" ]] && echo 1 || echo 0)" \
  "generate --device cuda-emu: the greedy text of --device cpu"

# A continuous batch of greedy requests (ragged prompts and lengths, 3 at a time) on both.
$PY - > "$WORK/many.jsonl" <<'PY'
import json
words = "The jury said that in the morning he would go to the city and see".split()
for i in range(6):
    print(json.dumps({"prompt": " ".join(words[: 1 + (5 * i) % len(words)]),
                      "max_tokens": 3 + (7 * i) % 11, "temperature": 0}))
PY
"${G[@]}" --device cpu --prompts "$WORK/many.jsonl" --no-eos --batch 3 > "$WORK/many_cpu.out" 2> /dev/null
"${G[@]}" --device cuda-emu --prompts "$WORK/many.jsonl" --no-eos --batch 3 > "$WORK/many_emu.out" 2> "$WORK/many_emu.err"
texts() { $PY -c "import json,sys; [print(json.dumps([json.loads(l)[k] for k in ('text','tokens')])) for l in open(sys.argv[1])]" "$1"; }
check "$([[ $(wc -l < "$WORK/many_emu.out") == 6 && "$(texts "$WORK/many_emu.out")" == "$(texts "$WORK/many_cpu.out")" ]] && echo 1 || echo 0)" \
  "generate --prompts --batch 3 --device cuda-emu: the texts of --device cpu"

# eval --tasks: the batch decoder's prefill and forks on the device.
$PY - > "$WORK/task.jsonl" <<'PY'
import json
rows = [("The jury said", [" that", " the", " of"], 0), ("In the morning", [" he", " it"], 1),
        ("He would go to", [" the city", " see"], 0), ("and", [" see the", " go"], 1)]
for ctx, choices, gold in rows:
    print(json.dumps({"context": ctx, "choices": choices, "gold": gold}))
PY
E=("$ZAYA" eval --model "$WORK/dump/model" --tokenizer "$WORK/tokenizer.json" --tasks "$WORK/task.jsonl")
"${E[@]}" --device cpu --log-samples "$WORK/samples_cpu.jsonl" > "$WORK/eval_cpu.out" 2> /dev/null
"${E[@]}" --device cuda-emu --log-samples "$WORK/samples_emu.jsonl" > "$WORK/eval_emu.out" 2> /dev/null
ok=$($PY - "$WORK/samples_cpu.jsonl" "$WORK/samples_emu.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
same = len(a) == len(b) == 4 and all(
    x["is_greedy"] == y["is_greedy"] and x["acc"] == y["acc"] and
    all(abs(p - q) <= 1e-4 * max(1.0, abs(p)) for p, q in zip(x["loglikelihoods"], y["loglikelihoods"]))
    for x, y in zip(a, b))
print(int(same))
PY
)
check "$ok" "eval --tasks --device cuda-emu: the CPU's log-likelihoods (within 1e-4), greedy flags and accuracy"

# serve --device cuda-emu answers a completion, with the CPU's greedy text.
"$ZAYA" serve --model "$WORK/dump/model" --tokenizer "$WORK/tokenizer.json" --port 0 \
  --device cuda-emu --max-batch 2 --model-name m > "$WORK/serve.out" 2> "$WORK/serve.err" &
pid=$!
url=
for _ in $(seq 1 300); do
  url=$(grep -oE 'http://[0-9.]+:[0-9]+' "$WORK/serve.out" 2> /dev/null | head -1)
  [[ -n $url ]] && break
  kill -0 $pid 2> /dev/null || break
  sleep 0.1
done
answer=$($PY - "$url" <<'PY'
import json, sys, urllib.request
body = json.dumps({"model": "m", "prompt": "The jury said", "max_tokens": 16, "temperature": 0}).encode()
req = urllib.request.Request(sys.argv[1] + "/v1/completions", body, {"Content-Type": "application/json"})
print(json.loads(urllib.request.urlopen(req, timeout=120).read())["choices"][0]["text"])
PY
)
kill -TERM $pid 2> /dev/null; wait $pid; rc=$?
check "$([[ $rc == 0 && -n "$answer" && "$answer" == "${greedy[0]}" ]] && echo 1 || echo 0)" \
  "serve --device cuda-emu answers a completion: the greedy text, exit 0 on SIGTERM"
check "$(grep -q 'on cuda-emu' "$WORK/serve.err" && echo 1 || echo 0)" "serve names its device"

msg=$("${G[@]}" --device cuda-emu --precision bf16 --prompt x 2>&1); rc=$?
check "$([[ $rc -ne 0 && $rc -lt 128 && $msg == *"--precision bf16 is not available for decoding"* ]] && echo 1 || echo 0)" \
  "--precision bf16 is refused, named"

echo "gpu decode: $fails failed"
exit $((fails > 0))
