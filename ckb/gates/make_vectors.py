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

Usage: python3 ckb/gates/make_vectors.py   (deterministic; needs numpy and gguf)
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
    "q5_0": T.Q5_0,
    "q8_0": T.Q8_0,
    "q4_k": T.Q4_K,
    "q6_k": T.Q6_K,
}

# Byte offsets of the f16 scale fields inside a block (None: plain element types).
SCALE_FIELDS = {
    T.Q4_0: [0],
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


def main():
    os.makedirs(OUT, exist_ok=True)
    for tag, qtype in TYPES.items():
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
