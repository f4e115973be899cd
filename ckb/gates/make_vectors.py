#!/usr/bin/env python3
"""Writes ckb/gates/vectors/dot_<t>.txt: test vectors for the dot/dequant kernel gates, with
gguf-py (the `gguf` package's numpy reference, gguf.quants.dequantize) as the independent
reference.

Each case: a pseudo-random but valid row of `cols` values of the type (random bytes with the f16
scale fields set to small finite values), an activation x (float32), the row dequantized by
gguf-py (float32) and the reference dot in float64: sum(float64(deq) * float64(x)).

Format (one item per line, `#` comments):
  case <TYPE> <cols>
  row <hex of the row bytes>
  x <f32 bit patterns, 8 hex digits each, space separated>
  deq <f32 bit patterns>
  dot <float64 reference, repr>
  end

AWQ_INT4 (the engine's repacked AutoAWQ rows, ckb/quants/awq_int4.toml; not a ggml type) has
no gguf-py decoder: its reference dequantization is awq_int4_dequant below, written from the
layout in the quant file.

Usage: python3 ckb/gates/make_vectors.py [TYPE ...]   (deterministic; needs numpy and gguf;
       with TYPE ids, e.g. awq_int4, only those files are written)
"""
import os
import sys

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors")

TYPES = {
    "f32": T.F32,
    "f16": T.F16,
    "bf16": T.BF16,
    "q4_0": T.Q4_0,
    "q4_1": T.Q4_1,
    "q5_0": T.Q5_0,
    "q8_0": T.Q8_0,
    "q4_k": T.Q4_K,
    "q6_k": T.Q6_K,
}

# Byte offsets of the f16 scale fields inside a block (None: plain element types).
SCALE_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],  # d, m
    T.Q5_0: [0],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q6_K: [208],
}


def random_row(rng, qtype, cols):
    be, bb = GGML_QUANT_SIZES[qtype]
    assert cols % be == 0
    nb = cols // be
    if qtype == T.F32:
        return rng.uniform(-1, 1, cols).astype("<f4").view(np.uint8)
    if qtype == T.F16:
        return rng.uniform(-1, 1, cols).astype("<f2").view(np.uint8)
    if qtype == T.BF16:
        v = rng.uniform(-1, 1, cols).astype("<f4").view("<u4")
        return (v >> 16).astype("<u2").view(np.uint8)  # truncation is fine: any bf16 is valid
    row = rng.integers(0, 256, nb * bb, dtype=np.uint8).reshape(nb, bb)
    for off in SCALE_FIELDS[qtype]:
        s = (1e-3 * (1 + 30 * rng.random(nb))).astype(np.float32)
        if qtype != T.Q4_K:  # Q4_K d/dmin are non-negative in real files; others any sign
            s = s * rng.choice([-1.0, 1.0], nb).astype(np.float32)
        row[:, off:off + 2] = s.astype("<f2").view(np.uint8).reshape(nb, 2)
    return row.reshape(-1)


def random_x(rng, cols, case):
    kind = case % 4
    if kind == 0:
        x = rng.standard_normal(cols)
    elif kind == 1:
        x = rng.standard_normal(cols) * 10.0 ** ((np.arange(cols) % 7) - 3)
    elif kind == 2:
        x = rng.standard_normal(cols) * 3.0
        x[(np.arange(cols) // 32) % 3 == 1] = 0.0  # some all-zero blocks
    else:
        x = rng.standard_normal(cols) * 1e-3
    return x.astype(np.float32)


def hexf(a):
    return " ".join("%08x" % v for v in np.asarray(a, dtype="<f4").view("<u4"))


def lengths(qtype):
    be, _ = GGML_QUANT_SIZES[qtype]
    if be == 1:
        return [7, 32, 100, 256]
    if be == 256:
        return [256, 512]
    return [32, 64, 96, 256]


AWQ_BLOCK = (128, 68)  # values, bytes: f16 d, u16 z (0..15), 64 bytes of nibbles


def awq_int4_row(rng, cols):
    nb = cols // 128
    row = rng.integers(0, 256, nb * 68, dtype=np.uint8).reshape(nb, 68)
    s = (1e-3 * (1 + 30 * rng.random(nb)) * rng.choice([-1.0, 1.0], nb)).astype("<f2")
    row[:, 0:2] = s.view(np.uint8).reshape(nb, 2)
    row[:, 2:4] = rng.integers(0, 16, nb).astype("<u2").view(np.uint8).reshape(nb, 2)
    return row.reshape(-1)


def awq_int4_dequant(row):
    """w = d * (q - z); run k < 4: qs[16k + j] low nibble = value 32k + j, high = 32k + 16 + j."""
    b = row.reshape(-1, 68)
    d = b[:, 0:2].copy().view("<f2").astype(np.float32)  # [nb, 1]
    z = b[:, 2:4].copy().view("<u2").astype(np.int32)  # [nb, 1]
    qs = b[:, 4:].reshape(-1, 4, 16).astype(np.int32)
    q = np.concatenate([qs & 15, qs >> 4], axis=2).reshape(-1, 128)  # [nb, 128]
    return ((q - z) * d).astype(np.float32).reshape(-1)


def write_awq_int4():
    rng = np.random.default_rng(20240601 + 1000)
    lines = [
        "# dot/dequant test vectors for AWQ_INT4, made by ckb/gates/make_vectors.py",
        "# reference: awq_int4_dequant (numpy %s), from ckb/quants/awq_int4.toml" % np.__version__,
    ]
    for cols in [128, 256, 384, 896]:
        for case in range(4):
            row = awq_int4_row(rng, cols)
            x = random_x(rng, cols, case)
            deq = awq_int4_dequant(row)
            dot = float(np.dot(deq.astype(np.float64), x.astype(np.float64)))
            lines += ["case AWQ_INT4 %d" % cols, "row " + row.tobytes().hex(), "x " + hexf(x), "deq " + hexf(deq), "dot " + repr(dot), "end"]
    path = os.path.join(OUT, "dot_awq_int4.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path, os.path.getsize(path), "bytes", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[1:]
    if not only or "awq_int4" in only:
        write_awq_int4()
    for tag, qtype in TYPES.items():
        if only and tag not in only:
            continue
        rng = np.random.default_rng(20240601 + int(qtype))
        lines = [
            "# dot/dequant test vectors for %s, made by ckb/gates/make_vectors.py" % qtype.name,
            "# reference: gguf-py (gguf.quants.dequantize), numpy %s" % np.__version__,
        ]
        for cols in lengths(qtype):
            for case in range(4):
                row = random_row(rng, qtype, cols)
                x = random_x(rng, cols, case)
                deq = dequantize(row, qtype).astype(np.float32).reshape(-1)
                assert deq.shape == (cols,), (tag, deq.shape)
                assert np.all(np.isfinite(deq)), tag
                dot = float(np.dot(deq.astype(np.float64), x.astype(np.float64)))
                lines += [
                    "case %s %d" % (qtype.name, cols),
                    "row " + row.tobytes().hex(),
                    "x " + hexf(x),
                    "deq " + hexf(deq),
                    "dot " + repr(dot),
                    "end",
                ]
        path = os.path.join(OUT, "dot_%s.txt" % tag)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("wrote", path, os.path.getsize(path), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
