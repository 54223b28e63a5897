#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_gguf.cpp into tests/fuzz/gguf/: small valid GGUF files (standard library
only, little-endian, laid out as ggml writes them). Run from anywhere; the output is deterministic."""
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q",
       F64: "<d"}


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, i) for i in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors, version=3, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + value(t, v)
    off = 0
    for name, ggml_type, ne, data in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ggml_type, off)
        off = (off + len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for i, (_, _, _, data) in enumerate(tensors):
        out += data
        if i + 1 < len(tensors):
            out += b"\0" * (-len(out) % alignment)
    return out


def f16(x):
    return struct.pack("<e", x)


def main():
    os.makedirs(HERE, exist_ok=True)
    files = {
        "minimal.gguf": gguf([], []),
        "metadata_v2.gguf": gguf([
            ("general.architecture", STR, "llama"), ("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700), ("i16", I16, -700),
            ("u32", U32, 70000), ("i32", I32, -70000), ("f32", F32, 0.5), ("bool", BOOL, True), ("u64", U64, 2**40),
            ("i64", I64, -2**40), ("f64", F64, 1e-5), ("strs", ARR, (STR, ["a", "", "Ġb"])),
            ("nested", ARR, (ARR, [(U16, [1, 2]), (I32, [-3])])),
        ], [], version=2),
        "tensors.gguf": gguf([("general.alignment", U32, 64)], [
            ("f32", 0, [4, 2], struct.pack("<8f", *range(8))),
            ("f16", 1, [4], b"".join(f16(x) for x in (0.5, -1.0, 2.0, 0.0))),
            ("bf16", 30, [2], bytes([0x80, 0x3f, 0x00, 0xc0])),
            ("q8_0", 8, [32], f16(0.25) + bytes(range(32))),
            ("tq1_0", 34, [256], bytes([121]) * 52 + f16(1.0)),
            ("tq2_0", 35, [256], bytes([0x55]) * 64 + f16(0.5)),
            ("i2_s", 36, [128, 1], bytes([0x98]) * 32 + struct.pack("<f", 0.125) + b"\0" * 28),
        ], alignment=64),
        # Q2_0 (type 42) in both layouts: mainline's 64-weight blocks (18 bytes) and PrismML's 128-weight blocks
        # (34 bytes); a small tensor that fits both takes the layout its large neighbour shows.
        "q2_0_g64.gguf": gguf([("general.architecture", STR, "qwen3")], [
            ("small", 42, [128, 2], (f16(0.5) + bytes([0x98]) * 16) * 4),
            ("large", 42, [2048, 2], (f16(0.25) + bytes([0x64]) * 16) * 64),
        ]),
        "q2_0_g128.gguf": gguf([("general.architecture", STR, "qwen3")], [
            ("small", 42, [128, 2], (f16(0.5) + bytes([0x98]) * 32) * 2),
            ("large", 42, [2048, 2], (f16(0.25) + bytes([0x64]) * 31 + bytes([0xff])) * 32),
        ]),
        "tokenizer.gguf": gguf([
            ("general.architecture", STR, "bitnet-b1.58"), ("tokenizer.ggml.model", STR, "gpt2"),
            ("tokenizer.ggml.pre", STR, "llama-bpe"),
            ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "b", "ab"])),
            ("tokenizer.ggml.token_type", ARR, (I32, [3, 1, 1, 1])),
            ("tokenizer.ggml.merges", ARR, (STR, ["a b"])), ("tokenizer.ggml.bos_token_id", U32, 0),
            ("tokenizer.chat_template", STR, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"),
        ], []),
    }
    for name, data in files.items():
        with open(os.path.join(HERE, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
