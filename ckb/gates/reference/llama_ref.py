#!/usr/bin/env python3
"""Independent numpy reference forward pass for llama-family GGUF files (llama.cpp LLM_ARCH_LLAMA).

Written from the model definition, not from any engine: every tensor is dequantized with
gguf.quants.dequantize (gguf-py, the reference block decoders) and the whole forward pass is
computed in float64:

  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q,k,v = h@Wq, h@Wk, h@Wv                        (no biases; hd = attention.key_length
                                                                  where the file has it, else d / n_head)
              NORM rope on q,k (llama.cpp LLAMA_ROPE_TYPE_NORM): adjacent pairs (2i, 2i+1),
                theta_i = base^(-2i/hd), positions 0..T-1, rotated by pos * theta_i / ff_i
                ff_i = rope_freqs.weight[i] when the file has that tensor (Llama 3.x files carry
                it: f32, [hd/2] values, one global tensor for all layers; llama.cpp divides each
                angle by it, ggml_rope_cache_init's rope_yarn(theta/ff, ...)), else ff_i = 1.
                A rope_freqs.weight whose length is not hd/2 is refused.
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
  python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/tiny-llama-head-dim.gguf --gate-vectors ckb/gates/vectors
      the same for the head-dim fixture (make_tiny_llama.py --head-dim): tiny_llama_head_dim_logits.txt
      and tiny_llama_head_dim_greedy.txt (the prefix follows the file name)
  python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/tiny-llama.gguf --rope-freqs-vectors ckb/gates/vectors
      writes ckb/gates/vectors/tiny_llama_rope_freqs_logits.txt: a copy of the fixture plus a
      rope_freqs.weight tensor holding ROPE_FREQS_FACTORS (written with gguf-py, every KV and
      tensor copied as is; a temp file unless --keep PATH), run over DEFAULT_IDS. Same format as
      tiny_llama_logits.txt, with one more data line first: the 16 factors.
  --rope neox: a self-check only (rotate halves as qwen2 does); never used for the vectors.
Needs: numpy, gguf (pip install numpy gguf).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_ref  # noqa: E402  (only its gate-vectors writer: the same file formats)

DEFAULT_IDS = [1712, 17, 220, 871, 1001, 58, 315, 1499]   # fixed 8-token sequence for the tiny gate

# rope_freqs.weight for the --rope-freqs-vectors copy of the tiny fixture (head dim 32 -> 16 values,
# all exact in f32; mixed above and below 1 so every pair's angle moves, two left at 1).
ROPE_FREQS_FACTORS = [0.5, 2, 4, 1.5, 8, 0.75, 3, 1, 6, 1.25, 2.5, 5, 1, 16, 32, 1]


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
        # llama.cpp: attention.key_length where the file has it, else n_embd / n_head
        self.head_dim = int(meta("attention.key_length", self.n_embd // self.n_head))
        if int(meta("attention.value_length", self.head_dim)) != self.head_dim:
            sys.exit(f"{path}: attention.value_length != key_length {self.head_dim} (not modelled)")
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
        self.rope_freqs = None
        if "rope_freqs.weight" in self.w:
            ff = self.w["rope_freqs.weight"].astype(np.float64).reshape(-1)
            if ff.shape[0] != self.head_dim // 2:
                sys.exit(f"{path}: rope_freqs.weight has {ff.shape[0]} values, expected head_dim/2 = "
                         f"{self.head_dim // 2}")
            self.rope_freqs = ff
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
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs                                     # llama.cpp: theta / ff
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


def _kv_value(field):
    """(value, vtype, sub_type) of a GGUFReader field, strings as their raw bytes."""
    T = gguf.GGUFValueType
    vtype = field.types[0]
    if vtype == T.STRING:
        return bytes(field.parts[field.data[0]]), vtype, None
    if vtype == T.ARRAY:
        sub = field.types[-1]
        if len(field.types) != 2:
            sys.exit(f"{field.name}: nested arrays are not copied")
        if sub == T.STRING:
            return [bytes(field.parts[i]) for i in field.data], vtype, sub
        return [field.parts[i].tolist()[0] for i in field.data], vtype, sub
    return field.parts[field.data[0]].tolist()[0], vtype, None


def copy_gguf(src, dst, kv_set=None, extra_tensors=()):
    """Write dst = src with gguf-py: every KV (in order, same types; kv_set {key: str} replaces a
    string value) and every tensor (same name, type, shape, bytes), then extra_tensors
    [(name, float32 array)] appended. Checked by reading dst back."""
    kv_set_in = dict(kv_set or {})
    kv_set = dict(kv_set_in)
    replaced = set(kv_set)
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    w.kv_data[0].clear()                     # the writer pre-adds general.architecture: keep src order
    if "general.alignment" in r.fields:
        w.data_alignment = int(r.fields["general.alignment"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        val, vtype, sub = _kv_value(field)
        if key in kv_set:
            if vtype != gguf.GGUFValueType.STRING:
                sys.exit(f"{key}: only string KVs are replaced")
            val = kv_set.pop(key).encode("utf-8")
        w.add_key_value(key, val, vtype, sub_type=sub)
    if kv_set:
        sys.exit(f"{src}: no such keys {sorted(kv_set)}")
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    for name, arr in extra_tensors:
        w.add_tensor(name, np.asarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # read back: same KVs (raw bytes of every part, except the replaced ones), same tensors
    c = gguf.GGUFReader(dst)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in replaced:
            continue
        got = c.fields.get(key)
        if got is None or got.types != field.types or \
                [bytes(p) for p in got.parts] != [bytes(p) for p in field.parts]:
            sys.exit(f"{dst}: KV {key} was not copied faithfully")
    ct = {t.name: t for t in c.tensors}
    for t in r.tensors:
        u = ct.get(t.name)
        if u is None or u.tensor_type != t.tensor_type or list(u.shape) != list(t.shape) or \
                bytes(np.ascontiguousarray(u.data)) != bytes(np.ascontiguousarray(t.data)):
            sys.exit(f"{dst}: tensor {t.name} was not copied faithfully")
    for name, arr in extra_tensors:
        if name not in ct or not np.array_equal(np.asarray(ct[name].data), np.asarray(arr, dtype=np.float32)):
            sys.exit(f"{dst}: tensor {name} was not written")
    for key in replaced:
        if c.fields[key].contents() != dict(kv_set_in)[key]:
            sys.exit(f"{dst}: KV {key} was not replaced")
    if list(c.fields) != list(r.fields) or len(c.tensors) != len(r.tensors) + len(extra_tensors):
        sys.exit(f"{dst}: KV order or tensor count differs")


def write_rope_freqs_vectors(src, out_dir, ids, keep=None):
    """tiny_llama_rope_freqs_logits.txt: the reference logits of src + rope_freqs.weight."""
    ff = np.asarray(ROPE_FREQS_FACTORS, dtype=np.float32)
    if not np.array_equal(ff.astype(np.float64), np.asarray(ROPE_FREQS_FACTORS, dtype=np.float64)):
        sys.exit("ROPE_FREQS_FACTORS are not exact in f32")
    if keep:
        path = keep
    else:
        fd, path = tempfile.mkstemp(suffix=".gguf", prefix="tiny-llama-rope-freqs-")
        os.close(fd)
    try:
        copy_gguf(src, path, extra_tensors=[("rope_freqs.weight", ff)])
        m = Model(path)
        if m.rope_freqs is None or m.rope_freqs.shape[0] != len(ff):
            sys.exit(f"{path}: rope_freqs.weight not read back")
        logits = m.forward(ids)
    finally:
        if not keep:
            os.remove(path)
    name = os.path.basename(src)
    ffs = " ".join(f"{float(v):.9g}" for v in ff)
    if [float(x) for x in ffs.split()] != [float(v) for v in ff]:
        sys.exit("factor line does not parse back exactly")
    lp = os.path.join(out_dir, "tiny_llama_rope_freqs_logits.txt")
    with open(lp, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# Reference logits for {name} plus a rope_freqs.weight tensor, made by\n")
        f.write("# ckb/gates/reference/llama_ref.py (float64, gguf-py dequantization, NORM rope with the\n")
        f.write("# rope_freqs factors: angle(pos, i) = pos * base^(-2i/head_dim) / rope_freqs[i], tied output).\n")
        f.write("# The model is a copy of the fixture written with gguf-py: every KV and tensor as is, plus\n")
        f.write(f"# rope_freqs.weight (F32, [{len(ff)}] = head_dim/2, one global tensor as Llama 3.x files carry).\n")
        f.write("# Command:\n")
        f.write(f"#   python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/{name} "
                f"--ids {','.join(map(str, ids))} --rope-freqs-vectors ckb/gates/vectors\n")
        f.write("#   (--keep PATH keeps the copy with the factors; else it is a deleted temp file)\n")
        f.write(f"# Format: lines starting with '#' are comments. First data line: the {len(ff)} rope_freqs\n")
        f.write("# factors, space-separated, exact (each is an f32 value written in full), in tensor order.\n")
        f.write(f"# Second data line: the {len(ids)} token ids (comma-separated, positions 0..{len(ids)-1}, no BOS).\n")
        f.write(f"# Then one line per position: the {m.n_vocab} logits of that position, space-separated,\n")
        f.write("# 6 significant digits.\n")
        f.write(ffs + "\n")
        f.write(",".join(str(i) for i in ids) + "\n")
        for row in logits:
            f.write(" ".join(f"{v:.6g}" for v in row) + "\n")
    print(f"wrote {lp} ({os.path.getsize(lp)} bytes)" + (f"; kept the copy at {keep}" if keep else ""))


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for llama GGUF")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--out", help="write logits [T, n_vocab] float64 to this .npy")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_llama gate files")
    ap.add_argument("--rope-freqs-vectors", metavar="OUT_DIR",
                    help="write tiny_llama_rope_freqs_logits.txt (the model + a rope_freqs.weight)")
    ap.add_argument("--keep", metavar="PATH", help="with --rope-freqs-vectors: keep the copy here")
    ap.add_argument("--rope", choices=["norm", "neox"], default="norm",
                    help="rope mode (norm = llama.cpp's for llama; neox only as a self-check)")
    a = ap.parse_args()
    ids = [int(s) for s in a.ids.split(",")] if a.ids else DEFAULT_IDS
    if a.rope_freqs_vectors:
        if a.rope != "norm":
            sys.exit("--rope-freqs-vectors is only written with the llama (norm) rope")
        write_rope_freqs_vectors(a.model, a.rope_freqs_vectors, ids, keep=a.keep)
        return
    m = Model(a.model, rope=a.rope)
    if a.gate_vectors:
        if a.rope != "norm":
            sys.exit("--gate-vectors is only written with the llama (norm) rope")
        name = os.path.basename(a.model)
        prefix = name.removesuffix(".gguf").replace("-", "_")
        if not prefix.startswith("tiny_llama"):
            sys.exit(f"--gate-vectors writes the vectors of a tiny-llama*.gguf fixture, not {name}")
        cmd = f"python3 ckb/gates/reference/llama_ref.py ckb/gates/fixtures/{name} " \
              f"--ids {','.join(map(str, ids))} --gate-vectors ckb/gates/vectors"
        qwen2_ref.write_gate_vectors(m, ids, a.gate_vectors, cmd, prefix=prefix,
                                     script="llama_ref.py",
                                     how=f"gguf-py dequantization, NORM rope, head dim {m.head_dim}, tied output")
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
