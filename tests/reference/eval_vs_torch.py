"""CI test: `zaya eval --tasks` against the independent PyTorch reference (zaya_torch.py).

Usage:
    /usr/bin/python3 tests/reference/eval_vs_torch.py --zaya PATH_TO_ZAYA --src SRC --workdir DIR \
        [--seeds 1 2 trained]

A BPE tokenizer trained on a slice of the Brown corpus, and for each seed the tiny model with random
weights (`zaya debug-dump`, vocabulary 512) with that tokenizer; the seed `trained` is the tiny
model trained for 40 steps on token shards of the same slice (`zaya train`, whose config's "eval"
section scores the same task files at its last step: those figures must equal lm-eval's metrics
on the reference's log-likelihoods too). Task files in every layout are made
from Brown sentences (contexts ending in spaces and newlines, an empty context, choices that start
mid-word so that they merge with the context's last token), then
    zaya eval --model M --tasks F1,F2,... --log-samples S.jsonl
is checked against this file's own restatement of lm-evaluation-harness's rules:
    - each layout's prompts (doc_to_text / doc_to_choice / doc_to_target, HellaSwag's preprocessing,
      Winogrande's partial scoring, LAMBADA's last word), the context/continuation split (trailing
      whitespace moved, ids(context + continuation) minus the leading ids(context), an empty
      context given the prefix token), tokenized by `zaya tokenizer encode`;
    - every choice's log-likelihood = the reference model's sum of continuation token
      log-probabilities, within 1e-5 relative, and is_greedy the same;
    - acc / acc_norm per item and per task, and their stderr, from a small Python restatement of
      lm-eval's metric code (numpy argmax, ties to the first; sample standard error).
Exits 77 (skipped) when the Brown corpus is missing.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_runs import check_seeds, run  # noqa: E402
from zaya_torch import load_model  # noqa: E402


# ---- task files from Brown sentences


def brown_sentences(path, n):
    text = open(path, encoding="utf-8").read(300000)
    out = []
    for s in re.split(r"(?<=[.!?])\s+", text):
        words = s.split()
        if 6 <= len(words) <= 14:
            out.append(" ".join(words))
        if len(out) == n:
            break
    return out


def make_tasks(sents, work):
    w = [s.split() for s in sents]
    tasks = {
        "plain": [
            {"context": " ".join(w[0][:4]) + " ", "choices": [" ".join(w[0][4:]), " ".join(w[1][4:])], "gold": 0},
            {"context": " ".join(w[2][:3]) + "\n\n", "choices": [w[2][3], w[3][3], w[4][3]], "gold": 2},
            {"context": "", "choices": [sents[5], sents[6]], "gold": 1},
            # choices that start mid-word: they merge with the context's last token
            {"context": " ".join(w[7][:5])[:-2], "choices": [" ".join(w[7][:5])[-2:] + " " + w[7][5],
                                                             "ing " + w[8][5]], "gold": 0},
        ],
        "hellaswag": [
            {"activity_label": "Brown", "ctx_a": " ".join(w[9][:4]), "ctx_b": w[9][4].upper() + " [title] x",
             "endings": [" ".join(w[9][5:]), " ".join(w[10][5:]) + " [step]", " ".join(w[11][5:]),
                         " ".join(w[12][5:])], "label": "0"},
            {"ctx": " ".join(w[13][:5]), "endings": [" ".join(w[13][5:]), " ".join(w[14][5:])], "label": 1},
        ],
        "arc": [
            {"question": sents[15], "choices": {"text": [w[16][0], w[17][0], w[18][0], w[19][0]],
                                                "label": ["A", "B", "C", "D"]}, "answerKey": "C"},
            {"question_stem": sents[20], "choices": {"text": [w[21][1], w[22][1]], "label": ["1", "2"]},
             "answerKey": "1"},
        ],
        "mmlu": [{"question": sents[23], "choices": w[24][:4], "answer": 3, "subject": "brown_corpus"}],
        "piqa": [{"goal": sents[25], "sol1": sents[26], "sol2": sents[27], "label": 1}],
        "winogrande": [{"sentence": " ".join(w[28][:3]) + " _ " + " ".join(w[28][4:]),
                        "option1": w[28][3], "option2": w[29][3], "answer": "1"}],
        "lambada": [{"text": sents[30]}, {"text": sents[31]}],
    }
    paths = []
    for name, docs in tasks.items():
        path = os.path.join(work, f"{name}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d) + "\n")
        paths.append(path)
    return tasks, paths


# ---- lm-eval's rules, restated


def hellaswag_preprocess(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def doc_requests(layout, doc):
    """(list of (context, continuation) per choice, the choices for acc_norm, gold)."""
    if layout == "plain":
        return [(doc["context"], " " + c) for c in doc["choices"]], doc["choices"], doc["gold"]
    if layout == "hellaswag":
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize() if "ctx_a" in doc else doc["ctx"]
        label = doc["activity_label"] + ": " if "activity_label" in doc else ""
        query = hellaswag_preprocess(label + ctx)
        choices = [hellaswag_preprocess(e) for e in doc["endings"]]
        return [(query, " " + c) for c in choices], choices, int(doc["label"])
    if layout == "arc":
        query = doc["question_stem"] if "question_stem" in doc else f"Question: {doc['question']}\nAnswer:"
        choices = doc["choices"]["text"]
        return [(query, " " + c) for c in choices], choices, doc["choices"]["label"].index(doc["answerKey"].lstrip())
    if layout == "mmlu":
        letters = "ABCD"[: len(doc["choices"])]
        query = doc["question"].strip() + "".join(f"\n{l}. {c}" for l, c in zip(letters, doc["choices"]))
        desc = f"The following are multiple choice questions (with answers) about {doc['subject'].replace('_', ' ')}.\n\n"
        return [(desc + query + "\nAnswer:", " " + l) for l in letters], list(letters), doc["answer"]
    if layout == "piqa":
        choices = [doc["sol1"], doc["sol2"]]
        return [(f"Question: {doc['goal']}\nAnswer:", " " + c) for c in choices], choices, doc["label"]
    if layout == "winogrande":
        idx = doc["sentence"].index("_")
        contexts = [doc["sentence"][:idx] + doc[o] for o in ("option1", "option2")]
        target = doc["sentence"][idx + 1:].strip()
        return [(c, " " + target) for c in contexts], contexts, {"1": 0, "2": 1}[doc["answer"]]
    if layout == "lambada":
        words = doc["text"].split(" ")
        return [(" ".join(words[:-1]), " " + words[-1])], [words[-1]], 0
    raise ValueError(layout)


class Encoder:
    def __init__(self, zaya, tokenizer):
        self.zaya, self.tokenizer, self.cache = zaya, tokenizer, {}

    def __call__(self, text):
        if text not in self.cache:
            out = run([self.zaya, "tokenizer", "encode", "--tokenizer", self.tokenizer, "--text", text, "--json"])
            self.cache[text] = json.loads(out)
        return self.cache[text]


def encode_pair(enc, prefix_token, context, continuation):
    if context == "":
        cont = enc(continuation)
        return ([prefix_token], cont) if cont[0] != prefix_token else (cont[:1], cont[1:])
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = enc(context + continuation)
    ctx = enc(context)
    return ctx, whole[len(ctx):]


def reference_loglikelihood(model, ctx, cont):
    tokens = torch.tensor([ctx + cont], dtype=torch.long)
    with torch.no_grad():
        logits = model(tokens)[0][0]
    logp = F.log_softmax(logits[len(ctx) - 1: -1].double(), dim=-1)
    target = torch.tensor(cont)
    ll = float(logp.gather(1, target[:, None]).sum())
    greedy = bool((logits[len(ctx) - 1: -1].argmax(-1) == target).all())
    return ll, greedy


def sample_stderr(xs):
    if len(xs) < 2:
        return "N/A"
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))


def check_task(name, docs, lls_got, samples, model, enc, prefix_token, fails, in_training=None):
    acc, acc_norm, worst = [], [], 0.0
    cloze = name == "lambada"
    for i, doc in enumerate(docs):
        reqs, choices, gold = doc_requests(name, doc)
        s = samples[i]
        want, greedy = zip(*[reference_loglikelihood(model, *encode_pair(enc, prefix_token, c, k)) for c, k in reqs])
        got = s["loglikelihoods"]
        for c, (g, w_) in enumerate(zip(got, want)):
            err = abs(g - w_) / max(abs(w_), 1e-30)
            worst = max(worst, err)
            if err > 1e-5:
                fails.append(f"{name} doc {i} choice {c}: loglikelihood {g!r}, reference {w_!r} (rel {err:.2e})")
        if list(greedy) != s["is_greedy"]:
            fails.append(f"{name} doc {i}: is_greedy {s['is_greedy']}, reference {list(greedy)}")
        if cloze:
            a = float(greedy[0])
        else:
            lls = np.array(want)
            a = 1.0 if int(np.argmax(lls)) == gold else 0.0
            an = 1.0 if int(np.argmax(lls / np.array([float(len(c)) for c in choices]))) == gold else 0.0
            acc_norm.append(an)
            if s["acc_norm"] != an:
                fails.append(f"{name} doc {i}: acc_norm {s['acc_norm']}, lm-eval's rule gives {an}")
        acc.append(a)
        if s["acc"] != a:
            fails.append(f"{name} doc {i}: acc {s['acc']}, lm-eval's rule gives {a}")
    res = lls_got["results"][name]
    if in_training is not None:  # the training run's last evaluation, on the same weights
        got = in_training.get(name, {})
        for k, v in (("acc", acc), ("acc_norm", acc_norm)):
            if v and abs(got.get(k, -1) - sum(v) / len(v)) > 1e-12:
                fails.append(f"{name}: in training {k} = {got.get(k)!r}, lm-eval's rule gives {sum(v) / len(v)!r}")
    expect = {"acc,none": sum(acc) / len(acc), "acc_stderr,none": sample_stderr(acc)}
    if not cloze:
        expect.update({"acc_norm,none": sum(acc_norm) / len(acc_norm), "acc_norm_stderr,none": sample_stderr(acc_norm)})
    for k, v in expect.items():
        if k not in res or (res[k] != v and (isinstance(v, str) or abs(res[k] - v) > 1e-12)):
            fails.append(f"{name}: {k} = {res.get(k)!r}, expected {v!r}")
    return worst


def train_model(args, work, tokenizer, paths):
    """The tiny model trained 40 steps on the Brown slice, its tasks scored at the last step."""
    data = os.path.join(args.workdir, "data")
    for d in (data, work):  # zaya train never writes into an earlier run's directory
        shutil.rmtree(d, ignore_errors=True)
    run([args.zaya, "data", "prepare", "--tokenizer", tokenizer, "--input", os.path.join(args.workdir, "brown.txt"),
         "--name", "brown", "--out", data, "--val-fraction", "0.1", "--force"])
    cfg = json.load(open(os.path.join(args.workdir, "tiny512.json"), encoding="utf-8"))
    cfg["data"] = {"dir": data, "sources": ["brown"], "phases": [
        {"name": "a", "tokens": 40 * 8 * 32, "seq_len": 32, "rope_theta": 10000.0, "mixture": {"brown": 1.0}}]}
    cfg["train"] = {"seed": 5, "micro_batch": 8, "global_batch": 8, "eval_every": 40, "eval_windows": 2,
                    "out_dir": work, "tokenizer": tokenizer, "sample_tokens": 0,
                    "optim": {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 4, "schedule": "cosine"}}
    cfg["eval"] = {"tasks": paths, "every": 1000}
    config = os.path.join(args.workdir, "trained.json")
    json.dump(cfg, open(config, "w", encoding="utf-8"))
    run([args.zaya, "--threads", "1", "train", "--config", config, "--no-progress", "--fixed-threads"])
    summary = json.load(open(os.path.join(work, "summary.json"), encoding="utf-8"))
    return os.path.join(work, "model"), summary["tasks"]


def check_seed(args, seed, tokenizer, tasks, paths):
    work = os.path.join(args.workdir, f"seed{seed}")
    in_training = None
    if seed == "trained":
        model_dir, in_training = train_model(args, work, tokenizer, paths)
    else:
        run([args.zaya, "debug-dump", "--config", os.path.join(args.workdir, "tiny512.json"), "--seed", str(seed),
             "--out", work, "--force"])
        model_dir = os.path.join(work, "model")
    samples_path = os.path.join(work, "samples.jsonl")
    out = run([args.zaya, "eval", "--model", model_dir, "--tokenizer", tokenizer, "--tasks", ",".join(paths),
               "--log-samples", samples_path, "--force", "--batch", "3"])
    results = {}
    for line in out.strip().splitlines():
        r = json.loads(line)
        results.update({name: r for name in r["results"]})
    samples = {}
    for line in open(samples_path, encoding="utf-8"):
        s = json.loads(line)
        samples.setdefault(s["task"], []).append(s)
    model = load_model(model_dir).eval()
    enc = Encoder(args.zaya, tokenizer)
    prefix_token = enc_prefix_token(tokenizer)
    fails, worst = [], 0.0
    for name, docs in tasks.items():
        if name not in results or len(samples.get(name, [])) != len(docs):
            fails.append(f"{name}: no results or not one sample line per item")
            continue
        worst = max(worst, check_task(name, docs, results[name], samples[name], model, enc, prefix_token, fails,
                                      in_training))
    return f"seed {seed}: {'PASS' if not fails else 'FAIL'}  worst relative error {worst:.2e}", fails


def enc_prefix_token(tokenizer):
    """lm-eval's prefix token: BOS if the tokenizer names one, else end-of-text (GPT-2 style)."""
    tok = json.load(open(tokenizer, encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    return ids.get("<s>", ids.get("<bos>", ids["<|endoftext|>"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zaya", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seeds", nargs="+", default=["1", "2", "trained"],
                    help="debug-dump seeds of random weights, and `trained`")
    args = ap.parse_args()
    brown = os.environ.get("ZAYA_BROWN_TEXT", os.path.join(args.src, "data/raw/brown.txt"))
    if not os.path.exists(brown):
        print(f"SKIPPED: {brown} is missing (run scripts/setup.sh)")
        sys.exit(77)
    torch.set_num_threads(1)
    os.makedirs(args.workdir, exist_ok=True)
    cfg = open(os.path.join(args.src, "configs/tiny.json"), encoding="utf-8").read()
    open(os.path.join(args.workdir, "tiny512.json"), "w").write(cfg.replace('"vocab_size": 97', '"vocab_size": 512'))
    slice_path = os.path.join(args.workdir, "brown.txt")
    open(slice_path, "w", encoding="utf-8").write(open(brown, encoding="utf-8").read(200000))
    tokenizer = os.path.join(args.workdir, "tokenizer.json")
    run([args.zaya, "tokenizer", "train", "--input", slice_path, "--vocab-size", "512", "--out", tokenizer,
         "--force"])
    tasks, paths = make_tasks(brown_sentences(brown, 40), args.workdir)
    check_seeds("eval_vs_torch", args.seeds, lambda seed: check_seed(args, seed, tokenizer, tasks, paths))


if __name__ == "__main__":
    main()
