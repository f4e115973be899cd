#!/usr/bin/env python3
"""Reference vectors for the `geglu` gate: gelu (tanh form) of the f16-rounded gate, rounded to
f16 (ggml_table_gelu_f16), times up; 0 below -10 and gate * up above 10 (ggml_vec_geglu_f32 with
GGML_GELU_FP16). The GELU in float32 operations in ggml's order (ggml_gelu_f32), as the table is
built: below about -4, 1 + tanh(.) cancels in f32 and the value is rounding noise in llama.cpp
too, so the gate allows one f32 ulp of tanh there besides one f16 ulp of the value.
Deterministic.

    python3 ckb/gates/reference/geglu_ref.py > ckb/gates/vectors/geglu.txt
"""
import numpy as np


def gelu32(x):
    f = np.float32
    x = f(x)
    inner = f(f(0.79788456080286535587989211986876) * x) * f(f(1.0) + f(f(f(0.044715) * x) * x))
    return f(f(f(0.5) * x) * f(f(1.0) + np.tanh(f(inner))))


def main():
    rng = np.random.default_rng(20261205)
    special = [-10.0, 10.0, -10.0001, 10.0001, -9.999, 9.999, 0.0, -0.0, 1e-8, -1e-8, 6e-5, -6e-5,
               1.0, -1.0, 0.5, -0.5, 3.0, -3.0, 65504.0, -65504.0, 1e6, -1e6, 1e-3, -1e-3]
    xs = np.concatenate([np.array(special), rng.uniform(-12, 12, 1500), rng.normal(0, 1.5, 1500),
                         rng.uniform(-0.01, 0.01, 200)]).astype(np.float32)
    us = rng.normal(0, 2.0, len(xs)).astype(np.float32)
    print("# x up expected (x <= -10: 0; x >= 10: x*up in f32; else f16(gelu(f16(x))) * up in f32, gelu in f32)")
    for x, u in zip(xs, us):
        if x <= -10.0:
            y = np.float32(0.0)
        elif x >= 10.0:
            y = np.float32(x * u)
        else:
            h = np.float32(np.float16(x))
            y = np.float32(np.float32(np.float16(gelu32(h))) * u)
        print(f"{float(x):.9g} {float(u):.9g} {float(y):.9g}")


if __name__ == "__main__":
    main()
