"""Shared by the serve tests in Python: a tokenizer and random models to serve, a server on a free
port, plain HTTP requests over real sockets, and a check that counts failures."""
import json
import os
import re
import socket
import subprocess
import sys
import time


class Checks:
    def __init__(self):
        self.fails = 0

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.fails += 1


def fixtures(zaya, src, work, vocabs=(512,)):
    """WORK/tokenizer.json (512 tokens, from Brown) and WORK/mVOCAB/model, a random tiny model per
    vocabulary size."""
    os.makedirs(work, exist_ok=True)
    brown = os.environ.get("ZAYA_BROWN_TEXT", os.path.join(src, "data/raw/brown.txt"))
    with open(brown, "rb") as f, open(os.path.join(work, "brown.txt"), "wb") as out:
        out.write(f.read(100000))
    subprocess.run([zaya, "tokenizer", "train", "--input", f"{work}/brown.txt", "--vocab-size",
                    "512", "--out", f"{work}/tokenizer.json", "--force"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = json.load(open(os.path.join(src, "configs/tiny.json")))
    for v in vocabs:
        config["model"]["vocab_size"] = v
        json.dump(config, open(f"{work}/m{v}.json", "w"))
        subprocess.run([zaya, "debug-dump", "--config", f"{work}/m{v}.json", "--out",
                        f"{work}/m{v}", "--seed", "3", "--force"], check=True, stdout=subprocess.DEVNULL)


class Server:
    """zaya serve on a free port; `url`, `port`, `proc`; stderr goes to `log`."""

    def __init__(self, zaya, work, model, *args, port=0, prefix=(), wait=True):
        self.log = os.path.join(work, f"serve{time.monotonic_ns()}.err")
        self.proc = subprocess.Popen(
            list(prefix) + [zaya, "serve", "--model", model, "--tokenizer",
                            f"{work}/tokenizer.json", "--port", str(port), *args],
            stdout=subprocess.PIPE, stderr=open(self.log, "w"), text=True)
        self.port = None
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout=60):
        """The port once "listening" is printed; None when the process ended first."""
        line = self.proc.stdout.readline()  # the server prints one line, or ends
        m = re.search(r"http://([0-9.]+):([0-9]+)", line)
        if not m:
            self.proc.wait(timeout)
            return None
        self.host, self.port = m.group(1), int(m.group(2))
        return self.port

    def stderr(self):
        return open(self.log).read()

    def stop(self, timeout=60):
        """SIGTERM; the exit status (None if it did not end within `timeout` s)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def request(port, raw, timeout=10, half_close=False):
    """Sends raw bytes, reads until the server closes: (status, headers text, body bytes); status 0
    when nothing came back in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 ([0-9]{3})", head)
    return (int(m.group(1)) if m else 0), head.decode("latin-1"), body


def http(port, method, path, body=None, timeout=10, half_close=False):
    """One request with Connection: close; (status, parsed JSON or raw body)."""
    data = b"" if body is None else json.dumps(body).encode()
    raw = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data
    status, head, payload = request(port, raw, timeout, half_close)
    if "chunked" in head.lower():
        payload = dechunk(payload)
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload


def dechunk(b):
    out = b""
    while b:
        size, _, rest = b.partition(b"\r\n")
        n = int(size.split(b";")[0] or b"0", 16)
        if n == 0:
            break
        out += rest[:n]
        b = rest[n + 2:]
    return out


def stream_text(port, body, timeout=30):
    """A streamed completion's text, from its server-sent events."""
    status, payload = http(port, "POST", "/v1/completions", dict(body, stream=True), timeout)
    if status != 200:
        return None
    text = ""
    for line in payload.decode().split("\n"):
        if line.startswith("data: {"):
            text += "".join(c["text"] for c in json.loads(line[6:])["choices"])
    return text


if __name__ == "__main__":
    sys.exit("a module for the serve tests")
