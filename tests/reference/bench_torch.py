"""PyTorch benchmark peer for the C++ zaya training step (forward + backward, fp32, CPU).

Usage:
    /usr/bin/python3 tests/reference/bench_torch.py --model DIR --batch B --seq S \
        --steps K --warmup W --threads T

DIR holds config.json + model.safetensors (same format as the C++ side writes). Tokens are random
(torch.manual_seed(0)). Each step: clear grads, forward (logits + mean next-token CE loss), backward.
The reference forward is vectorised over tokens (experts gather their tokens with index ops, the
"sorted" dispatch; attention is batched matmuls with a causal mask), so this is a fair PyTorch peer,
not a per-token loop.
Prints one JSON line:
    {"peer": "pytorch", "torch_version": ..., "blas": <BLAS library mapped into this process>,
     "openblas": true/false, "tokens_per_s": ..., "step_ms": ..., ...}
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zaya_torch import load_model  # noqa: E402


def loaded_blas():
    """Paths of BLAS libraries actually mapped into this process (from /proc/self/maps)."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                path = parts[5]
                base = os.path.basename(path).lower()
                if ("blas" in base or "mkl" in base) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    return libs


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer benchmark of a ZAYA1 training step")
    ap.add_argument("--model", required=True, help="model dir with config.json + model.safetensors")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args()
    if args.steps < 1 or args.batch < 1 or args.seq < 2:
        ap.error("need --steps >= 1, --batch >= 1, --seq >= 2")

    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    model.set_dispatch("sorted")  # the fast dispatch: the peer at its best
    torch.manual_seed(0)
    tokens = torch.randint(0, model.cfg.vocab_size, (args.batch, args.seq))

    def step():
        model.zero_grad(set_to_none=True)
        _, loss, _ = model(tokens)
        loss.backward()
        return loss

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    dt = time.perf_counter() - t0

    libs = loaded_blas()
    # prefer the library that really provides BLAS (openblas/libblas) over e.g. a libcblas shim
    blas = next((p for p in libs if "openblas" in os.path.basename(p).lower()), libs[0] if libs else None)
    print(json.dumps({
        "peer": "pytorch",
        "torch_version": torch.__version__,
        "blas": blas,
        "openblas": any("openblas" in os.path.basename(p).lower() for p in libs),
        "tokens_per_s": args.batch * args.seq * args.steps / dt,
        "step_ms": dt / args.steps * 1000.0,
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "warmup": args.warmup,
        "loss": float(loss.item()),
        "blas_libs": libs,
    }))


if __name__ == "__main__":
    main()
