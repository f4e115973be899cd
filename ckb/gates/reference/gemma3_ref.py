#!/usr/bin/env python3
"""Independent numpy reference forward pass for gemma3 GGUF files (llama.cpp LLM_ARCH_GEMMA3).

Written from llama.cpp's gemma3 graph (src/models/gemma3.cpp of ggml-org/llama.cpp@0c1e57098),
not from any engine: every tensor is dequantized with gguf.quants.dequantize (gguf-py's reference
block decoders) and the whole forward pass is computed in float64:

  x = token_embd[ids] * sqrt(n_embd)
  per layer il (local = sliding-window layer, see below):
      h = rmsnorm(x) * attn_norm
      q,k,v = h@Wq, h@Wk, h@Wv      (no biases; head dim hd = gemma3.attention.key_length,
                                      which need not be n_embd / n_head)
      q = rmsnorm_per_head(q) * attn_q_norm;  k = rmsnorm_per_head(k) * attn_k_norm
      NeoX rope on q,k (LLAMA_ROPE_TYPE_NEOX: pairs (x[i], x[i + hd/2]), theta_i = base^(-2i/hd))
        with base = gemma3.rope.freq_base on global layers, gemma3.rope.freq_base_swa (default
        10000) on local ones
      q *= 1/sqrt(hd)                 (hparams.f_attention_scale; kq_scale of build_attn is 1)
      GQA causal attention (kv head = q head // (n_head/n_head_kv)); on local layers a query at
        position p sees keys p0 with p - p0 < n_swa (the last n_swa positions, itself included)
      x += rmsnorm(attn @ Wo) * post_attention_norm
      h = rmsnorm(x) * ffn_norm
      x += rmsnorm((gelu_tanh(h@Wgate) * (h@Wup)) @ Wdown) * post_ffw_norm
  logits = (rmsnorm(x) * output_norm) @ token_embd   (tied; output.weight if the file has one)
           then c * tanh(logits / c) only if gemma3.final_logit_softcapping is in the file
  rmsnorm(x) = x / sqrt(mean(x^2) + eps), eps = gemma3.attention.layer_norm_rms_epsilon
  gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
The norm weights are used as stored: the GGUF converter already folded Gemma3RMSNorm's 1 + w in.
Local layers: gemma3.attention.sliding_window_pattern if present (a bool per layer, or a period
n), else period 6; with a period n layer il is local iff il % n < n - 1 (layers 5, 11, 17, ...
global). No sliding_window key (or 0): every layer global, with freq_base.
It refuses files with bias tensors, rope scaling, a rope.dimension_count other than the head dim,
or separate SWA head sizes (not modelled).

Usage (from the repository root; PYTHONPATH=/tmp/pylib where numpy/gguf were pip-installed there):
  python3 ckb/gates/reference/gemma3_ref.py MODEL.gguf --ids 2,3,4 --out logits.npy   # [T, n_vocab]
  python3 ckb/gates/reference/gemma3_ref.py MODEL.gguf --ids 2,3,4 --greedy 8         # greedy ids
  python3 ckb/gates/reference/gemma3_ref.py ckb/gates/fixtures/tiny-gemma3.gguf --gate-vectors ckb/gates/vectors
      writes ckb/gates/vectors/tiny_gemma3_logits.txt and tiny_gemma3_greedy.txt (the formats of
      the tiny_llama_* / tiny_qwen2_* files; here the first prompt id is BOS, as add_bos is true)
  --self-check: logits of the gate ids under plausible misreadings of gemma3 (window off by one,
      all layers global, wrong rope base/mode, attention scale 1/sqrt(n_embd/n_head), +1 on the
      norm weights, erf GELU, no embedding scale, ...) against the real reading; and
      --variant NAME computes one of them (never used for the vectors).
Needs: numpy, gguf (pip install numpy gguf).
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

# BOS then "The quick brown fox, with a hat" as llama.cpp tokenizes it with tiny-gemma3.gguf's vocab
DEFAULT_IDS = [2, 588, 464, 301, 654, 294, 579, 636, 293, 635, 668, 651, 382, 272, 310, 278]
N_GREEDY = 8
SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)

VARIANTS = {
    "window+1": "local layers also see position p - n_swa (window n_swa + 1)",
    "window-1": "local layers see only the last n_swa - 1 positions",
    "all-global": "no sliding window anywhere",
    "all-local": "every layer sliding-window",
    "global-last": "global layers are those with il % 6 == 0 (dense first) instead of il % 6 == 5",
    "local-base=global": "local layers rope with freq_base too",
    "bases-swapped": "global layers 10000, local layers freq_base",
    "rope-norm": "NORM rope (adjacent pairs) instead of NeoX",
    "scale-d/h": "attention scale 1/sqrt(n_embd/n_head) (gemma3-27B's) instead of 1/sqrt(head_dim)",
    "no-qk-norm": "skip the per-head q/k RMSNorm",
    "norm+1": "multiply by (1 + stored norm weight) (the HF formula applied twice)",
    "no-post-norms": "skip post_attention_norm and post_ffw_norm",
    "gelu-erf": "exact erf GELU instead of the tanh approximation",
    "gelu-ggml-f16": "ggml CPU's GELU table: x rounded to f16, gelu(x) rounded to f16 (what llama.cpp's CPU backend computes)",
    "no-embd-scale": "no sqrt(n_embd) on the embeddings",
    "embd-scale-bf16": "sqrt(n_embd) rounded to bfloat16 (HF's normalizer in bf16)",
    "softcap30": "final logit softcapping 30 (gemma2's)",
}


def erf(x):
    from math import erf as _erf
    return np.vectorize(_erf)(x)


def bf16_round(v):
    b = np.array([v], dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return float(b.view(np.float32)[0])


class Model:
    def __init__(self, path, variant=None):
        self.path = path
        self.variant = variant
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
        if arch != "gemma3":
            sys.exit(f"{path}: architecture {arch!r}, expected 'gemma3'")

        def meta(key, default=None):
            f = r.fields.get(f"{arch}.{key}")
            return default if f is None else f.contents()

        for key in ("rope.scaling.type", "rope.scaling.factor", "attention.key_length_swa",
                    "attention.value_length_swa", "rope.dimension_count_swa"):
            if meta(key) is not None:
                sys.exit(f"{path}: {arch}.{key} is set (not modelled)")
        self.n_layer = int(meta("block_count"))
        self.n_embd = int(meta("embedding_length"))
        self.n_head = int(meta("attention.head_count"))
        self.n_head_kv = int(meta("attention.head_count_kv", self.n_head))
        self.head_dim = int(meta("attention.key_length", self.n_embd // self.n_head))
        if int(meta("attention.value_length", self.head_dim)) != self.head_dim:
            sys.exit(f"{path}: value_length != key_length (not modelled)")
        n_rot = int(meta("rope.dimension_count", self.head_dim))
        if n_rot != self.head_dim:
            sys.exit(f"{path}: rope.dimension_count {n_rot} != head dim {self.head_dim} (not modelled)")
        self.eps = float(meta("attention.layer_norm_rms_epsilon"))
        self.base = float(meta("rope.freq_base", 10000.0))
        self.base_swa = float(meta("rope.freq_base_swa", 10000.0))
        self.softcap = float(meta("final_logit_softcapping", 0.0))
        self.n_swa = int(meta("attention.sliding_window", 0))
        pattern = meta("attention.sliding_window_pattern", 6)
        if self.n_swa <= 0:
            self.is_swa = [False] * self.n_layer
        elif isinstance(pattern, (list, tuple)):
            self.is_swa = [bool(b) for b in pattern][: self.n_layer]
        else:
            n = int(pattern)
            self.is_swa = [n == 0 or il % n < n - 1 for il in range(self.n_layer)]
        self.w = {}
        for t in r.tensors:
            # gguf-py returns the numpy shape [ne1, ne0] = [out, in]; keep float32 storage
            a = dequantize(t.data, t.tensor_type)
            shape = tuple(int(s) for s in reversed(list(t.shape)))
            self.w[t.name] = np.asarray(a, dtype=np.float32).reshape(shape)
        biases = [n for n in self.w if n.endswith(".bias")]
        if biases:
            sys.exit(f"{path}: bias tensors {biases[:4]}... are not part of the gemma3 graph")
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])
        self._apply_variant()

    def _apply_variant(self):
        v = self.variant
        if v is None:
            return
        if v not in VARIANTS:
            sys.exit(f"unknown variant {v!r}")
        if v == "all-global":
            self.is_swa = [False] * self.n_layer
        elif v == "all-local":
            self.is_swa = [True] * self.n_layer
        elif v == "global-last":
            self.is_swa = [il % 6 != 0 for il in range(self.n_layer)]
        elif v == "local-base=global":
            self.base_swa = self.base
        elif v == "bases-swapped":
            self.base, self.base_swa = self.base_swa, self.base
        elif v == "softcap30":
            self.softcap = 30.0

    def W(self, name):
        return self.w[name].astype(np.float64)

    def rmsnorm(self, x, wname):
        w = self.W(wname) + (1.0 if self.variant == "norm+1" else 0.0)
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, base):
        # x: [T, n_heads, head_dim]; NeoX (llama.cpp mode 2): pair i is (x[i], x[i + hd/2])
        T, _, hd = x.shape
        half = hd // 2
        inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / hd)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]      # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        if self.variant == "rope-norm":                                     # self-check only
            a, b = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = a * sin + b * cos
            return out
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def gelu(self, x):
        if self.variant == "gelu-erf":
            return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
        if self.variant == "gelu-ggml-f16":
            xh = x.astype(np.float16).astype(np.float64)
            y = (0.5 * xh * (1.0 + np.tanh(SQRT_2_OVER_PI * xh * (1.0 + 0.044715 * xh * xh))))
            y = y.astype(np.float16).astype(np.float64)
            return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))
        return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))

    def mask(self, T, local):
        qp = np.arange(T)[:, None]
        kp = np.arange(T)[None, :]
        allowed = kp <= qp
        if local:
            w = self.n_swa + {"window+1": 1, "window-1": -1}.get(self.variant, 0)
            allowed &= (qp - kp) < w               # llama_hparams::is_masked_swa: p1 - p0 >= n_swa
        return np.where(allowed, 0.0, -np.inf)

    def forward(self, ids, rows=None):
        """Logits [T, n_vocab] (float64) for every position of ids (positions 0..T-1), or only
        for the positions in rows (a list) when given."""
        ids = np.asarray(ids, dtype=np.int64)
        T, hd, nh, nkv = len(ids), self.head_dim, self.n_head, self.n_head_kv
        group = nh // nkv
        scale = {None: np.sqrt(self.n_embd), "no-embd-scale": 1.0,
                 "embd-scale-bf16": bf16_round(np.sqrt(self.n_embd))}.get(self.variant, np.sqrt(self.n_embd))
        kq_scale = 1.0 / np.sqrt(self.n_embd // self.n_head if self.variant == "scale-d/h" else hd)
        x = self.w["token_embd.weight"][ids].astype(np.float64) * scale    # [T, d]
        masks = {local: self.mask(T, local) for local in (False, True)}
        for il in range(self.n_layer):
            p = f"blk.{il}."
            local = self.is_swa[il]
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q = (h @ self.W(p + "attn_q.weight").T).reshape(T, nh, hd)
            k = (h @ self.W(p + "attn_k.weight").T).reshape(T, nkv, hd)
            v = (h @ self.W(p + "attn_v.weight").T).reshape(T, nkv, hd)
            if self.variant != "no-qk-norm":
                q = self.rmsnorm(q, p + "attn_q_norm.weight")
                k = self.rmsnorm(k, p + "attn_k_norm.weight")
            base = self.base_swa if local else self.base
            q = self.rope(q, base) * kq_scale
            k = self.rope(k, base)
            att = np.empty((T, nh, hd))
            for hq in range(nh):
                hk = hq // group
                s = q[:, hq, :] @ k[:, hk, :].T + masks[local]               # [T, T]
                s = s - s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                att[:, hq, :] = (e / e.sum(axis=-1, keepdims=True)) @ v[:, hk, :]
            o = att.reshape(T, nh * hd) @ self.W(p + "attn_output.weight").T
            if self.variant != "no-post-norms":
                o = self.rmsnorm(o, p + "post_attention_norm.weight")
            x = x + o
            h = self.rmsnorm(x, p + "ffn_norm.weight")
            g = h @ self.W(p + "ffn_gate.weight").T
            u = h @ self.W(p + "ffn_up.weight").T
            f = (self.gelu(g) * u) @ self.W(p + "ffn_down.weight").T
            if self.variant != "no-post-norms":
                f = self.rmsnorm(f, p + "post_ffw_norm.weight")
            x = x + f
        if rows is not None:
            x = x[rows]
        h = self.rmsnorm(x, "output_norm.weight")
        logits = h @ self.out_w.astype(np.float64).T
        if self.softcap:
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits

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


def write_gate_vectors(m, ids, out_dir, cmd, prefix="tiny_gemma3"):
    """The tiny_<arch>_logits.txt / _greedy.txt formats of the llama and qwen2 references."""
    name = os.path.basename(m.path)
    logits = m.forward(ids)
    lp = os.path.join(out_dir, f"{prefix}_logits.txt")
    with open(lp, "w") as f:
        f.write(f"# Reference logits for {name}, made by ckb/gates/reference/gemma3_ref.py (float64,\n")
        f.write(f"# gguf-py dequantization, NeoX rope, sliding window {m.n_swa} on local layers "
                f"{[il for il in range(m.n_layer) if m.is_swa[il]]}, tied output). Command:\n")
        f.write(f"#   {cmd}\n")
        f.write(f"# Format: lines starting with '#' are comments. First data line: the {len(ids)} token ids\n")
        f.write(f"# (comma-separated, positions 0..{len(ids)-1}; the first is BOS, fed as an id: the engine\n")
        f.write("# must not add another). Then one line per position:\n")
        f.write(f"# the {m.n_vocab} logits of that position, space-separated, 6 significant digits.\n")
        f.write(",".join(str(i) for i in ids) + "\n")
        for row in logits:
            f.write(" ".join(f"{v:.6g}" for v in row) + "\n")
    gen, margins = m.greedy(ids, N_GREEDY)
    gp = os.path.join(out_dir, f"{prefix}_greedy.txt")
    with open(gp, "w") as f:
        f.write(f"# Reference greedy continuation for {name} (argmax, full recompute each step),\n")
        f.write("# made by ckb/gates/reference/gemma3_ref.py. Command:\n")
        f.write(f"#   {cmd}\n")
        f.write("# Format: '#' lines are comments; first data line: prompt ids (BOS included, fed as ids);\n")
        f.write("# second: generated ids.\n")
        f.write("# top1-top2 logit margin per step: " + " ".join(f"{x:.4f}" for x in margins) + "\n")
        f.write(",".join(str(i) for i in ids) + "\n")
        f.write(",".join(str(i) for i in gen) + "\n")
    print(f"wrote {lp} ({os.path.getsize(lp)} bytes), {gp}; greedy {gen}, min margin {min(margins):.4f}")


def self_check(path, ids):
    base = Model(path).forward(ids)
    scale = np.abs(base).max()
    print(f"reference: {len(ids)} positions, max |logit| {scale:.3f}")
    print(f"{'variant':18s} {'max-abs':>8s} {'rel':>7s} {'top1 diff':>9s}  first pos > 5e-2 rel")
    for v, what in VARIANTS.items():
        other = Model(path, variant=v).forward(ids)
        d = np.abs(other - base)
        per = d.max(axis=1) / scale
        first = next((t for t in range(len(ids)) if per[t] > 5e-2), None)
        top = int((other.argmax(1) != base.argmax(1)).sum())
        print(f"{v:18s} {d.max():8.4f} {d.max() / scale:7.4f} {top:9d}  {first}   ({what})")


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for gemma3 GGUF")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids (include BOS yourself)")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_gemma3 gate files")
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
        cmd = "python3 ckb/gates/reference/gemma3_ref.py ckb/gates/fixtures/tiny-gemma3.gguf " \
              f"--ids {','.join(map(str, ids))} --gate-vectors ckb/gates/vectors"
        write_gate_vectors(m, ids, a.gate_vectors, cmd)
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
