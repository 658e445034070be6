"""Minimal safetensors reader/writer on top of numpy.

Debian's python has no `safetensors` package, so the tests carry their own. The format
(https://github.com/huggingface/safetensors) is:

    [8 bytes]  N = little-endian uint64, length of the JSON header
    [N bytes]  UTF-8 JSON: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
                            optional "__metadata__": {str: str}}
    [rest]     raw little-endian tensor bytes; data_offsets are relative to the start of this section.

Supported dtypes: F32, F16, BF16, I32, I64 (plus F64/I8/U8/I16/BOOL on read, cheap to have).
BF16 is returned as float32 (bf16 is the upper half of an fp32 word, so uint16 << 16 is exact).
"""

import json
import struct

import numpy as np

# safetensors dtype name -> numpy dtype of the stored element (always little-endian)
_NP_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; converted to float32 below
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def _bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits(x):
    """Round-to-nearest-even fp32 -> bf16 bits (NaN kept as a quiet NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    out = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if np.any(nan):
        out[nan] = np.uint16(0x7FC0)
    return out


def read_safetensors_with_metadata(path):
    """Returns (dict name -> numpy array, metadata dict or {})."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n :]
    metadata = header.pop("__metadata__", None) or {}
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _NP_DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dt}")
        npdt = _NP_DTYPES[dt]
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(v) for v in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * npdt.itemsize:
            raise ValueError(
                f"{path}: tensor {name!r} data_offsets {begin},{end} do not fit shape {shape} dtype {dt}"
                f" (data section is {len(data)} bytes)"
            )
        arr = np.frombuffer(data[begin:end], dtype=npdt, count=count).reshape(shape)
        if dt == "BF16":
            arr = _bf16_bits_to_f32(arr)
        else:
            arr = arr.astype(npdt.newbyteorder("="), copy=True)  # own the memory, native order
        out[name] = arr
    return out, metadata


def read_safetensors(path):
    """Returns dict name -> numpy array (BF16 tensors come back as float32)."""
    return read_safetensors_with_metadata(path)[0]


_WRITE_DTYPES = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int16"): "I16",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}


def write_safetensors(path, tensors, metadata=None, bf16=()):
    """Write dict name -> numpy array (or anything np.asarray accepts, e.g. a CPU torch tensor).

    Names listed in `bf16` are stored as BF16 (rounded to nearest even). Tensors are laid out in
    sorted name order, the header is padded with spaces to a multiple of 8 bytes as the reference
    implementation does.
    """
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        arr = tensors[name]
        if hasattr(arr, "detach"):  # torch tensor
            arr = arr.detach().cpu().numpy()
        arr = np.asarray(arr)
        if name in bf16:
            raw = _f32_to_bf16_bits(arr.astype(np.float32)).astype("<u2").tobytes()
            dt = "BF16"
        else:
            if arr.dtype not in _WRITE_DTYPES:
                raise ValueError(f"tensor {name!r}: cannot write dtype {arr.dtype}")
            dt = _WRITE_DTYPES[arr.dtype]
            raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
