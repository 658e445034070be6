#!/usr/bin/env python3
"""Regenerates the seed corpus fuzz/corpus/<target>/ from real files of the repository.

Usage: python3 fuzz/make_seeds.py ZAYA_BINARY [GEMMA_TOKENIZER_JSON]
ZAYA_BINARY (a release build of zaya) writes the tiny model and the byte-level tokenizer; the
Gemma-3 tokenizer.json (tests/tokenizer/node_modules, 33 MB) is cut down to a few hundred tokens.
Seeds are kept small (< 200 KB per target) so that the committed corpus stays cheap.
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> bytes, laid out as write_safetensors does."""
    header, off, body = {}, 0, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"data_offsets": [off, off + len(raw)], "dtype": dtype, "shape": shape}
        off += len(raw)
        body += raw
    h = json.dumps(header, separators=(",", ":"), sort_keys=True)
    h += " " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h.encode() + body


def main():
    zaya = os.path.abspath(sys.argv[1])
    gemma = sys.argv[2] if len(sys.argv) > 2 else None
    shutil.rmtree(CORPUS, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="zaya-seeds-")

    # config_json: the shipped configs.
    for name in ("tiny.json", "small.json", "zaya1-base.json"):
        put("config_json", name, open(os.path.join(ROOT, "configs", name)).read())

    # A tiny model from debug-dump: its config.json (hf_config) and a few of its tensors.
    subprocess.run([zaya, "debug-dump", "--config", os.path.join(ROOT, "configs", "tiny.json"),
                    "--out", os.path.join(tmp, "dd")], check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(tmp, "dd", "model")
    put("hf_config", "tiny_config.json", open(os.path.join(model, "config.json")).read())
    raw = open(os.path.join(model, "model.safetensors"), "rb").read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    names = sorted((n for n in header if n != "__metadata__"),
                   key=lambda n: header[n]["data_offsets"][1] - header[n]["data_offsets"][0])[:6]
    picked = []
    for n in names:
        b, e = header[n]["data_offsets"]
        picked.append((n, header[n]["dtype"], header[n]["shape"], raw[8 + hlen + b:8 + hlen + e]))
    put("safetensors", "tiny_model_part.safetensors", safetensors(picked, {"format": "pt"}))
    put("safetensors", "dtypes.safetensors", safetensors([
        ("f32", "F32", [2, 2], struct.pack("<4f", 1.0, -2.5, 0.0, 3.0e38)),
        ("bf16", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x7F80)),
        ("f16", "F16", [2, 1], struct.pack("<2H", 0x3C00, 0xFC00)),
        ("f64", "F64", [1], struct.pack("<d", 1e300)),
        ("i32", "I32", [2], struct.pack("<2i", 7, -1)),
        ("empty", "F32", [0, 4], b""),
    ]))
    put("hf_index", "tiny_index.json", json.dumps({
        "metadata": {"total_size": 299000},
        "weight_map": {n: "model-%05d-of-00002.safetensors" % (1 + i % 2)
                       for i, n in enumerate(sorted(n for n in header if n != "__metadata__"))}},
        indent=2))

    # tokenizer_json: a byte-level BPE trained by zaya, and Gemma-3's cut to ids < 600.
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()[:20000]
    open(os.path.join(tmp, "t.txt"), "w").write(text)
    subprocess.run([zaya, "tokenizer", "train", "--input", os.path.join(tmp, "t.txt"),
                    "--vocab-size", "300", "--out", os.path.join(tmp, "bpe.json")],
                   check=True, stdout=subprocess.DEVNULL)
    put("tokenizer_json", "bytelevel_300.json", open(os.path.join(tmp, "bpe.json")).read())
    if gemma:
        j = json.load(open(gemma, encoding="utf-8"))
        keep = 600
        vocab = {t: i for t, i in j["model"]["vocab"].items() if i < keep}
        merges = [m for m in j["model"]["merges"]
                  if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab][:200]
        j["model"]["vocab"], j["model"]["merges"] = vocab, merges
        j["added_tokens"] = [t for t in j["added_tokens"] if t["id"] < keep]
        put("tokenizer_json", "gemma3_600.json", json.dumps(j, ensure_ascii=False))

    # shard_header: ZAYATOK1 shards as write_shard lays them out (docs/data-format.md).
    def shard(tokens, vocab):
        fmt, width = ("<%dH", 2) if vocab <= 65536 else ("<%dI", 4)
        body = struct.pack(fmt % len(tokens), *tokens)
        return (b"ZAYATOK1" + struct.pack("<IIQQQ", 1, width, len(tokens), vocab, fnv1a64(body))
                + b"\0" * 24 + body)
    put("shard_header", "u16.tok", shard([2, 17, 299, 0, 1, 5, 5, 42], 300))
    put("shard_header", "u32.tok", shard([70000, 1, 262143], 262144))
    put("shard_header", "empty.tok", shard([], 300))

    # token_file: `zaya score --tokens` inputs.
    put("token_file", "seq.json", "[2, 17, 299, 0, 1]")
    put("token_file", "batch.json", "[[2, 17, 299], [0, 1, 5]]")

    # ckpt_manifest: a manifest for the rank file fuzz/ckpt_manifest.cpp writes (p.a [2,3],
    # p.b [4]), in the layout checkpoint_write.cpp produces.
    rank = safetensors([("p.a", "F32", [2, 3], struct.pack("<6f", *range(6))),
                        ("p.b", "F32", [4], struct.pack("<4f", 0, -1, -2, -3))])
    manifest = {
        "format": "zaya-sharded-checkpoint", "version": 1, "step": 10, "world_size": 1,
        "trainer": {"step": 10, "tokens_done": 5120, "sample_index": 40, "optimizer_steps": 10,
                    "balancer_steps": 10},
        "rng": {"seed": 1234}, "config": {"model": {}},
        "files": [{"name": "rank-00000.safetensors", "bytes": len(rank),
                   "fnv1a64": "0x%016x" % fnv1a64(rank)}],
        "tensors": [
            {"name": "a", "dtype": "F32", "shape": [2, 3],
             "chunks": [{"file": "rank-00000.safetensors", "key": "p.a", "begin": 0, "end": 6}]},
            {"name": "b", "dtype": "F32", "shape": [4],
             "chunks": [{"file": "rank-00000.safetensors", "key": "p.b", "begin": 0, "end": 4}]}],
    }
    put("ckpt_manifest", "manifest.json", json.dumps(manifest, indent=1))

    # aegis_rules: docs/aegis.md's example and a hostile pattern.
    put("aegis_rules", "docs_example.json",
        '[{"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},\n'
        ' {"regex": "uncorrectable ECC error on (\\\\S+)", "action": "mark_bad_host"},\n'
        ' {"regex": "CUDA error: out of memory", "action": "stop"}]\n')
    put("aegis_rules", "hostile.json",
        '[{"regex": "(a+)+$", "action": "restart"}, {"regex": "(?i)^xid (\\\\d+) on (\\\\S+)", '
        '"action": "mark_bad_host"}]\nxid 79 on gpu-12\naaaaaaaaaaaaaaaaaaaaaaaaaaab\n')

    # hardware_profile: a CPU profile on a 2-point grid (with the collectives of 2 ranks and a
    # shared-machine entry) and a GPU one as the built-ins are.
    grid = [[m, n, k, 10.0 + m / 64 + n / 128 + k / 256] for m in (16, 256) for n in (16, 256)
            for k in (16, 256)]
    rates = {"threads": 2, "ranks": 1, "membw_gbs": 60.0, "ns_per_act_byte": 0.25,
             "ns_per_score": 5.0, "ns_per_logit": 3.0, "gemm_m_n_k_gflops": grid}
    cpu = {"format": "zaya-hardware-profile", "version": 1, "name": "seed", "device": "cpu",
           "measured": True, "source": "fuzz/make_seeds.py", "cores": 2,
           "memory_bytes": 1 << 34, "runtime_bytes": 10 << 20, "peak_tflops": 0, "dtype": "f32",
           "rates": [rates, dict(rates, threads=1, ranks=2, membw_gbs=30.0)],
           "comm": {"world": 2, "busbw_gbs": 2.5, "latency_us": 1.5}}
    put("hardware_profile", "cpu.json", json.dumps(cpu, indent=1))
    gpu = dict(cpu, name="gpu seed", device="gpu", measured=False, cores=0, peak_tflops=989,
               dtype="bf16", rates=[{"threads": 0, "ranks": 1, "membw_gbs": 3040.0,
                                     "ns_per_act_byte": 0.001, "ns_per_score": 0,
                                     "ns_per_logit": 0.004, "gemm_efficiency": 0.7,
                                     "gemm_m_n_k_gflops": []}],
               comm={"world": 8, "busbw_gbs": 450, "latency_us": 20})
    put("hardware_profile", "gpu.json", json.dumps(gpu, indent=1))
    line_seeds()
    shutil.rmtree(tmp)


