"""PyTorch decode peer: greedy generation with the reference model (tests/reference/zaya_torch.py),
which has no cache, so every new token recomputes the forward over the whole sequence — what
decoding costs without CCA's cache. Same model, prompt length, new tokens and batch as
`zaya bench decode`.

Usage:
    /usr/bin/python3 bench/decode_torch.py --model DIR --batch B --prompt P --new-tokens N --threads T
Prints one JSON line: {"peer": "pytorch", "tokens_per_s": ..., "ttft_ms": ..., "openblas": ...}.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
from bench_torch import loaded_blas, openblas_kernels  # noqa: E402
from zaya_torch import load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer of zaya bench decode (no cache)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--prompt", type=int, required=True)
    ap.add_argument("--new-tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    model.set_dispatch("sorted")  # the fast dispatch: the peer at its best
    torch.manual_seed(0)
    seq = torch.randint(0, model.cfg.vocab_size, (args.batch, args.prompt))
    with torch.inference_mode():
        t0 = time.perf_counter()
        logits, _, _ = model(seq)
        seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        ttft = time.perf_counter() - t0
        t1 = time.perf_counter()
        for _ in range(args.new_tokens - 1):
            logits, _, _ = model(seq)
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        dt = time.perf_counter() - t1
    libs = loaded_blas()
    print(json.dumps({
        "peer": "pytorch (no cache: the whole sequence again for every token)",
        "torch_version": torch.__version__,
        "openblas": any("openblas" in os.path.basename(p).lower() for p in libs),
        "blas": next((p for p in libs if "openblas" in os.path.basename(p).lower()), None),
        "blas_kernels": openblas_kernels(libs),
        "batch": args.batch,
        "tokens_per_s": args.batch * (args.new_tokens - 1) / dt,
        "ttft_ms": ttft * 1e3,
        "threads": torch.get_num_threads(),
    }))


if __name__ == "__main__":
    main()
