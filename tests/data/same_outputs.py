"""same_outputs.py REF OTHER: the two prepared output trees hold the same files, byte for byte;
index.json files are compared as JSON without made_by.created_utc and made_by.elapsed_s (which
differ between any two runs). Exits non-zero naming the first difference."""
import json
import os
import sys


def files(d):
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)


ref, other = sys.argv[1], sys.argv[2]
a, b = files(ref), files(other)
assert a == b, f"{other}: files differ from {ref}'s: {sorted(set(a) ^ set(b))}"
for f in a:
    x, y = open(os.path.join(ref, f), "rb").read(), open(os.path.join(other, f), "rb").read()
    if f.endswith("index.json"):
        x, y = json.loads(x), json.loads(y)
        for i in (x, y):
            del i["made_by"]["created_utc"], i["made_by"]["elapsed_s"]
    assert x == y, f"{other}: {f} differs from {ref}'s"