def line_seeds():
    """The line readers (task_file, jsonl_reader) and the request readers: well-formed lines, and
    hostile ones: nested 20,000 deep (past the JSON depth limit of 512), a long line, NUL bytes."""
    deep = "[" * 20000 + "]" * 20000
    put("task_file", "plain.jsonl",
        '{"context": "the cat", "choices": [" sat", " ran"], "gold": 0}\n'
        '{"context": "a dog", "choices": [" barked", " flew"], "gold": 0}\n')
    put("task_file", "hellaswag.jsonl",
        '{"ctx": "He opens the door", "endings": ["and walks in.", "and flies."], "label": 0}\n')
    put("task_file", "piqa.jsonl", '{"goal": "dry hair", "sol1": "towel", "sol2": "water", '
        '"label": 0}\n\n{"goal": "x", "sol1": "y", "sol2": "z", "label": 1}\n')
    put("task_file", "nested.jsonl",
        '{"context": "c", "choices": ["a", "b"], "gold": 0}\n' + deep + "\n")
    # jsonl_reader: the first byte picks the format (0 JSON Lines, 1 text, 2 by content; 8: id).
    put("jsonl_reader", "docs.jsonl",
        '\x08{"text": "one document", "id": 1}\n\n{"text": "two", "meta": {"id": "b"}}\n')
    put("jsonl_reader", "text.txt", "\x01first document\n\nsecond one\nwith two lines\n\n\n")
    put("jsonl_reader", "nested.jsonl", '\x00{"text": "ok"}\n{"text": ' + deep + "}\n")
    put("jsonl_reader", "long.jsonl", '\x00{"text": "' + "x" * 5000 + '"}\n')
    put("jsonl_reader", "nul.jsonl", '\x00{"text": "a\\u0000b"}\n\x00\x00\n')
    put("jsonl_reader", "docs.jsonl.gz",
        b"\x02" + gzip.compress(b'{"text": "a"}\n{"text": "b"}\n', mtime=0))
    put("completion_request", "nested.json", '{"prompt": ' + deep + "}")
    put("generate_request", "nested.json", '{"prompt": ' + deep + "}")


if __name__ == "__main__":
    main()
