"""PyTorch peer for `zaya eval --tasks`: the same task's choices scored as lm-evaluation-harness's
Hugging Face model scores them without a shared context: one forward per context + choice.

Usage: eval_torch.py --zaya ZAYA --model DIR --tokenizer TOK --task FILE.jsonl --threads T [--limit N]

The token ids come from lm-eval's split (tests/reference/eval_vs_torch.py: trailing spaces moved,
ids(context + continuation) minus ids(context)) with `zaya tokenizer encode`, before the clock
starts. Prints one JSON line: items, seconds, items_per_s, loglikelihoods (per item, per choice).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from eval_vs_torch import Encoder, doc_requests, encode_pair, enc_prefix_token  # noqa: E402
from zaya_torch import load_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in ("--zaya", "--model", "--tokenizer", "--task"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    docs = [json.loads(line) for line in open(args.task, encoding="utf-8") if line.strip()]
    docs = docs[: args.limit] if args.limit else docs
    enc, prefix = Encoder(args.zaya, args.tokenizer), enc_prefix_token(args.tokenizer)
    items = [[encode_pair(enc, prefix, c, k) for c, k in doc_requests("plain", d)[0]] for d in docs]
    model = load_model(args.model).eval()
    t0 = time.perf_counter()
    lls = []
    with torch.no_grad():
        for pairs in items:
            row = []
            for ctx, cont in pairs:
                logits = model(torch.tensor([ctx + cont]))[0][0]
                logp = F.log_softmax(logits[len(ctx) - 1: -1], dim=-1)
                row.append(float(logp.gather(1, torch.tensor(cont)[:, None]).sum()))
            lls.append(row)
    seconds = time.perf_counter() - t0
    print(json.dumps({"peer": "pytorch", "torch_version": torch.__version__, "items": len(items),
                      "seconds": seconds, "items_per_s": len(items) / seconds, "loglikelihoods": lls}))


if __name__ == "__main__":
    main()
