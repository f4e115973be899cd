#!/usr/bin/env python3
"""Independent numpy reference forward pass for qwen2-family GGUF files.

Written from the model definition, not from any engine: every tensor is dequantized with
gguf.quants.dequantize (gguf-py, the reference block decoders) and the whole forward pass is
computed in float64:

  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q,k,v = h@Wq+bq, h@Wk+bk, h@Wv+bv            (qkv biases)
              NeoX rope on q,k: pairs (i, i+hd/2), theta_i = base^(-2i/hd), positions 0..T-1
              GQA causal attention, scale 1/sqrt(hd), kv head = q head // (n_head/n_head_kv)
              x += attn @ Wo
              h = rmsnorm(x) * ffn_norm
              x += (silu(h@Wgate) * (h@Wup)) @ Wdown
  logits = (rmsnorm(x) * output_norm) @ Woutput   (token_embd if output.weight is absent)
  rmsnorm(x) = x / sqrt(mean(x^2) + eps)

Usage:
  python3 qwen2_ref.py MODEL.gguf --ids 1,2,3 --out logits.npy        # [T, n_vocab] float64
  python3 qwen2_ref.py MODEL.gguf --ids 1,2,3 --greedy 8              # print greedy ids
  python3 qwen2_ref.py MODEL.gguf --gate-vectors OUT_DIR [--ids ...]  # write the gate files
      OUT_DIR/tiny_qwen2_logits.txt and OUT_DIR/tiny_qwen2_greedy.txt (formats in their headers)
Needs: numpy, gguf (pip install numpy gguf).
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

DEFAULT_IDS = [2001, 9, 220, 1234, 42, 1999, 0, 13]   # fixed 8-token sequence for the tiny gate
N_GREEDY = 8


class Model:
    def __init__(self, path):
        self.path = path
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
        if arch != "qwen2":
            sys.exit(f"{path}: architecture {arch!r}, expected 'qwen2'")

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
        self.w = {}
        for t in r.tensors:
            # gguf-py returns the numpy shape [ne1, ne0] = [out, in]; keep float32 storage
            a = dequantize(t.data, t.tensor_type)
            shape = tuple(int(s) for s in reversed(list(t.shape)))
            self.w[t.name] = np.asarray(a, dtype=np.float32).reshape(shape)
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])

    def W(self, name):
        return self.w[name].astype(np.float64)

    def rmsnorm(self, x, wname):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.W(wname)

    def rope(self, x):
        # x: [T, n_heads, head_dim], NeoX style (rotate halves)
        T, _, hd = x.shape
        half = hd // 2
        inv = self.base ** (-2.0 * np.arange(half, dtype=np.float64) / hd)
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]      # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

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
            q = h @ self.W(p + "attn_q.weight").T + self.W(p + "attn_q.bias")
            k = h @ self.W(p + "attn_k.weight").T + self.W(p + "attn_k.bias")
            v = h @ self.W(p + "attn_v.weight").T + self.W(p + "attn_v.bias")
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


def write_gate_vectors(m, ids, out_dir, cmd, prefix="tiny_qwen2", script="qwen2_ref.py", how="gguf-py dequantization"):
    name = os.path.basename(m.path)
    logits = m.forward(ids)
    lp = os.path.join(out_dir, f"{prefix}_logits.txt")
    with open(lp, "w") as f:
        f.write(f"# Reference logits for {name}, made by ckb/gates/reference/{script} (float64,\n")
        f.write(f"# {how}). Command:\n")
        f.write(f"#   {cmd}\n")
        f.write(f"# Format: lines starting with '#' are comments. First data line: the {len(ids)} token ids\n")
        f.write(f"# (comma-separated, positions 0..{len(ids)-1}, no BOS). Then one line per position:\n")
        f.write(f"# the {m.n_vocab} logits of that position, space-separated, 6 significant digits.\n")
        f.write(",".join(str(i) for i in ids) + "\n")
        for row in logits:
            f.write(" ".join(f"{v:.6g}" for v in row) + "\n")
    gen, margins = m.greedy(ids, N_GREEDY)
    gp = os.path.join(out_dir, f"{prefix}_greedy.txt")
    with open(gp, "w") as f:
        f.write(f"# Reference greedy continuation for {name} (argmax, full recompute each step),\n")
        f.write(f"# made by ckb/gates/reference/{script}. Command:\n")
        f.write(f"#   {cmd}\n")
        f.write("# Format: '#' lines are comments; first data line: prompt ids; second: generated ids.\n")
        f.write("# top1-top2 logit margin per step: " + " ".join(f"{x:.4f}" for x in margins) + "\n")
        f.write(",".join(str(i) for i in ids) + "\n")
        f.write(",".join(str(i) for i in gen) + "\n")
    print(f"wrote {lp} ({os.path.getsize(lp)} bytes), {gp}; greedy {gen}, min margin {min(margins):.4f}")


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for qwen2 GGUF")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_qwen2 gate files")
    a = ap.parse_args()
    ids = [int(s) for s in a.ids.split(",")] if a.ids else DEFAULT_IDS
    m = Model(a.model)
    if a.gate_vectors:
        cmd = "python3 ckb/gates/reference/qwen2_ref.py ckb/gates/fixtures/tiny-qwen2.gguf " \
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
