"""zaya serve where a request goes wrong, over real sockets (docs/commands/serve.md):
  - a padded vocabulary (model 512 ids, tokenizer 508): top_logprobs, of drawn and of echoed prompt
    tokens, never lists a padding id (it has no text; listing one made the request fail with 500),
    though the model's weights are edited so that padding ids are the likeliest everywhere; a
    token-id prompt with a padding id is refused with 400;
  - a request that fails inside the engine (the test hook ZAYA_SERVE_TEST_FAULT): it gets a 5xx
    JSON error object and is logged, the requests beside it and after it are answered with their
    texts, /health answers; a failed decoding step ends the requests it held with 5xx, never a hang;
  - `Expect: 100-continue` (answered 100, then the reply; 413 at once for a body over the limit)
    and two requests in one write on a keep-alive connection (both answered, in order);
  - the caps: past --max-connections connections at once and as many waiting, 503 at once.
  faults.py ZAYA SRC WORK"""
import concurrent.futures as futures
import json
import math
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Checks, Server, fixtures, http, request  # noqa: E402

zaya, src, work = sys.argv[1:4]
check = Checks()
fixtures(zaya, src, work)
M = f"{work}/m512/model"


def pad_model(model, first_pad, scale=1000.0):
    """Makes the padding rows [first_pad, V) of the (tied) embedding +-scale times two real rows,
    so that at every position one padding id has by far the largest logit."""
    path = f"{model}/model.safetensors"
    data = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    meta = json.loads(data[8:8 + n])["model.embed_tokens.weight"]
    rows, hidden = meta["shape"]
    assert meta["dtype"] == "F32" and rows == 512, meta
    base = 8 + n + meta["data_offsets"][0]

    def row(i):
        return list(struct.unpack_from(f"<{hidden}f", data, base + 4 * hidden * i))
    for k, i in enumerate(range(first_pad, rows)):
        sign = 1.0 if k % 2 == 0 else -1.0
        struct.pack_into(f"<{hidden}f", data, base + 4 * hidden * i,
                         *[sign * scale * x for x in row(10 + k // 2)])
    open(path, "wb").write(bytes(data))


# A padded vocabulary: the 512-id model with a 508-token tokenizer.
pw = f"{work}/padded"
os.makedirs(pw, exist_ok=True)
subprocess.run([zaya, "tokenizer", "train", "--input", f"{work}/brown.txt", "--vocab-size", "508",
                "--out", f"{pw}/tokenizer.json", "--force"], check=True, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
subprocess.run(["cp", "-r", M, f"{pw}/model"], check=True)
pad_model(f"{pw}/model", 508)
server = Server(zaya, pw, f"{pw}/model")
P = server.port
prompt = "The jury said that the city of Atlanta"
status, body = http(P, "POST", "/v1/completions",
                    {"model": "model", "prompt": prompt, "max_tokens": 12, "temperature": 0,
                     "echo": True, "logprobs": 20}, timeout=30)
lp = body["choices"][0]["logprobs"] if status == 200 else None
check(lp is not None and len(lp["top_logprobs"]) > 12,
      f"padded vocabulary: echo with logprobs 20 is answered (status {status})")
if lp is not None:
    tops = [t for t in lp["top_logprobs"] if t is not None]
    # The listed mass is tiny: the likeliest ids were padding, and none of them is listed.
    mass = max(sum(math.exp(v) for v in t.values()) for t in tops)
    # (Ids with one text are listed once, so a position may list fewer than 20.)
    check(len(tops) == len(lp["top_logprobs"]) - 1 and all(1 <= len(t) <= 21 for t in tops)
          and mass < 1e-3,
          f"padded vocabulary: each position lists tokens, none padding (listed mass {mass:.2g})")
status, info = http(P, "GET", "/tokenizer_info")
check(status == 200 and info.get("vocab_size") == 508 and info.get("model_vocab_size") == 512,
      f"padded vocabulary: /tokenizer_info gives the tokenizer's 508 ids and the model's 512 ({info})")
status, body = http(P, "POST", "/v1/completions",
                    {"model": "model", "prompt": [5, 509, 7], "max_tokens": 2})
check(status == 400 and "[0, 508)" in body["error"]["message"],
      f"padded vocabulary: a prompt with padding id 509 gets 400 ({status})")
check(server.stop() == 0, "padded vocabulary: SIGTERM exits 0")


def completion(port, seed, max_tokens=24, timeout=60):
    return http(port, "POST", "/v1/completions",
                {"model": "model", "prompt": "The jury said " * (1 + seed % 3),
                 "max_tokens": max_tokens, "temperature": 1, "seed": seed}, timeout=timeout)


def text_of(reply):
    status, body = reply
    return body["choices"][0]["text"] if status == 200 else None


# One request failing inside the engine, eight others in flight beside it.
os.environ["ZAYA_SERVE_TEST_FAULT"] = "request:7"
server = Server(zaya, work, M, "--max-batch", "4")
del os.environ["ZAYA_SERVE_TEST_FAULT"]
P = server.port
seeds = [100 + i for i in range(8)]
alone = [text_of(completion(P, s)) for s in seeds]
with futures.ThreadPoolExecutor(9) as pool:
    others = [pool.submit(completion, P, s) for s in seeds]
    status, body = completion(P, 7)
    together = [text_of(f.result()) for f in others]
err = body.get("error", {}) if isinstance(body, dict) else {}
check(status == 500 and err.get("type") == "server_error" and "test fault" in err.get("message"),
      f"a request failing in the engine gets 500 with an error object ({status}: {err})")
check(None not in alone and together == alone,
      "the 8 requests in flight beside it get their texts")
check("a request failed: a test fault" in server.stderr(), "the failure is logged")
check(http(P, "GET", "/health")[0] == 200 and text_of(completion(P, 100)) == alone[0],
      "after it /health answers 200 and a completion its text")
check(server.stop() == 0, "SIGTERM exits 0")

# A decoding step failing: every request it held ends with 5xx (none hangs); then the engine
# starts again and answers.
os.environ["ZAYA_SERVE_TEST_FAULT"] = "step:7"
server = Server(zaya, work, M, "--max-batch", "4")
del os.environ["ZAYA_SERVE_TEST_FAULT"]
P = server.port
with futures.ThreadPoolExecutor(9) as pool:
    others = [pool.submit(completion, P, s, 200) for s in seeds]
    status, body = completion(P, 7)
    replies = [f.result() for f in others]
check(status >= 500 and "error" in body, f"the request whose step fails gets {status}")
check(all(s == 200 and text_of((s, b)) is not None or s >= 500 and "error" in b
          for s, b in replies),
      f"the requests beside it end, 200 or 5xx ({sorted(s for s, _ in replies)})")
check("a decoding step failed" in server.stderr(), "the failed step is logged")
check(http(P, "GET", "/health")[0] == 200 and text_of(completion(P, 100)) == alone[0],
      "the engine starts again: /health 200, a completion its text")
check(server.stop() == 0, "SIGTERM exits 0")


def responses(data):
    """The (status, body) of each response in `data`, in order (bodies by Content-Length)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        status = int(head.split(b" ")[1])
        m = re.search(rb"(?i)content-length: *([0-9]+)", head)
        n = int(m.group(1)) if m else 0
        out.append((status, rest[:n]))
        data = rest[n:]
    return out


server = Server(zaya, work, M, "--max-connections", "8", "--max-batch", "1", "--max-queue", "1")
P = server.port
req = json.dumps({"model": "model", "prompt": "The jury", "max_tokens": 6, "temperature": 0})
want = text_of(http(P, "POST", "/v1/completions", json.loads(req)))

# Expect: 100-continue: the head alone, 100 Continue, then the body and the reply.
head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        f"Content-Length: {len(req)}\r\nConnection: close\r\n\r\n").encode()
with socket.create_connection(("127.0.0.1", P), timeout=10) as s:
    s.sendall(head)
    interim = s.recv(4096)
    s.sendall(req.encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
got = responses(data)
check(interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n") and len(got) == 1 and got[0][0] == 200
      and json.loads(got[0][1])["choices"][0]["text"] == want,
      f"Expect: 100-continue: 100, then the reply ({interim[:30]!r}, {[s for s, _ in got]})")
status, _, payload = request(P, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                b"Expect: 100-continue\r\nContent-Length: 5000000000\r\n\r\n", 5)
check(status == 413 and b"100 Continue" not in payload,
      f"Expect: 100-continue with a body over the limit: 413 at once ({status})")

# Pipelining: three requests in one write on a keep-alive connection, answered in order.
raw = (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
       b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(req)).encode() +
       b"\r\n\r\n" + req.encode() +
       b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
with socket.create_connection(("127.0.0.1", P), timeout=10) as s:
    s.sendall(raw)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
got = responses(data)
check([st for st, _ in got] == [200, 200, 200] and b'"ok"' in got[0][1]
      and json.loads(got[1][1])["choices"][0]["text"] == want and b'"list"' in got[2][1],
      f"pipelining: three requests in one write answered in order ({[st for st, _ in got]})")

check(server.stop() == 0, "SIGTERM exits 0")

# --max-queue 0 means no request waits, not that none is taken: one at a time on an idle server,
# every request is answered (each got 429 before). The burst rows of the queue table are
# EngineLimits.TheBatchDecodesAndTheQueueWaits (unit), where no timing decides what is running.
server = Server(zaya, work, M, "--max-batch", "2", "--max-queue", "0")
P = server.port
statuses = [http(P, "POST", "/v1/completions", json.loads(req))[0] for _ in range(3)]
check(statuses == [200, 200, 200], f"--max-queue 0: one request at a time, each answered ({statuses})")
check(server.stop() == 0, "SIGTERM exits 0")

# The cap on open connections: 16 open, past that 503 at once. A server of its own, so that no
# earlier connection (still in its lingering close on a loaded machine) holds a place. 20
# connections that send nothing hold places (until their 10 s head deadline). They arrive as one
# burst while the server is stopped (SIGSTOP): the kernel must queue them all (Debian's httplib
# listens with a backlog of 5, and connections past it were retried seconds later), and the count
# must be exact in the order they arrive, however the burst meets the reader's wake-ups.
# --http-threads 4: the 16 silent ones hold no thread (their heads are read by one thread), so
# once they close /health is answered on one of the 4.
server = Server(zaya, work, M, "--max-connections", "16", "--http-threads", "4", "--max-batch", "1",
                "--max-queue", "1")
P = server.port
silent = []
os.kill(server.proc.pid, signal.SIGSTOP)
try:
    for _ in range(20):
        silent.append(socket.create_connection(("127.0.0.1", P), timeout=3))
except OSError:
    pass
finally:
    os.kill(server.proc.pid, signal.SIGCONT)
check(len(silent) == 20, f"a burst of 20 connections to a busy server is queued ({len(silent)})")
status, body = http(P, "GET", "/health", timeout=5)
check(status == 503 and "connections open" in body["error"]["message"],
      f"past --max-connections 16: 503 at once ({status})")


def answered_503(s):
    """Whether a 503 is already waiting on `s` (answered at the cap, before /health)."""
    s.setblocking(False)
    try:
        return s.recv(12).startswith(b"HTTP/1.1 503")
    except BlockingIOError:
        return False


rejected = sum(answered_503(s) for s in silent)
check(rejected == 4, f"of the 20 silent connections exactly the 4 past 16 got 503 ({rejected})")
for s in silent[:8]:  # 8 of the 16 held close: places for /health, while 8 stay silent
    s.close()
status = 0
for _ in range(50):  # the reader sees the closed connections within moments
    status, _ = http(P, "GET", "/health", timeout=10)
    if status == 200:
        break
    time.sleep(0.1)
check(status == 200, "once some of them close, /health answers 200 beside 8 silent connections "
      "(4 answering threads, none held by a silent connection)")
for s in silent[8:]:
    s.close()
check(server.stop() == 0, "SIGTERM exits 0")

print(f"serve faults: {check.fails} failed")
sys.exit(1 if check.fails else 0)
