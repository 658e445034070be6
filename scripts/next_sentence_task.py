"""A held-out multiple-choice task from plain text: which of four sentences follows two given ones.

Usage: next_sentence_task.py TEXT OUT.jsonl [--items N] [--seed S] [--skip-chars C]

TEXT holds documents separated by blank lines. Each item takes two consecutive sentences of a
document as the context; the choices are the sentence that really follows them and three sentences
drawn from elsewhere in the text, in a random order; `gold` is the real one's index. Written in the
plain layout of `zaya eval --tasks` ({"context", "choices", "gold"}); chance is 25 %.
"""

import argparse
import json
import random
import re


def sentences(doc):
    out = []
    for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
        if 4 <= len(s.split()) <= 40:
            out.append(s)
        else:
            out.append(None)  # breaks the run: no item spans it
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-chars", type=int, default=0, help="start this far into the text")
    args = ap.parse_args()
    text = open(args.text, encoding="utf-8", errors="replace").read()[args.skip_chars:]
    docs = [sentences(d) for d in re.split(r"\n\s*\n", text) if d.strip()]
    pool = [s for d in docs for s in d if s]
    triples = [(d[i], d[i + 1], d[i + 2]) for d in docs for i in range(len(d) - 2)
               if d[i] and d[i + 1] and d[i + 2]]
    rng = random.Random(args.seed)
    rng.shuffle(triples)
    with open(args.out, "w", encoding="utf-8") as f:
        for a, b, c in triples[: args.items]:
            choices = [c] + rng.sample([s for s in rng.sample(pool, 8) if s != c], 3)
            order = list(range(4))
            rng.shuffle(order)
            f.write(json.dumps({"context": a + " " + b, "choices": [choices[i] for i in order],
                                "gold": order.index(0)}) + "\n")
    print(f"{min(len(triples), args.items)} items -> {args.out}")


if __name__ == "__main__":
    main()
