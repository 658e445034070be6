"""One request, three front doors: every line of one JSONL request file goes through
`zaya generate --prompts`, `zaya generate --prompt` (its fields as flags) and `zaya serve`, and
must get the same text through all three, or the same error message (serve/completion_request.h).
The lines include what the doors once read differently: integers past their type (2^32+5 read
as 5, 2^32+1 as 1, 99999999999999 reported as 276447231), a float seed, an empty stop string,
a prompt or max_tokens past the model's 256-token context.
  doors.py ZAYA SRC WORK"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Checks, Server, fixtures, http  # noqa: E402

zaya, src, work = sys.argv[1:4]
check = Checks()
fixtures(zaya, src, work)
M = f"{work}/m512/model"

base = {"model": "model"}
lines = [
    {"prompt": "The jury said", "max_tokens": 12, "temperature": 0},
    {"prompt": "In the morning", "max_tokens": 9, "temperature": 0.7, "top_p": 0.9, "seed": 3},
    {"prompt": "He", "max_tokens": 6, "top_k": 5, "repetition_penalty": 1.3, "temperature": 1,
     "seed": 7},
    {"prompt": "The jury said", "max_tokens": 20, "temperature": 1, "seed": 2, "stop": ["e", "a"]},
    {"prompt": "x", "max_tokens": 2**32 + 5, "seed": 1},
    {"prompt": "x", "top_k": 2**32 + 1, "seed": 1},
    {"prompt": "x", "seed": 1e30},
    {"prompt": "x", "seed": 1, "stop": [""]},
    {"prompt": "the " * 3001, "max_tokens": 4, "seed": 1},
    {"prompt": "x", "max_tokens": 1000, "seed": 1},
    {"prompt": "x", "max_tokens": 99999999999999, "seed": 1},
    {"prompt": "x", "temperature": 3, "seed": 1},
    {"prompt": "x", "seed": 1, "temprature": 1},
]
lines = [dict(base, **line) for line in lines]
with open(f"{work}/requests.jsonl", "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")

GEN = [zaya, "generate", "--model", M, "--tokenizer", f"{work}/tokenizer.json"]


def run(args):
    """(text, None) on success, (None, stderr) on failure."""
    p = subprocess.run(GEN + args, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr
    return json.loads(p.stdout.splitlines()[0])["text"], None


def as_flags(line):
    """The line as generate's flags (numbers as JSON writes them), or None for fields without one."""
    args = ["--json"]
    for key, v in line.items():
        if key == "model":
            continue
        if key == "prompt":
            args += ["--prompt", v]
        elif key == "stop":
            for s in v:
                args += ["--stop", s]
        elif key in ("max_tokens", "temperature", "top_k", "top_p", "repetition_penalty", "seed"):
            args += ["--" + key.replace("_", "-"), json.dumps(v)]
        else:
            return None
    return args


server = Server(zaya, work, M)
texts = 0
for n, line in enumerate(lines, 1):
    path = f"{work}/line{n}.jsonl"
    with open(path, "w") as f:
        f.write(json.dumps(line) + "\n")
    file_text, file_err = run(["--prompts", path])
    status, answer = http(server.port, "POST", "/v1/completions", line, timeout=30)
    serve_text = answer["choices"][0]["text"] if status == 200 else None
    serve_err = answer["error"]["message"] if status != 200 else None
    flags = as_flags(line)
    what = f"line {n} ({json.dumps(line)[:70]})"
    if serve_err is None:
        texts += 1
        flag_text, flag_err = run(flags) if flags else (serve_text, None)
        check(serve_text == file_text == flag_text,
              f"{what}: the same text through the three doors")
    else:
        ok = file_err is not None and f"line{n}.jsonl:1: {serve_err}" in file_err
        if flags:
            _, flag_err = run(flags)
            ok = ok and flag_err is not None and serve_err in flag_err
        check(ok, f"{what}: the same error through the three doors: {serve_err}")
check(texts == 4, f"four of the lines are answered ({texts})")
check(server.stop() == 0, "SIGTERM: exit 0")
print(f"serve doors: {check.fails} failed")
sys.exit(1 if check.fails else 0)
