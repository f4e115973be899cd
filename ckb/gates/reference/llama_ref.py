#!/usr/bin/env python3
"""Independent numpy reference forward pass for llama-family GGUF files (llama.cpp LLM_ARCH_LLAMA).

Written from the model definition, not from any engine: every tensor is dequantized with
gguf.quants.dequantize (gguf-py, the reference block decoders) and the whole forward pass is
computed in float64:

  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q,k,v = h@Wq, h@Wk, h@Wv                        (no biases)
              NORM rope on q,k (llama.cpp LLAMA_ROPE_TYPE_NORM): adjacent pairs (2i, 2i+1),
                theta_i = base^(-2i/hd), positions 0..T-1, rotated by pos * theta_i
              GQA causal attention, scale 1/sqrt(hd), kv head = q head // (n_head/n_head_kv)
              x += attn @ Wo
              h = rmsnorm(x) * ffn_norm
              x += (silu(h@Wgate) * (h@Wup)) @ Wdown
  logits = (rmsnorm(x) * output_norm) @ token_embd   (tied; output.weight if the file has one)
  rmsnorm(x) = x / sqrt(mean(x^2) + eps)
It refuses files with q/k/v/o or FFN bias tensors (the llama graph here has none) and files whose
llama.rope.dimension_count is not the head dim (partial rope is not modelled).

Usage (from the repository root; PYTHONPATH=/tmp/pylib where numpy/gguf were pip-installed there):
  python3 ckb/gates/reference/llama_ref.py MODEL.gguf --ids 1,2,3 --out logits.npy   # [T, n_vocab]
  python3 ckb/gates/reference/llama_ref.py MODEL.gguf --ids 1,2,3 --greedy 8         # greedy ids
  python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/tiny-llama.gguf --gate-vectors ckb/gates/vectors
      writes ckb/gates/vectors/tiny_llama_logits.txt and tiny_llama_greedy.txt (same formats as
      the tiny_qwen2_* files: the writer is qwen2_ref.write_gate_vectors)
  --rope neox: a self-check only (rotate halves as qwen2 does); never used for the vectors.
Needs: numpy, gguf (pip install numpy gguf).
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_ref  # noqa: E402  (only its gate-vectors writer: the same file formats)

DEFAULT_IDS = [1712, 17, 220, 871, 1001, 58, 315, 1499]   # fixed 8-token sequence for the tiny gate


class Model:
    def __init__(self, path, rope="norm"):
        self.path = path
        self.rope_mode = rope
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
        if arch != "llama":
            sys.exit(f"{path}: architecture {arch!r}, expected 'llama'")

        def meta(key, default=None):
            f = r.fields.get(f"{arch}.{key}")
            return default if f is None else f.contents()

        self.n_layer = int(meta("block_count"))
        self.n_embd = int(meta("embedding_length"))
        self.n_head = int(meta("attention.head_count"))
        self.n_head_kv = int(meta("attention.head_count_kv", self.n_head))
        self.eps = float(meta("attention.layer_norm_rms_epsilon"))
        self.base = float(meta("rope.freq_base", 10000.0))
        self.head_dim = self.n_embd // self.n_head
        n_rot = int(meta("rope.dimension_count", self.head_dim))
        if n_rot != self.head_dim:
            sys.exit(f"{path}: rope.dimension_count {n_rot} != head dim {self.head_dim} (not modelled)")
        self.w = {}
        for t in r.tensors:
            # gguf-py returns the numpy shape [ne1, ne0] = [out, in]; keep float32 storage
            a = dequantize(t.data, t.tensor_type)
            shape = tuple(int(s) for s in reversed(list(t.shape)))
            self.w[t.name] = np.asarray(a, dtype=np.float32).reshape(shape)
        biases = [n for n in self.w if n.endswith(".bias")]
        if biases:
            sys.exit(f"{path}: bias tensors {biases[:4]}... are not part of this llama graph")
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])

    def W(self, name):
        return self.w[name].astype(np.float64)

    def rmsnorm(self, x, wname):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.W(wname)

    def rope(self, x):
        # x: [T, n_heads, head_dim]
        T, _, hd = x.shape
        half = hd // 2
        inv = self.base ** (-2.0 * np.arange(half, dtype=np.float64) / hd)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]      # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        if self.rope_mode == "neox":                                        # self-check only
            a, b = x[..., :half], x[..., half:]
            return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
        # NORM (llama.cpp mode 0): pair i is (x[2i], x[2i+1])
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    def forward(self, ids):
        """Logits [T, n_vocab] (float64) for every position of ids."""
        ids = np.asarray(ids, dtype=np.int64)
        T, hd, nh, nkv = len(ids), self.head_dim, self.n_head, self.n_head_kv
        group = nh // nkv
        x = self.w["token_embd.weight"][ids].astype(np.float64)             # [T, d]
        mask = np.triu(np.full((T, T), -np.inf), k=1)
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q = h @ self.W(p + "attn_q.weight").T
            k = h @ self.W(p + "attn_k.weight").T
            v = h @ self.W(p + "attn_v.weight").T
            q = self.rope(q.reshape(T, nh, hd))
            k = self.rope(k.reshape(T, nkv, hd))
            v = v.reshape(T, nkv, hd)
            att = np.empty((T, nh, hd))
            for hq in range(nh):
                hk = hq // group
                s = (q[:, hq, :] @ k[:, hk, :].T) / np.sqrt(hd) + mask       # [T, T]
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


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for llama GGUF")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_llama gate files")
    ap.add_argument("--rope", choices=["norm", "neox"], default="norm",
                    help="rope mode (norm = llama.cpp's for llama; neox only as a self-check)")
    a = ap.parse_args()
    ids = [int(s) for s in a.ids.split(",")] if a.ids else DEFAULT_IDS
    m = Model(a.model, rope=a.rope)
    if a.gate_vectors:
        if a.rope != "norm":
            sys.exit("--gate-vectors is only written with the llama (norm) rope")
        cmd = "python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/tiny-llama.gguf " \
              f"--ids {','.join(map(str, ids))} --gate-vectors ckb/gates/vectors"
        qwen2_ref.write_gate_vectors(m, ids, a.gate_vectors, cmd, prefix="tiny_llama",
                                     script="llama_ref.py",
                                     how="gguf-py dequantization, NORM rope, tied output")
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
