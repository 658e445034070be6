"""CI test: hold the C++ zaya model to the independent PyTorch reference (zaya_torch.py).

Usage:
    /usr/bin/python3 tests/reference/compare_with_torch.py --zaya PATH_TO_ZAYA_BINARY \
        --config configs/tiny.json --seeds 1 2 3 --workdir DIR

For each seed N it runs
    ZAYA debug-dump --config CONFIG --seed N --out DIR/seedN
which must write
    DIR/seedN/model/config.json, DIR/seedN/model/model.safetensors   (random, non-trivial weights)
    DIR/seedN/outputs.safetensors holding
        tokens           I32 [B,S]
        logits           F32 [B,S,V]
        loss             F32 [1]
        routes.{i}       I32 [B*S]   for every MoE stage (global stage index i), token order b*S+s
        grad.{name}      F32         for every trained checkpoint tensor (not balancing_biases)
then loads the model into ZayaRef, runs forward+backward on the same tokens and checks:
    - routes identical, stage by stage;
    - the reference takes every route 0..X of every MoE stage at least once at a position that has a
      label (s < S-1; a route used only at the last position never reaches the loss, so its gradient
      check would be vacuous). Otherwise the seed fails as a test-design failure (coverage not reached);
    - logits, loss and every parameter gradient judged against a float64 run of the reference:
      error(zaya) <= 20 x max(error(fp32 reference), 1e-6), see fp64_judge.py;
    - the gradient names are exactly the checkpoint's trained tensors.
Prints one line per seed, then `compare_with_torch: N passed, M failed` (N, M count seeds);
exits non-zero if any seed failed.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp64_judge import Judge  # noqa: E402
from safetensors_np import read_safetensors  # noqa: E402
from zaya_torch import missing_routes  # noqa: E402


class SeedFailure(Exception):
    pass


def run_seed(args, seed):
    """Returns (summary line, list of failure messages). Raises SeedFailure for fatal problems."""
    out_dir = os.path.join(args.workdir, f"seed{seed}")
    cmd = [args.zaya, "debug-dump", "--config", args.config, "--seed", str(seed), "--out", out_dir,
           "--force"]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.timeout)
    except FileNotFoundError:
        raise SeedFailure(f"cannot run {args.zaya!r} (not found)")
    except subprocess.TimeoutExpired:
        raise SeedFailure(f"`{' '.join(cmd)}` timed out after {args.timeout} s")
    if proc.returncode != 0:
        tail = proc.stdout.decode("utf-8", "replace")[-2000:]
        raise SeedFailure(f"`{' '.join(cmd)}` exited with status {proc.returncode}:\n{tail}")

    model_dir = os.path.join(out_dir, "model")
    for p in [os.path.join(model_dir, "config.json"), os.path.join(model_dir, "model.safetensors"),
              os.path.join(out_dir, "outputs.safetensors")]:
        if not os.path.isfile(p):
            raise SeedFailure(f"debug-dump did not write {p}")

    ckpt = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    outs = read_safetensors(os.path.join(out_dir, "outputs.safetensors"))
    for key in ["tokens", "logits", "loss"]:
        if key not in outs:
            raise SeedFailure(f"outputs.safetensors lacks tensor {key!r}")

    fails = []
    tokens_np = outs["tokens"]
    if tokens_np.ndim != 2 or tokens_np.shape[1] < 2:
        raise SeedFailure(f"tokens has shape {tokens_np.shape}, expected [B,S] with S >= 2")
    if tokens_np.min() < 0:
        raise SeedFailure("negative token ids")
    tokens = torch.from_numpy(tokens_np.astype(np.int64))
    B, S = tokens.shape

    # ---- reference forward + backward, in fp32 and in float64
    try:
        judge = Judge(model_dir, tokens)
    except Exception as e:  # noqa: BLE001 - any load problem is a failure of the dump
        raise SeedFailure(f"reference cannot load or run {model_dir}: {e}")
    model = judge.model
    routes = [torch.from_numpy(r) for r in judge.r32.routes]
    fails += judge.route_flips()

    # ---- routes: identical, and coverage reached by the reference
    route_keys = {f"routes.{i}" for i in model.moe_stage_indices}
    extra = sorted(k for k in outs if k.startswith("routes.") and k not in route_keys)
    if extra:
        fails.append(f"outputs has routes for non-MoE stages: {extra}")
    for i, rt in zip(model.moe_stage_indices, routes):
        key = f"routes.{i}"
        n_routes = model.model.layers[i].zaya_block.n_routes
        miss = missing_routes(rt, n_routes, S)
        if miss:
            fails.append(f"coverage was not reached for seed {seed}: MoE stage {i} never takes route(s) {miss}"
                         f" at a labelled position (test-design failure: retune the debug-dump weights/biases)")
        if key not in outs:
            fails.append(f"outputs.safetensors lacks {key}")
            continue
        got = outs[key].reshape(-1).astype(np.int64)
        ref = rt.numpy()
        if got.shape != ref.shape:
            fails.append(f"{key}: shape {outs[key].shape}, expected [{B * S}]")
        elif not np.array_equal(got, ref):
            n = int((got != ref).sum())
            first = int(np.nonzero(got != ref)[0][0])
            fails.append(f"{key}: {n} of {ref.size} route choices differ (first at token {first}:"
                         f" zaya {got[first]}, reference {ref[first]})")

    # ---- logits and loss
    r32, r64 = judge.r32, judge.r64
    e_logits = judge.check("logits", outs["logits"], r32.logits, r64.logits, fails)
    if outs["loss"].size != 1:
        fails.append(f"loss: expected 1 element, got shape {outs['loss'].shape}")
    e_loss = judge.check("loss", np.asarray(outs["loss"]).reshape(-1)[:1], r32.loss, r64.loss, fails)

    # ---- gradients: exactly one per trained checkpoint tensor
    trained = {n for n in ckpt if n not in model.buffers_by_name and n != "lm_head.weight"}
    worst_g, worst_name = judge.check_grads(trained, outs, fails)

    status = "PASS" if not fails else "FAIL"
    line = (f"seed {seed}: {status}  errors vs float64: logits {e_logits:.2e}  loss {e_loss:.2e}  worst grad"
            f" {worst_g:.2e} ({worst_name}); worst ratio to the fp32 reference's {judge.worst_ratio:.1f}"
            f"  B={B} S={S} moe_stages={len(routes)}")
    return line, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zaya", required=True, help="path of the zaya binary")
    ap.add_argument("--config", required=True, help="model config passed to `zaya debug-dump`")
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--workdir", required=True, help="directory for the dumps (DIR/seedN)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per debug-dump run")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the reference")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.workdir, exist_ok=True)

    passed = failed = 0
    for seed in args.seeds:
        try:
            line, fails = run_seed(args, seed)
        except SeedFailure as e:
            line, fails = f"seed {seed}: FAIL  (no comparison)", [str(e)]
        except Exception as e:  # noqa: BLE001 - e.g. a malformed outputs file; report it, keep counting
            import traceback
            line, fails = f"seed {seed}: FAIL  (error)", [f"{type(e).__name__}: {e}\n{traceback.format_exc()}"]
        print(line, flush=True)
        for f in fails:
            print(f"  seed {seed}: {f}", flush=True)
        if fails:
            failed += 1
        else:
            passed += 1
    print(f"compare_with_torch: {passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
