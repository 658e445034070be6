"""zaya serve with lm-evaluation-harness's `local-completions` payloads, over plain HTTP.

Usage: lm_eval_payloads.py ZAYA SRC WORK

On the tiny model with random weights and a tokenizer trained on Brown, served by `zaya serve`:
  - GET /tokenizer_info and POST /tokenize as lm-eval's remote tokenizer calls them; /tokenize
    equals `zaya tokenizer encode`, /detokenize gives the text back;
  - lm-eval's log-likelihood request: a batch of token-id lists with echo, max_tokens 1, logprobs 1,
    parsed as lm-eval parses it (sum of token_logprobs[ctxlen:-1]; greedy when each token's
    logprob is the best of its top_logprobs), equal to `zaya eval --tasks`'s per-choice scores
    (1e-5 relative) on the same task;
  - lm-eval's generate_until request (token ids, temperature 0, stop strings): the text stops before
    any stop string and equals the same request with a text prompt;
  - echo with max_tokens 0, and bad requests answered with 4xx error objects.
Exits 77 (skipped) when the Brown corpus is missing.
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

ZAYA, SRC, WORK = sys.argv[1:4]
fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        fails.append(what)


def run(*cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode()


def http(url, body=None):
    """(status, parsed JSON body)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def setup():
    brown = os.environ.get("ZAYA_BROWN_TEXT", os.path.join(SRC, "data/raw/brown.txt"))
    if not os.path.exists(brown):
        print(f"SKIPPED: {brown} is missing (run scripts/setup.sh)")
        sys.exit(77)
    os.makedirs(WORK, exist_ok=True)
    text = open(brown, encoding="utf-8").read(200000)
    open(os.path.join(WORK, "brown.txt"), "w", encoding="utf-8").write(text)
    tok = os.path.join(WORK, "tokenizer.json")
    run(ZAYA, "tokenizer", "train", "--input", os.path.join(WORK, "brown.txt"), "--vocab-size", "512", "--out", tok,
        "--force")
    cfg = open(os.path.join(SRC, "configs/tiny.json"), encoding="utf-8").read()
    open(os.path.join(WORK, "tiny.json"), "w").write(cfg.replace('"vocab_size": 97', '"vocab_size": 512'))
    run(ZAYA, "debug-dump", "--config", os.path.join(WORK, "tiny.json"), "--seed", "3", "--out", os.path.join(WORK, "m"),
        "--force")
    sents = [" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s+", text) if 6 <= len(s.split()) <= 12][:12]
    items = [{"context": " ".join(s.split()[:4]) + (" " if i % 2 else ""),
              "choices": [" ".join(s.split()[4:]), " ".join(sents[i + 1].split()[4:])], "gold": 0}
             for i, s in enumerate(sents[:6])]
    task = os.path.join(WORK, "task.jsonl")
    with open(task, "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")
    return tok, os.path.join(WORK, "m", "model"), task, items


def serve(model, tok):
    out = open(os.path.join(WORK, "serve.out"), "w")
    proc = subprocess.Popen([ZAYA, "serve", "--model", model, "--tokenizer", tok, "--port", "0",
                             "--model-name", "tiny-zaya", "--max-batch", "4"],
                            stdout=out, stderr=open(os.path.join(WORK, "serve.err"), "w"))
    for _ in range(300):
        m = re.search(r"http://[0-9.]+:[0-9]+", open(os.path.join(WORK, "serve.out")).read())
        if m:
            return proc, m.group(0)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    print(open(os.path.join(WORK, "serve.err")).read())
    raise SystemExit("FAIL the server did not start")


