"""CI test: `zaya score` against the independent PyTorch reference (zaya_torch.py).

Usage:
    /usr/bin/python3 tests/reference/score_vs_torch.py --zaya PATH_TO_ZAYA_BINARY \
        --config configs/tiny.json --seeds 1 2 --workdir DIR

For each seed N it writes a random non-trivial tiny model whose routes are all taken
(`zaya debug-dump --seed N`, which also picks the tokens), saves those tokens [B,S] as a JSON list of
lists, runs
    zaya score --model DIR/seedN/model --tokens DIR/seedN/tokens.json --out DIR/seedN/score.safetensors --grads
and checks its output against the reference run on the same weights and tokens:
    - logits [B,S,V], loss, log_probs [B,S-1] and every grad.<name> judged against a float64 run of
      the reference: error(zaya) <= 20 x max(error(fp32 reference), 1e-6) (fp64_judge.py), and
      exactly one grad per trained tensor of the model file (none for the balancing_biases buffers);
    - the one-line JSON summary on stdout: tokens = B*S, loss = the file's loss, perplexity = exp(loss);
    - the reference takes every route of every MoE stage at a labelled position (else the gradient
      check would be vacuous for some expert: reported as a test-design failure).
Prints one line per seed and exits non-zero if any seed failed.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp64_judge import Judge  # noqa: E402
from safetensors_np import read_safetensors  # noqa: E402
from seed_runs import check_seeds, run  # noqa: E402
from zaya_torch import missing_routes  # noqa: E402


def check_seed(args, seed):
    """Returns (summary line, list of failures)."""
    work = os.path.join(args.workdir, f"seed{seed}")
    run([args.zaya, "debug-dump", "--config", args.config, "--seed", str(seed), "--out", work, "--force"],
        args.timeout)
    model_dir = os.path.join(work, "model")
    tokens_np = read_safetensors(os.path.join(work, "outputs.safetensors"))["tokens"]
    tokens_path = os.path.join(work, "tokens.json")
    with open(tokens_path, "w") as f:
        json.dump(tokens_np.astype(int).tolist(), f)
    out_path = os.path.join(work, "score.safetensors")
    stdout = run([args.zaya, "score", "--model", model_dir, "--tokens", tokens_path, "--out", out_path,
                  "--grads"], args.timeout)
    got = read_safetensors(out_path)
    fails = []

    # ---- reference on the same weights and tokens, in fp32 and in float64
    tokens = torch.from_numpy(tokens_np.astype(np.int64))
    B, S = tokens.shape
    judge = Judge(model_dir, tokens)
    model, r32, r64 = judge.model, judge.r32, judge.r64
    routes = [torch.from_numpy(r) for r in r32.routes]
    fails += judge.route_flips()
    for i, rt in zip(model.moe_stage_indices, routes):
        miss = missing_routes(rt, model.model.layers[i].zaya_block.n_routes, S)
        if miss:
            fails.append(f"test design: MoE stage {i} never takes route(s) {miss} at a labelled position")

    # ---- outputs
    for key, shape in [("logits", (B, S, model.cfg.vocab_size)), ("log_probs", (B, S - 1)), ("loss", ())]:
        if key not in got:
            fails.append(f"score output lacks {key!r}")
        elif got[key].shape != shape:
            fails.append(f"{key}: shape {got[key].shape}, expected {shape}")
    if fails:
        return f"seed {seed}: FAIL", fails
    e_logits = judge.check("logits", got["logits"], r32.logits, r64.logits, fails)
    e_loss = judge.check("loss", got["loss"].reshape(1), r32.loss, r64.loss, fails)
    e_lp = judge.check("log_probs", got["log_probs"], r32.log_probs, r64.log_probs, fails)

    # every trained tensor of the model file (the balancing_biases are buffers, not in params)
    worst, worst_name = judge.check_grads(set(model.params), got, fails)

    # ---- the summary line
    try:
        summary = json.loads(stdout.strip().splitlines()[-1])
        file_loss = float(got["loss"].reshape(-1)[0])
        if summary["tokens"] != B * S:
            fails.append(f"summary tokens {summary['tokens']}, expected {B * S}")
        if abs(summary["loss"] - file_loss) > 1e-6 * abs(file_loss):
            fails.append(f"summary loss {summary['loss']} differs from the file's {file_loss}")
        if abs(summary["perplexity"] - math.exp(file_loss)) > 1e-9 * math.exp(file_loss):
            fails.append(f"summary perplexity {summary['perplexity']} is not exp(loss)")
    except (ValueError, KeyError, IndexError) as e:
        fails.append(f"stdout is not the JSON summary line: {e!r}: {stdout[-300:]!r}")

    status = "PASS" if not fails else "FAIL"
    return (f"seed {seed}: {status}  errors vs float64: logits {e_logits:.2e}  loss {e_loss:.2e}  log_probs"
            f" {e_lp:.2e}  worst grad {worst:.2e} ({worst_name}); worst ratio to the fp32 reference's"
            f" {judge.worst_ratio:.1f}  B={B} S={S}"), fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zaya", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.workdir, exist_ok=True)
    check_seeds("score_vs_torch", args.seeds, lambda seed: check_seed(args, seed))


if __name__ == "__main__":
    main()
