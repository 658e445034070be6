#!/usr/bin/env bash
# Memory and throughput of long-context training: the demo model (configs/small.json with
# max_seq_len 32768) on the Brown corpus (data/, as scripts/main.sh prepares it), one sequence
# per micro-batch and 32,768 tokens per optimizer step at every length, so the activations are
# one sequence's. For each length T in LENGTHS and each context parallel in CPS, two optimizer
# steps of `zaya train` (the LM head and loss in blocks); prints each rank's peak resident memory
# (summary.json) and the second step's tokens/s, then fits peak memory = a + b·T per context
# parallel and prints the slope b (bytes per token) and the worst relative deviation from the
# line. RECOMPUTE=1 adds runs with train.recompute at the longest length.
# Usage: bench/long_context_memory.sh [WORK]   (env: LENGTHS, CPS, RECOMPUTE, THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-/tmp/zaya-long-memory}
LENGTHS=${LENGTHS:-"1024 2048 4096 8192 16384 32768"}
CPS=${CPS:-"1 2"}
RECOMPUTE=${RECOMPUTE:-1}
ZAYA=./build/zaya
[[ -x $ZAYA ]] || { echo "build zaya first (cmake --preset default && cmake --build build)"; exit 1; }
[[ -f data/brown/index.json ]] || { echo "data/brown is missing: run the data steps of scripts/main.sh"; exit 1; }
mkdir -p "$WORK"
STEP_TOKENS=32768
config() {  # config T RECOMPUTE > file
  python3 - "$1" "$2" "$STEP_TOKENS" "$PWD/data" <<'PY'
import json, sys
T, recompute, step_tokens, data = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
c = json.load(open("configs/small.json"))
c.pop("description", None)
c["model"]["max_seq_len"] = 32768
c["data"]["dir"] = data
c["data"]["phases"] = [{"name": f"T{T}", "tokens": 2 * step_tokens, "seq_len": T,
                        "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]
t = c["train"]
t.update({"micro_batch": 1, "global_batch": step_tokens // T, "eval_every": 1000000,
          "eval_windows": 1, "log_every": 1, "sample_tokens": 0, "checkpoint_every": 0,
          "lm_head_chunk_tokens": 2048, "lm_head_chunk_vocab": 4096, "recompute": recompute})
t["optim"]["warmup_steps"] = 1
t["optim"].pop("batch_ramp", None)
print(json.dumps(c, indent=1))
PY
}
results=$WORK/results.jsonl
: > "$results"
run() {  # run T CP RECOMPUTE
  local T=$1 cp=$2 rc=$3 name="T$1-cp$2-r$3"
  config "$T" "$rc" > "$WORK/$name.json"
  rm -rf "$WORK/$name"
  local launch=() threads=${THREADS:-2}
  if ((cp > 1)); then
    launch=(mpirun -np "$cp" --oversubscribe --allow-run-as-root)
    threads=$(( ${THREADS:-2} / cp > 0 ? ${THREADS:-2} / cp : 1 ))
  fi
  "${launch[@]}" "$ZAYA" --threads "$threads" train --no-progress --config "$WORK/$name.json" \
    --out "$WORK/$name" --context-parallel "$cp" > "$WORK/$name.log" 2>&1 \
    || { echo "failed: see $WORK/$name.log"; tail -5 "$WORK/$name.log"; exit 1; }
  python3 - "$WORK/$name" "$T" "$cp" "$rc" >> "$results" <<'PY'
import json, sys
d, T, cp, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(d + "/summary.json"))
m = [json.loads(l) for l in open(d + "/metrics.jsonl")]
print(json.dumps({"T": T, "cp": cp, "recompute": rc, "peak_rss": s["peak_rss_bytes_per_rank"],
                  "tokens_per_s": m[-1]["tokens_per_s"], "loss": m[-1]["loss"]}))
PY
  tail -1 "$results"
}
for cp in $CPS; do for T in $LENGTHS; do run "$T" "$cp" 0; done; done
if [[ $RECOMPUTE == 1 ]]; then
  longest=$(echo $LENGTHS | tr ' ' '\n' | sort -n | tail -1)
  for cp in $CPS; do run "$longest" "$cp" 1; done
fi
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\n{'T':>6} {'cp':>3} {'recompute':>9} {'peak RSS per rank (MiB)':>26} {'tokens/s':>9}")
for r in rows:
    rss = " ".join(f"{x / 2**20:.0f}" for x in r["peak_rss"])
    print(f"{r['T']:>6} {r['cp']:>3} {'yes' if r['recompute'] else 'no':>9} {rss:>26} "
          f"{r['tokens_per_s']:>9.0f}")
for cp in sorted({r["cp"] for r in rows}):
    pts = [(r["T"], max(r["peak_rss"])) for r in rows if r["cp"] == cp and not r["recompute"]]
    if len(pts) < 2:
        continue
    n = len(pts); mx = sum(t for t, _ in pts) / n; my = sum(m for _, m in pts) / n
    b = sum((t - mx) * (m - my) for t, m in pts) / sum((t - mx) ** 2 for t, _ in pts)
    a = my - b * mx
    dev = max(abs(m - (a + b * t)) / m for t, m in pts)
    print(f"context parallel {cp}: peak RSS per rank = {a / 2**20:.0f} MiB + {b / 1024:.1f} KiB x T"
          f" (worst deviation from the line {100 * dev:.1f} %)")
PY