def main():
    tok, model, task, items = setup()
    samples = os.path.join(WORK, "samples.jsonl")
    run(ZAYA, "eval", "--model", model, "--tokenizer", tok, "--tasks", task, "--log-samples", samples, "--force")
    want = [json.loads(line) for line in open(samples, encoding="utf-8")]
    proc, url = serve(model, tok)
    try:
        status, info = http(url + "/tokenizer_info")
        check(status == 200 and info.get("eos_token") == "<|endoftext|>", f"/tokenizer_info: {info}")

        def encode(text):
            status, r = http(url + "/tokenize", {"prompt": text, "add_special_tokens": False})
            assert status == 200, r
            return r["tokens"]

        sample_text = items[0]["context"] + " " + items[0]["choices"][0]
        check(encode(sample_text) == json.loads(run(ZAYA, "tokenizer", "encode", "--tokenizer", tok, "--text",
                                                    sample_text, "--json")),
              "/tokenize equals zaya tokenizer encode")
        status, d = http(url + "/detokenize", {"tokens": encode(sample_text)})
        check(status == 200 and d["prompt"] == sample_text, "/detokenize gives the text back")
        added = {t["content"]: t["id"] for t in json.load(open(tok, encoding="utf-8"))["added_tokens"]}
        check(encode(info["eos_token"]) == [added["<|endoftext|>"]],
              "/tokenize reads the end-of-text token's text as that token (lm-eval's eot id)")

        # lm-eval's log-likelihood request: _encode_pair with the remote tokenizer, a batch.
        inputs, ctxlens = [], []
        for it in items:
            for choice in it["choices"]:
                context, cont = it["context"], " " + choice
                n = len(context) - len(context.rstrip())
                if n:
                    context, cont = context[:-n], context[-n:] + cont
                whole, ctx = encode(context + cont), encode(context)
                inputs.append(ctx + whole[len(ctx):])
                ctxlens.append(len(ctx))
        status, out = http(url + "/v1/completions", {"model": "tiny-zaya", "prompt": inputs, "temperature": 0,
                                                      "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": True})
        check(status == 200 and len(out.get("choices", [])) == len(inputs), f"log-likelihood batch: {status}")
        worst, k = 0.0, 0
        for choice, ctxlen in zip(sorted(out["choices"], key=lambda c: c["index"]), ctxlens):
            lp = choice["logprobs"]
            ll = sum(lp["token_logprobs"][ctxlen:-1])
            greedy = all(t == max(top.values()) for t, top in
                         zip(lp["token_logprobs"][ctxlen:-1], lp["top_logprobs"][ctxlen:-1]))
            ref = want[k // 2]["loglikelihoods"][k % 2]
            worst = max(worst, abs(ll - ref) / abs(ref))
            check(greedy == want[k // 2]["is_greedy"][k % 2], f"choice {k}: is_greedy as zaya eval's")
            check(lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
                  and len(lp["tokens"]) == len(inputs[k]) + 1 and lp["text_offset"][0] == 0,
                  f"choice {k}: echo layout (first logprob null, prompt tokens + 1)")
            k += 1
        check(worst <= 1e-5, f"served log-likelihoods equal zaya eval's (worst relative {worst:.2e})")

        # lm-eval's generate_until request: token ids, greedy, stop strings.
        ctx_ids = encode(items[0]["context"].rstrip())
        body = {"model": "tiny-zaya", "prompt": [ctx_ids], "max_tokens": 24, "temperature": 0,
                "stop": ["\n\n", "<|endoftext|>", "."], "seed": 1234}
        status, g = http(url + "/v1/completions", body)
        text = g["choices"][0]["text"] if status == 200 else ""
        check(status == 200 and not any(s in text for s in body["stop"]), f"generate_until: {text!r}")
        status, g2 = http(url + "/v1/completions", dict(body, prompt=items[0]["context"].rstrip()))
        check(status == 200 and g2["choices"][0]["text"] == text, "generate_until: token ids = text prompt")

        status, e0 = http(url + "/v1/completions", {"model": "tiny-zaya", "prompt": inputs[0], "max_tokens": 0,
                                                     "echo": True, "logprobs": 0})
        check(status == 200 and len(e0["choices"][0]["logprobs"]["tokens"]) == len(inputs[0])
              and e0["usage"]["completion_tokens"] == 0, "echo with max_tokens 0: the prompt only")
        bad = [({"model": "tiny-zaya", "prompt": "x", "logprobs": 21}, "logprobs"),
               ({"model": "tiny-zaya", "prompt": [[1, 512]], "max_tokens": 1}, "prompt[0]"),
               ({"model": "tiny-zaya", "prompt": "x", "max_tokens": 0}, "max_tokens"),
               ({"model": "tiny-zaya", "prompt": [1] * 300, "max_tokens": 1}, "prompt")]
        for body, param in bad:
            status, e = http(url + "/v1/completions", body)
            check(400 <= status < 500 and e["error"]["param"] == param, f"bad {param}: {status} {e}")
        status, e = http(url + "/tokenize", {"text": "x"})
        check(status == 400 and "error" in e, "/tokenize without prompt: 400 error object")
        status, e = http(url + "/detokenize", {"tokens": [99999]})
        check(status == 400 and "error" in e, "/detokenize with a bad id: 400 error object")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"lm_eval_payloads: {len(fails)} failed")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
