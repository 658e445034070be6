"""The text of a prepared source's validation documents, for tasks that must be held out.

Usage: val_documents.py ZAYA TOKENIZER SOURCE_DIR OUT.txt

Reads SOURCE_DIR/val-*.bin (the shards `zaya data prepare` wrote: a 64-byte header, then the token
ids; every document ends with the eos id named in index.json), decodes each document with
`zaya tokenizer decode` and writes them separated by blank lines.
"""

import glob
import json
import os
import struct
import subprocess
import sys


def main():
    zaya, tokenizer, source, out = sys.argv[1:5]
    eos = json.load(open(os.path.join(source, "index.json")))["tokenizer"]["eos_id"]
    tokens = []
    for path in sorted(glob.glob(os.path.join(source, "val-*.bin"))):
        data = open(path, "rb").read()
        width = struct.unpack_from("<I", data, 12)[0]
        tokens += struct.unpack(f"<{(len(data) - 64) // width}{'H' if width == 2 else 'I'}", data[64:])
    docs, cur = [], []
    for t in tokens:
        if t == eos:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            if d:
                text = subprocess.run([zaya, "tokenizer", "decode", "--tokenizer", tokenizer, "--ids",
                                       ",".join(map(str, d))], check=True, stdout=subprocess.PIPE).stdout
                f.write(text.decode("utf-8", "replace").rstrip("\n") + "\n\n")
    print(f"{len(docs)} validation documents -> {out}")


if __name__ == "__main__":
    main()
