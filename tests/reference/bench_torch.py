"""PyTorch benchmark peer for the C++ zaya training step (forward + backward): fp32 on the CPU,
or on a GPU in fp32 or bf16 autocast, eager or torch.compile.

Usage:
    /usr/bin/python3 tests/reference/bench_torch.py --model DIR --batch B --seq S \
        --steps K --warmup W --threads T [--device cuda [--bf16] [--compile] [--attention sdpa]]

DIR holds config.json + model.safetensors (same format as the C++ side writes). Tokens are random
(torch.manual_seed(0)). Each step: clear grads, forward (logits + mean next-token CE loss), backward.
The reference forward is vectorised over tokens (experts gather their tokens with index ops, the
"sorted" dispatch; attention is batched matmuls with a causal mask), so this is a fair PyTorch peer,
not a per-token loop.
On the GPU the peer runs at its best with --attention sdpa (PyTorch's fused flash attention
instead of the reference's explicit score matrix; torch >= 2.0) and --bf16 (torch.autocast: bf16
matrix products over fp32 master weights, the mixed precision zaya's --precision bf16 is), and
each timed step ends with torch.cuda.synchronize().
Prints one JSON line:
    {"peer": "pytorch", "torch_version": ..., "blas": <BLAS library mapped into this process>,
     "openblas": true/false, "tokens_per_s": ..., "step_ms": ..., ...}
"""

import argparse
import json
import os
import contextlib
import ctypes
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


def openblas_kernels(libs):
    """The kernels the OpenBLAS mapped into this process runs (openblas_get_corename), or None."""
    for path in libs:
        if "libopenblas" in os.path.basename(path).lower():
            try:
                corename = ctypes.CDLL(path).openblas_get_corename
            except (OSError, AttributeError):
                continue
            corename.restype = ctypes.c_char_p
            return corename().decode()
    return None


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer benchmark of a ZAYA1 training step")
    ap.add_argument("--model", required=True, help="model dir with config.json + model.safetensors")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (cuda only)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch >= 2.0)")
    ap.add_argument("--attention", default="matmul", choices=["matmul", "sdpa"],
                    help="the reference's explicit scores, or F.scaled_dot_product_attention")
    args = ap.parse_args()
    if args.steps < 1 or args.batch < 1 or args.seq < 2:
        ap.error("need --steps >= 1, --batch >= 1, --seq >= 2")
    if args.bf16 and args.device != "cuda":
        ap.error("--bf16 needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch.cuda.is_available() is False")
    if args.compile and not hasattr(torch, "compile"):
        ap.error(f"--compile needs torch >= 2.0, this is {torch.__version__}")

    torch.set_num_threads(args.threads)
    model = load_model(args.model).to(args.device)
    model.set_dispatch("sorted")  # the fast dispatch: the peer at its best
    model.set_attention(args.attention)
    torch.manual_seed(0)
    tokens = torch.randint(0, model.cfg.vocab_size, (args.batch, args.seq)).to(args.device)
    forward = torch.compile(model) if args.compile else model
    cuda = args.device == "cuda"

    def step():
        model.zero_grad(set_to_none=True)
        # Debian's CPU-only torch 1.13 asks CUDA about bf16 even for a disabled autocast.
        autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if args.bf16
                    else contextlib.nullcontext())
        with autocast:
            _, loss, _ = forward(tokens)
        loss.backward()
        return loss

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0

    libs = loaded_blas()
    # prefer the library that really provides BLAS (openblas/libblas) over e.g. a libcblas shim
    blas = next((p for p in libs if "openblas" in os.path.basename(p).lower()), libs[0] if libs else None)
    print(json.dumps({
        "peer": "pytorch",
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "bf16_autocast": args.bf16,
        "compile": args.compile,
        "attention": args.attention,
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "blas": blas,
        "openblas": any("openblas" in os.path.basename(p).lower() for p in libs),
        "blas_kernels": openblas_kernels(libs),
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
