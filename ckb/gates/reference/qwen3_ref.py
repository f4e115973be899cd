#!/usr/bin/env python3
"""Independent numpy reference forward pass for qwen3 GGUF files (llama.cpp LLM_ARCH_QWEN3).

Written from llama.cpp's qwen3 graph (src/models/qwen3.cpp of the llama.cpp vendored in
llama-cpp-python 0.3.36), not from any engine: every tensor is dequantized with
gguf.quants.dequantize (gguf-py's reference block decoders) and the whole forward pass is
computed in float64:

  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q,k,v = h@Wq, h@Wk, h@Wv          (no biases; head dim hd = qwen3.attention.key_length,
                                                 which need not be n_embd / n_head)
              q = rmsnorm_per_head(q) * attn_q_norm;  k = rmsnorm_per_head(k) * attn_k_norm
              NeoX rope on q,k (LLAMA_ROPE_TYPE_NEOX: pairs (x[i], x[i + hd/2]),
                theta_i = base^(-2i/hd)), positions 0..T-1
              GQA causal attention, scale 1/sqrt(hd), kv head = q head // (n_head/n_head_kv)
              x += attn @ Wo
              h = rmsnorm(x) * ffn_norm
              x += (silu(h@Wgate) * (h@Wup)) @ Wdown
  logits = (rmsnorm(x) * output_norm) @ Woutput   (token_embd if output.weight is absent)
  rmsnorm(x) = x / sqrt(mean(x^2) + eps), eps = qwen3.attention.layer_norm_rms_epsilon
It refuses files with bias tensors, rope scaling or a rope.dimension_count other than the head dim
(not modelled).

Usage (from the repository root; PYTHONPATH=/tmp/pylib where numpy/gguf were pip-installed there):
  python3 ckb/gates/reference/qwen3_ref.py MODEL.gguf --ids 1,2,3 --out logits.npy   # [T, n_vocab]
  python3 ckb/gates/reference/qwen3_ref.py MODEL.gguf --ids 1,2,3 --greedy 8         # greedy ids
  python3 ckb/gates/reference/qwen3_ref.py ckb/gates/fixtures/tiny-qwen3.gguf --gate-vectors ckb/gates/vectors
      writes ckb/gates/vectors/tiny_qwen3_logits.txt and tiny_qwen3_greedy.txt (the formats of
      the tiny_qwen2_* files)
  --self-check: logits of the gate ids under plausible misreadings of qwen3 (no q/k norm, q/k
      norm after the rope, NORM rope, attention scale 1/sqrt(n_embd/n_head), ...) against the
      real reading; --variant NAME computes one of them (never used for the vectors).
Needs: numpy, gguf (pip install numpy gguf).
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_ref import write_gate_vectors  # noqa: E402  (the shared vectors file format)

# 12 ids of the tiny vocab (tiny-qwen2's): regular tokens then <|im_start|> (2001) and text again
DEFAULT_IDS = [2001, 9, 220, 1234, 42, 1999, 0, 13, 777, 2001, 1500, 64]
N_GREEDY = 8

VARIANTS = {
    "no-qk-norm": "skip the per-head q/k RMSNorm (qwen2's graph)",
    "qk-norm-after-rope": "per-head q/k RMSNorm after the rope instead of before",
    "qk-norm-whole": "q/k RMSNorm over the whole q (all heads at once) instead of per head",
    "rope-norm": "NORM rope (adjacent pairs) instead of NeoX",
    "scale-d/h": "attention scale 1/sqrt(n_embd/n_head) instead of 1/sqrt(head_dim)",
    "norm+1": "multiply by (1 + stored norm weight) (gemma's formula)",
}


class Model:
    def __init__(self, path, variant=None):
        self.path = path
        self.variant = variant
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
        if arch != "qwen3":
            sys.exit(f"{path}: architecture {arch!r}, expected 'qwen3'")

        def meta(key, default=None):
            f = r.fields.get(f"{arch}.{key}")
            return default if f is None else f.contents()

        self.n_layer = int(meta("block_count"))
        self.n_embd = int(meta("embedding_length"))
        self.n_head = int(meta("attention.head_count"))
        self.n_head_kv = int(meta("attention.head_count_kv", self.n_head))
        self.eps = float(meta("attention.layer_norm_rms_epsilon"))
        self.base = float(meta("rope.freq_base", 10000.0))
        self.head_dim = int(meta("attention.key_length", self.n_embd // self.n_head))
        if int(meta("attention.value_length", self.head_dim)) != self.head_dim:
            sys.exit(f"{path}: value_length != key_length (not modelled)")
        if int(meta("rope.dimension_count", self.head_dim)) != self.head_dim:
            sys.exit(f"{path}: partial rope (rope.dimension_count != head dim) is not modelled")
        if meta("rope.scaling.type", "none") not in ("none",):
            sys.exit(f"{path}: rope scaling is not modelled")
        self.w = {}
        for t in r.tensors:
            if t.name.endswith(".bias"):
                sys.exit(f"{path}: bias tensor {t.name} (qwen3 has none; not modelled)")
            # gguf-py returns the numpy shape [ne1, ne0] = [out, in]; keep float32 storage
            a = dequantize(t.data, t.tensor_type)
            shape = tuple(int(s) for s in reversed(list(t.shape)))
            self.w[t.name] = np.asarray(a, dtype=np.float32).reshape(shape)
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])

    def W(self, name):
        return self.w[name].astype(np.float64)

    def norm_w(self, name):
        return self.W(name) + (1.0 if self.variant == "norm+1" else 0.0)

    def rmsnorm(self, x, wname):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.norm_w(wname)

    def head_norm(self, x, wname):
        # x: [T, heads, hd]; per head (the last axis), or over all heads for the self-check
        if self.variant == "qk-norm-whole":
            T, nh, hd = x.shape
            flat = x.reshape(T, nh * hd)
            flat = flat / np.sqrt(np.mean(flat * flat, axis=-1, keepdims=True) + self.eps)
            return flat.reshape(T, nh, hd) * self.norm_w(wname)
        return self.rmsnorm(x, wname)

    def rope(self, x):
        # x: [T, n_heads, head_dim]; NeoX style (rotate halves)
        T, _, hd = x.shape
        half = hd // 2
        inv = self.base ** (-2.0 * np.arange(half, dtype=np.float64) / hd)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]      # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        if self.variant == "rope-norm":                                     # self-check only
            a, b = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
            return out
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def qk(self, x, wname):
        if self.variant == "no-qk-norm":
            return self.rope(x)
        if self.variant == "qk-norm-after-rope":
            return self.head_norm(self.rope(x), wname)
        return self.rope(self.head_norm(x, wname))

    def forward(self, ids):
        """Logits [T, n_vocab] (float64) for every position of ids."""
        ids = np.asarray(ids, dtype=np.int64)
        T, hd, nh, nkv = len(ids), self.head_dim, self.n_head, self.n_head_kv
        group = nh // nkv
        scale = 1.0 / np.sqrt(self.n_embd // nh if self.variant == "scale-d/h" else hd)
        x = self.w["token_embd.weight"][ids].astype(np.float64)             # [T, d]
        mask = np.triu(np.full((T, T), -np.inf), k=1)
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q = (h @ self.W(p + "attn_q.weight").T).reshape(T, nh, hd)
            k = (h @ self.W(p + "attn_k.weight").T).reshape(T, nkv, hd)
            v = (h @ self.W(p + "attn_v.weight").T).reshape(T, nkv, hd)
            q = self.qk(q, p + "attn_q_norm.weight")
            k = self.qk(k, p + "attn_k_norm.weight")
            att = np.empty((T, nh, hd))
            for hq in range(nh):
                hk = hq // group
                s = (q[:, hq, :] @ k[:, hk, :].T) * scale + mask               # [T, T]
                s = s - s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                att[:, hq, :] = (e / e.sum(axis=-1, keepdims=True)) @ v[:, hk, :]
            x = x + att.reshape(T, nh * hd) @ self.W(p + "attn_output.weight").T
            h = self.rmsnorm(x, p + "ffn_norm.weight")
            g = h @ self.W(p + "ffn_gate.weight").T
            u = h @ self.W(p + "ffn_up.weight").T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ self.W(p + "ffn_down.weight").T
        h = self.rmsnorm(x, "output_norm.weight")
        return h @ self.out_w.astype(np.float64).T

    def greedy(self, ids, n):
        """Greedy continuation (full recompute each step). Returns (new ids, top1-top2 margins)."""
        seq, out, margins = list(ids), [], []
        for _ in range(n):
            last = self.forward(seq)[-1]
            order = np.argsort(-last, kind="stable")
            out.append(int(order[0]))
            margins.append(float(last[order[0]] - last[order[1]]))
            seq.append(int(order[0]))
        return out, margins


def self_check(path, ids):
    ref = Model(path).forward(ids)
    scale = np.abs(ref).max()
    print(f"reference max |logit| {scale:.3f}")
    print(f"{'variant':20s} {'max-abs':>8s} {'rel':>7s} {'top1 diff':>9s}  first pos > 5e-2 rel")
    for v, what in VARIANTS.items():
        other = Model(path, variant=v).forward(ids)
        d = np.abs(other - ref).max(axis=-1)
        top = int((other.argmax(-1) != ref.argmax(-1)).sum())
        first = next((i for i, x in enumerate(d / scale) if x > 5e-2), None)
        print(f"{v:20s} {d.max():8.3f} {d.max() / scale:7.3f} {top:9d}  {first}   ({what})")


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for qwen3 GGUF")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_qwen3 gate files")
    ap.add_argument("--variant", choices=sorted(VARIANTS), help="a misreading, for self-checks only")
    ap.add_argument("--self-check", action="store_true", help="compare every --variant with the reference")
    a = ap.parse_args()
    ids = [int(s) for s in a.ids.split(",")] if a.ids else DEFAULT_IDS
    if a.self_check:
        self_check(a.model, ids)
        return
    m = Model(a.model, variant=a.variant)
    if a.gate_vectors:
        if a.variant:
            sys.exit("--gate-vectors is only written without --variant")
        cmd = "python3 ckb/gates/reference/qwen3_ref.py ckb/gates/fixtures/tiny-qwen3.gguf " \
              f"--ids {','.join(map(str, ids))} --gate-vectors ckb/gates/vectors"
        write_gate_vectors(m, ids, a.gate_vectors, cmd, prefix="tiny_qwen3", script="qwen3_ref.py")
        return
    if a.out:
        np.save(a.out, m.forward(ids))
        print(f"wrote {a.out}")
    if a.greedy:
        gen, margins = m.greedy(ids, a.greedy)
        print(",".join(map(str, gen)))
        print("margins: " + " ".join(f"{x:.4f}" for x in margins), file=sys.stderr)
    if not a.out and not a.greedy:
        last = m.forward(ids)[-1]
        print("argmax at last position:", int(np.argmax(last)))


if __name__ == "__main__":
    main()
