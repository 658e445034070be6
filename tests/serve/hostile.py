"""zaya serve against careless and hostile clients, over real sockets (docs/commands/serve.md,
"What a client cannot do"): a tokenizer smaller or larger than the model refused at start; 1,000
connections that trickle their headers while /health and a completion from other clients are
answered; 64 concurrent streams equal to their one-at-a-time texts; a second server on the same
port refused, naming it; a half-closed client answered; bad Content-Length answered 400 at once;
a body nested 100,000 deep answered 400; SIGTERM under load ending the process with 0; an address-space limit never giving a server that
says "listening" and cannot answer. No assertion on time beyond generous client timeouts.
  hostile.py ZAYA SRC WORK"""
import concurrent.futures as futures
import os
import resource
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Checks, Server, fixtures, http, request, stream_text  # noqa: E402

zaya, src, work = sys.argv[1:4]
check = Checks()
fixtures(zaya, src, work, vocabs=(512, 600, 300))
M = f"{work}/m512/model"

# A tokenizer of another size than the model's: refused at start, before "listening".
for v, what in ((600, "smaller"), (300, "larger")):
    s = Server(zaya, work, f"{work}/m{v}/model", wait=False)
    port = s.wait_listening()
    rc = s.stop() if port is not None else s.proc.wait(60)  # a server that started is stopped
    check(port is None and rc != 0 and "not this model's tokenizer" in s.stderr(),
          f"a tokenizer {what} than the model (512 tokens, model {v}) is refused at start")

server = Server(zaya, work, M, "--max-batch", "16")
P = server.port


