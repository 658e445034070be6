"""A real Prometheus (Debian's `prometheus`) scrapes zaya serve under load, zaya train while it
runs (2 ranks under mpirun where this build has MPI, each serving its own series) and zaya
health-exporter over a stand-in NVML, and its query API returns what they export (issue 42,
points 2 and 4): the training step, tokens/s, MFU and the routers' figures per rank; the requests
by finish reason and HTTP status, the tokens in and out, and the latency histograms; the GPUs'
temperature and ECC counts. promtool checks the texts. Skipped (exit 77) where the package is
absent.
Usage: prometheus.py ZAYA SRC WORK [MPIRUN]"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Checks, Server, fixtures, http  # noqa: E402

zaya, src, work = sys.argv[1:4]
mpirun = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
ranks = 2 if mpirun else 1
fake_nvml = os.path.join(os.path.dirname(zaya), "tests", "unit", "libzaya_test_fake_nvml.so")
if not shutil.which("prometheus") or not shutil.which("promtool"):
    print("prometheus is not installed (scripts/setup.sh installs it): not run")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
check = Checks()
fixtures(zaya, src, work)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


# zaya train on a slice of Brown, long enough to be scraped while it runs.
brown = f"{work}/brown"  # the script starts its directory afresh
subprocess.run(["bash", f"{src}/tests/train/prepare_brown_slice.sh", zaya, src, brown, "512"],
               check=True, stdout=subprocess.DEVNULL)
config = json.load(open(f"{src}/configs/tiny.json"))
config["model"].update(vocab_size=512, max_seq_len=32)
config["data"] = {"dir": f"{brown}/data", "sources": ["brown"],
                  "phases": [{"name": "a", "tokens": 32 * 8 * 100000, "seq_len": 32,
                              "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]}
config["train"] = {"seed": 1, "micro_batch": 8 // ranks, "global_batch": 8, "eval_every": 100000,
                   "log_every": 1000, "out_dir": f"{work}/run",
                   "optim": {"lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 2, "schedule": "cosine"}}
json.dump(config, open(f"{work}/train.json", "w"))
launcher = [mpirun, "-np", "2", "--oversubscribe"] if mpirun else []
train = subprocess.Popen(launcher + [zaya, "--threads", "1", "train", "--config",
                                     f"{work}/train.json", "--no-progress", "--metrics-port", "0",
                                     "--peak-tflops", "0.01"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
train_ports = {}
for line in train.stderr:
    m = re.search(r"metrics: http://127\.0\.0\.1:([0-9]+)/metrics \(rank ([0-9]+)\)", line)
    if m:
        train_ports[int(m.group(2))] = int(m.group(1))
        if len(train_ports) == ranks:
            break
check(sorted(train_ports) == list(range(ranks)),
      f"zaya train --metrics-port 0 says where, on each of {ranks} ranks ({train_ports})")
train_port = train_ports.get(0)

# This machine's "GPUs" through a stand-in NVML, served by zaya health-exporter.
gpu_state = f"{work}/nvml_state"
open(gpu_state, "w").write("gpus 2\ntemperature 0 63\ntemperature 1 58\necc_uncorrected 1 2\n")
exporter = subprocess.Popen([zaya, "health-exporter", "--gpu", f"nvml:{fake_nvml}", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, ZAYA_FAKE_NVML_STATE=gpu_state))
m = re.search(r"at http://127\.0\.0\.1:([0-9]+)/metrics", exporter.stdout.readline())
exporter_port = int(m.group(1)) if m else None
check(exporter_port is not None, f"zaya health-exporter says where ({exporter_port})")

server = Server(zaya, work, f"{work}/m512/model", "--max-batch", "4")
prom_port = free_port()
open(f"{work}/prometheus.yml", "w").write(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: zaya_train
    static_configs: [{{targets: {json.dumps([f"127.0.0.1:{p}" for p in train_ports.values()])}}}]
  - job_name: zaya_gpu
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: zaya_serve
    static_configs: [{{targets: ["127.0.0.1:{server.port}"]}}]
""")
prom = subprocess.Popen(["prometheus", f"--config.file={work}/prometheus.yml",
                         f"--storage.tsdb.path={work}/tsdb",
                         f"--web.listen-address=127.0.0.1:{prom_port}"],
                        stdout=subprocess.DEVNULL, stderr=open(f"{work}/prometheus.log", "w"))
