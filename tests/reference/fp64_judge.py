"""Judging zaya's fp32 numbers against the truth, not against another fp32 program.

zaya and the PyTorch reference both compute in fp32, with different summation orders, so their
difference is the sum of two rounding errors, and on some machines (OpenBLAS's Haswell kernels on
AVX-512 EPYC) the reference's own error alone exceeded a fixed limit. So the reference also runs in
float64 on the same weights and tokens (the truth, to ~1e-15), and each tensor passes when

    error(zaya vs float64) <= K * max(error(fp32 reference vs float64), FLOOR)

with K = 20 and FLOOR = 1e-6: zaya may be at most twenty times less accurate than PyTorch's fp32 on
any tensor, and a tensor PyTorch happens to round almost exactly is held to 2e-5. Every error is
max|a - b| / max|b|. A gradient bug gives an error near 1, far above any such limit.

Why K = 20: on the tiny config (seeds 1-5 of compare_with_torch.py, with and without
OPENBLAS_CORETYPE=Haswell) zaya's worst error against float64 is 2.7e-5, on the router's gradients,
whose softmax backward cancels (PyTorch's fp32 error there is up to 1.4e-5 too), and its worst ratio
to PyTorch's error on the same tensor is 8.5 (a router gradient PyTorch rounded to 2.6e-6). K = 20
leaves twice that for other machines' kernels. Route choices must be the same in float32 and
float64 (a near-tie that flips would make the comparison meaningless: reported, not hidden).
"""

import numpy as np
import torch
import torch.nn.functional as F

from zaya_torch import load_model

K = 20.0
FLOOR = 1e-6


def rel_err(a, b):
    """max|a - b| / max(max|b|, 1e-12), a = value under test, b = truth (both as float64 numpy)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    diff = np.abs(a - b)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    return float(diff.max() / max(float(np.abs(b).max()), 1e-12))


class Run:
    """One reference forward + backward on `tokens` ([B,S] int64) in `dtype`."""

    def __init__(self, model_dir, tokens, dtype):
        self.model = load_model(model_dir, dtype=dtype)
        self.model.zero_grad(set_to_none=True)
        logits, loss, routes = self.model(tokens)
        loss.backward()
        self.logits = logits.detach().numpy()
        self.loss = np.array([loss.item()])
        lp = F.log_softmax(logits[:, :-1].detach().double(), dim=-1)
        self.log_probs = lp.gather(-1, tokens[:, 1:, None])[..., 0].numpy()
        self.routes = [r.numpy() for r in routes]
        self.grads = {}
        for n, p in self.model.params.items():
            self.grads[n] = np.zeros(tuple(p.shape)) if p.grad is None else p.grad.numpy()


class Judge:
    """Holds the fp32 and float64 reference runs and checks zaya's tensors against them."""

    def __init__(self, model_dir, tokens):
        self.r32 = Run(model_dir, tokens, torch.float32)
        self.r64 = Run(model_dir, tokens, torch.float64)
        self.model = self.r32.model
        self.worst_ratio = 0.0  # max over checked tensors of error(zaya) / max(error(ref32), FLOOR)

    def route_flips(self):
        """Messages for MoE stages whose route choices differ between float32 and float64."""
        out = []
        for i, a, b in zip(self.model.moe_stage_indices, self.r32.routes, self.r64.routes):
            if not np.array_equal(a, b):
                out.append(f"MoE stage {i}: {int((a != b).sum())} route choices differ between the fp32 and"
                           f" float64 reference (near-tie): this seed cannot judge gradients")
        return out

    def check(self, name, got, ref32, ref64, fails):
        """Appends a failure when zaya's `got` is too far from the float64 truth. Returns its error."""
        got = np.asarray(got)
        if got.shape != np.asarray(ref64).shape:
            fails.append(f"{name}: shape {got.shape}, expected {np.asarray(ref64).shape}")
            return float("inf")
        e_zaya, e_ref = rel_err(got, ref64), rel_err(ref32, ref64)
        limit = K * max(e_ref, FLOOR)
        self.worst_ratio = max(self.worst_ratio, e_zaya / max(e_ref, FLOOR))
        if not e_zaya <= limit:
            fails.append(f"{name}: error vs float64 {e_zaya:.3e} > {K:g} x max(fp32 reference's {e_ref:.3e},"
                         f" {FLOOR:g}) = {limit:.3e}")
        return e_zaya

    def check_grads(self, trained, outs, fails):
        """Checks outs["grad.<name>"] for exactly the names in `trained`. Returns (worst error, its name)."""
        grads = {k[len("grad."):] for k in outs if k.startswith("grad.")}
        for n in sorted(trained - grads):
            fails.append(f"grad.{n} missing from outputs (checkpoint tensor without a gradient)")
        for n in sorted(grads - trained):
            fails.append(f"grad.{n} in outputs has no trained checkpoint tensor of that name")
        worst, worst_name = 0.0, "-"
        for n in sorted(trained & grads):
            e = self.check(f"grad.{n}", outs["grad." + n], self.r32.grads[n], self.r64.grads[n], fails)
            if e >= worst:
                worst, worst_name = e, n
        return worst, worst_name