def slow_headers(n, stop):
    """n connections that send a request line, then one header line every 0.5 s."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", P), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)

    def trickle():
        while not stop.is_set():
            for s in socks:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
            stop.wait(0.5)
        for s in socks:
            s.close()
    t = threading.Thread(target=trickle)
    t.start()
    return t


# A head that never ends: 408 after the 10 s head deadline (read at the end of the checks below,
# which run meanwhile), from the reader thread that holds it.
unfinished = socket.create_connection(("127.0.0.1", P), timeout=30)
unfinished.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")

# 1,000 connections trickling their headers (issue 39): their heads are read by one thread, so
# /health and a completion are answered beside them (each took a thread before, and past 256 + 256
# the rest got 503). The seconds each took are printed; the "within 1 s" is read from
# them (tests do not assert on time).
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < 1200:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
stop = threading.Event()
trickler = slow_headers(1000, stop)
time.sleep(0.5)
t0 = time.monotonic()
status, body = http(P, "GET", "/health", timeout=10)
t1 = time.monotonic()
check(status == 200 and body.get("status") == "ok",
      f"/health answered while 1,000 connections trickle their headers (status {status}, "
      f"{t1 - t0:.3f} s)")
status, body = http(P, "POST", "/v1/completions",
                    {"model": "model", "prompt": "The jury", "max_tokens": 8, "temperature": 0},
                    timeout=10)
t2 = time.monotonic()
check(status == 200 and len(body["choices"][0]["text"]) > 0,
      f"a completion answered while 1,000 connections trickle their headers (status {status}, "
      f"{t2 - t1:.3f} s)")
stop.set()
trickler.join()

# 64 concurrent streams give the texts each gets alone.
reqs = [{"model": "model", "prompt": "The jury said " * (1 + i % 5), "max_tokens": 8 + i % 9,
         "temperature": 0.8, "seed": i} for i in range(64)]
alone = [stream_text(P, r) for r in reqs]
with futures.ThreadPoolExecutor(64) as pool:
    together = list(pool.map(lambda r: stream_text(P, r, timeout=60), reqs))
check(None not in alone and alone == together and len(set(alone)) > 8,
      "64 concurrent streams equal their one-at-a-time texts")

# A second server on the same port: refused, naming the port.
second = Server(zaya, work, M, port=P, wait=False)
second_port = second.wait_listening()
rc = second.stop() if second_port is not None else second.proc.wait(60)
err = second.stderr()
check(second_port is None and rc != 0 and f":{P}" in err and "in use" in err,
      f"a second server on port {P} exits {rc}, naming the port")
status, _ = http(P, "GET", "/health")
check(status == 200, "the first server still answers on its port")

# A client that half-closes after its request still gets the reply.
body = b'{"model": "model", "prompt": "The jury", "max_tokens": 4, "temperature": 0}'
raw = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
status, _, payload = request(P, raw, timeout=10, half_close=True)
check(status == 200 and b'"text"' in payload, f"a half-closed client gets its reply ({status})")

# Malformed framing: 400 (or 413 for a well-formed length over the limit) at once, with a 5 s
# client timeout (the library alone waited out its 5 s read timeout).
for length, want in (("-5", 400), ("99999999999999999999999", 400), ("abc", 400),
                     ("5, 6", 400), ("5000000000", 413)):
    raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
           .encode())
    status, _, payload = request(P, raw, timeout=5)
    check(status == want and b'"error"' in payload,
          f"Content-Length: {length} gets {want} without waiting for a body (got {status})")
status, _, _ = request(P, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n", timeout=5)
check(status == 411, f"a chunked request body gets 411 ({status})")
# A body nested 100,000 deep (200 KB, within the body limit): 400 naming the depth, never a crash.
deep = b'{"model": "model", "prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}"
for path in ("/v1/completions", "/tokenize"):
    raw = (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(deep)}\r\n\r\n").encode()
    status, _, payload = request(P, raw + deep, timeout=10)
    check(status == 400 and b"nested more than 512 levels deep" in payload,
          f"a body nested 100,000 deep to {path} gets 400 naming the depth (got {status})")
status, _ = http(P, "GET", "/health")
check(status == 200, f"the server answers after the nested bodies ({status})")
reply = b""
try:
    while b"\r\n\r\n" not in reply and (chunk := unfinished.recv(4096)):
        reply += chunk
except OSError:
    pass
unfinished.close()
check(reply.startswith(b"HTTP/1.1 408"),
      f"a head that never ends gets 408 after the head deadline ({reply[:40]!r})")
check(server.stop() == 0, "SIGTERM: exit 0")

# SIGTERM under load (streams running, clients trickling headers): exit 0 within the stated
# bound, --drain-timeout + 10 s (waited for with a margin, not asserted as a duration).
server = Server(zaya, work, M, "--max-batch", "4", "--drain-timeout", "2")
P = server.port
stop = threading.Event()
trickler = slow_headers(20, stop)
pool = futures.ThreadPoolExecutor(16)
load = [pool.submit(stream_text, P, {"model": "model", "prompt": "The jury", "max_tokens": 240,
                                     "temperature": 1, "seed": i}, 60) for i in range(16)]
time.sleep(0.5)
rc = server.stop(timeout=2 + 10 + 15)
stop.set()
trickler.join()
pool.shutdown()
check(rc == 0, f"SIGTERM with 16 streams and 20 slow clients: exit {rc} (0 wanted)")

# Under an address-space limit a server says "listening" only when it can answer.
if os.environ.get("ASAN_OPTIONS") is None:
    s = Server(zaya, work, M, "--max-batch", "1024", "--max-queue", "100000",
               prefix=("bash", "-c", 'ulimit -v 4000000 && exec "$@"', "limited"), wait=False)
    port = s.wait_listening()
    if port is None:
        check(s.proc.returncode != 0 and "zaya: error" in s.stderr(),
              "under ulimit -v 4 GB: refused at start with an error")
    else:
        P = port
        status, _ = http(P, "GET", "/health", timeout=10)
        status2, _ = http(P, "POST", "/v1/completions",
                          {"model": "model", "prompt": "The", "max_tokens": 4}, timeout=10)
        check(status == 200 and status2 == 200,
              f"under ulimit -v 4 GB: listening, and answers ({status}, {status2})")
        check(s.stop() == 0, "under ulimit -v 4 GB: SIGTERM exits 0")
else:
    print("SKIPPED: the address-space limit (AddressSanitizer reserves more than 4 GB)")

print(f"serve hostile: {check.fails} failed")
sys.exit(1 if check.fails else 0)
