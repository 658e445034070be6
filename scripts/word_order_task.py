"""A held-out multiple-choice task from plain text: which of four orders of a sentence's last words
is the real one.

Usage: word_order_task.py TEXT OUT.jsonl [--items N] [--words K] [--seed S]

TEXT holds documents separated by blank lines (scripts/val_documents.py writes them). Each item
takes a sentence of 8 to 40 words: the context is the sentence before its last K words (4 by
default), and the choices are those K words in their real order and in three other orders (all
four distinct), shuffled; `gold` is the real one's index. Every choice has the same words and
length, so only word order tells them apart. Written in the plain layout of `zaya eval --tasks`
({"context", "choices", "gold"}); chance is 25 %.
"""

import argparse
import itertools
import json
import random
import re

from next_sentence_task import sentences


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--words", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    text = open(args.text, encoding="utf-8", errors="replace").read()
    rng = random.Random(args.seed)
    items = []
    for doc in re.split(r"\n\s*\n", text):
        for s in sentences(doc):
            words = s.split() if s else []
            if not 8 <= len(words) <= 40:
                continue
            tail = tuple(words[-args.words:])
            others = sorted({p for p in itertools.permutations(tail) if p != tail})
            if len(others) < 3:
                continue  # too many repeated words for three other orders
            choices = [tail] + rng.sample(others, 3)
            order = list(range(4))
            rng.shuffle(order)
            items.append({"context": " ".join(words[: -args.words]),
                          "choices": [" ".join(choices[i]) for i in order], "gold": order.index(0)})
    rng.shuffle(items)
    with open(args.out, "w", encoding="utf-8") as f:
        for item in items[: args.items]:
            f.write(json.dumps(item) + "\n")
    print(f"{min(len(items), args.items)} items -> {args.out}")


if __name__ == "__main__":
    main()