try:
    for _ in range(100):
        try:
            if "Ready" in get(f"http://127.0.0.1:{prom_port}/-/ready", 2):
                break
        except OSError:
            time.sleep(0.2)
    # Load on the server: 6 completions (one streamed), one unknown route.
    for i in range(5):
        status, _ = http(server.port, "POST", "/v1/completions",
                         {"model": "model", "prompt": "The jury said", "max_tokens": 8, "seed": i},
                         timeout=60)
        check(status == 200, f"completion {i}: {status}")
    status, _ = http(server.port, "POST", "/v1/completions",
                     {"model": "model", "prompt": "The", "max_tokens": 6, "stream": True, "seed": 9},
                     timeout=60)
    check(status == 200, f"a streamed completion: {status}")
    check(http(server.port, "GET", "/nowhere")[0] == 404, "an unknown route: 404")

    def query(q):
        url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        r = json.loads(get(url))
        return [(s["metric"], float(s["value"][1])) for s in r["data"]["result"]]

    def wait_for(q, ok, what, timeout=60):
        deadline = time.monotonic() + timeout
        got = []
        while time.monotonic() < deadline:
            got = query(q)
            if got and ok(got):
                break
            time.sleep(0.5)
        check(bool(got) and ok(got), f"{what}: {q} = {[v for _, v in got]}")

    wait_for("zaya_train_step", lambda g: len(g) == ranks and all(v >= 3 for _, v in g),
             f"the training step, on each of {ranks} ranks")
    wait_for("count by (rank) (zaya_train_step_seconds{part=\"backward\"} > 0)",
             lambda g: sorted(m["rank"] for m, _ in g) == [str(r) for r in range(ranks)],
             "each rank's own backward time")
    wait_for("zaya_gpu_temperature_celsius", lambda g: sorted(v for _, v in g) == [58, 63],
             "the GPUs' temperatures through zaya health-exporter")
    wait_for("zaya_gpu_ecc_errors_total{type=\"uncorrected\"}",
             lambda g: sorted(v for _, v in g) == [0, 2], "the GPUs' uncorrected ECC counts")
    wait_for("zaya_train_tokens_per_second", lambda g: g[0][1] > 0, "tokens/s")
    wait_for("zaya_train_mfu", lambda g: 0 < g[0][1], "MFU")
    wait_for("zaya_train_step_seconds{part=\"forward\"}", lambda g: g[0][1] > 0,
             "the step's forward time")
    wait_for("count(zaya_train_router_token_entropy)", lambda g: g[0][1] == 3 * ranks,
             "the routers' per-token entropy of each of the 3 MoE stages, on each rank")
    wait_for("sum(vllm:request_success_total)", lambda g: g[0][1] == 6, "completions finished")
    wait_for("zaya_http_requests_total{status=\"200\"}", lambda g: g[0][1] >= 6, "HTTP 200s")
    wait_for("zaya_http_requests_total{status=\"404\"}", lambda g: g[0][1] == 1, "HTTP 404s")
    wait_for("vllm:generation_tokens_total", lambda g: g[0][1] > 0, "tokens generated")
    wait_for("vllm:prompt_tokens_total", lambda g: g[0][1] > 0, "prompt tokens")
    wait_for("vllm:time_to_first_token_seconds_count", lambda g: g[0][1] == 6,
             "a time to first token per completion")
    wait_for("up", lambda g: len(g) == ranks + 2 and all(v == 1 for _, v in g),
             "every target up")
    # promtool parses the text and lints its names; the one lint allowed is the colon of vLLM's
    # names (kept so that dashboards made for vLLM read zaya), which promtool reserves for
    # recording rules.
    for name, port in (("zaya train", train_port), ("zaya serve", server.port),
                       ("zaya health-exporter", exporter_port)):
        text = get(f"http://127.0.0.1:{port}/metrics")
        r = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                           capture_output=True)
        problems = [l for l in (r.stdout + r.stderr).splitlines()
                    if l.strip() and not l.endswith("metric names should not contain ':'")]
        check(not problems and (r.returncode == 0 or name == "zaya serve"),
              f"promtool check metrics parses {name}'s text, no lint but vLLM's colons {problems}")
finally:
    prom.terminate()
    exporter.terminate()
    train.send_signal(signal.SIGINT)
    try:
        train.wait(60)
    except subprocess.TimeoutExpired:
        train.kill()
    server.stop()
print(f"prometheus: {check.fails} failed")
sys.exit(1 if check.fails else 0)
