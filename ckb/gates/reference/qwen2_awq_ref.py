#!/usr/bin/env python3
"""Independent numpy reference forward pass for AutoAWQ (GEMM) qwen2 checkpoints.

Reads config.json and model.safetensors itself (numpy over the file, no torch, no safetensors
package), unpacks every AWQ layer from its packed words with AutoAWQ's reverse order
[0, 4, 1, 5, 2, 6, 3, 7] and dequantizes W[i][o] = (q[i][o] - z[i/128][o]) * s[i/128][o] in
float64, then runs the float64 forward of qwen2_ref.py (same graph, same code) on the result.
A second, per-element unpack of a few columns checks the vectorized one.

Usage:
  python3 qwen2_awq_ref.py DIR --greedy 8
  python3 qwen2_awq_ref.py DIR --gate-vectors OUT_DIR   # OUT_DIR/tiny_qwen2_awq_{logits,greedy}.txt
Gate files:
  python3 ckb/gates/reference/qwen2_awq_ref.py ckb/gates/fixtures/tiny-qwen2-awq --gate-vectors ckb/gates/vectors
Needs: numpy (and gguf, which qwen2_ref.py imports).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_ref  # noqa: E402

REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]
GGUF_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}
DTYPES = {"F16": "<f2", "F32": "<f4", "I32": "<i4", "BF16": None}


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def unpack(packed):
    """[rows, out/8] int32 -> [rows, out] ints 0..15 (output 8c + j at nibble REVERSE_ORDER[j])."""
    w = packed.view(np.uint32)
    cols = [(w >> np.uint32(4 * REVERSE_ORDER[j])) & np.uint32(15) for j in range(8)]
    return np.stack(cols, axis=-1).reshape(w.shape[0], -1).astype(np.int64)


def dequant_awq(qweight, qzeros, scales, group):
    q, z = unpack(qweight), unpack(qzeros)
    s = scales.astype(np.float64)
    g = np.arange(q.shape[0]) // group
    return (q - z[g]) * s[g]                       # [in, out]


def check_unpack(qweight, qzeros, scales, group, w, cols=(0, 1, 5, 7, 8, 13)):
    """Per-element unpack with the packing order itself (AWQ_ORDER), on a few columns."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    for o in cols:
        nib = order.index(o % 8)                     # AutoAWQ put column 8c + order[i] at nibble i
        for i in range(0, qweight.shape[0], 37):
            q = (int(qweight[i, o // 8]) & 0xFFFFFFFF) >> (4 * nib) & 15
            z = (int(qzeros[i // group, o // 8]) & 0xFFFFFFFF) >> (4 * nib) & 15
            want = (q - z) * float(scales[i // group, o])
            assert w[i, o] == want, (i, o, w[i, o], want)


class AwqModel(qwen2_ref.Model):
    def __init__(self, path):
        self.path = path
        c = json.load(open(os.path.join(path, "config.json")))
        qc = c["quantization_config"]
        assert (qc["quant_method"], qc["bits"], qc["zero_point"], qc["version"]) == ("awq", 4, True, "gemm"), qc
        group = qc["group_size"]
        self.n_layer, self.n_embd = c["num_hidden_layers"], c["hidden_size"]
        self.n_head, self.n_head_kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.eps, self.base = c["rms_norm_eps"], c.get("rope_theta", 10000.0)
        self.head_dim = self.n_embd // self.n_head
        t = read_safetensors(os.path.join(path, "model.safetensors"))
        self.w = {}
        checked = False
        for name in sorted(t):
            stem, _, kind = name.rpartition(".")
            if stem == "model.embed_tokens":
                g = "token_embd"
            elif stem == "lm_head":
                g = "output"
            elif stem == "model.norm":
                g = "output_norm"
            else:
                _, _, n, part = stem.split(".", 3)
                g = f"blk.{n}.{GGUF_NAMES[part]}"
            if kind == "qweight":
                w = dequant_awq(t[name], t[stem + ".qzeros"], t[stem + ".scales"], group)
                if not checked:
                    check_unpack(t[name], t[stem + ".qzeros"], t[stem + ".scales"], group, w)
                    checked = True
                self.w[g + ".weight"] = w.T.astype(np.float64)          # [out, in], as qwen2_ref
            elif kind in ("weight", "bias"):
                self.w[f"{g}.{kind}"] = t[name].astype(np.float64)
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.out_w = self.w.get("output.weight", self.w["token_embd.weight"])


def main():
    ap = argparse.ArgumentParser(description="numpy float64 reference forward for AutoAWQ qwen2 checkpoints")
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation ids")
    ap.add_argument("--gate-vectors", metavar="OUT_DIR", help="write the tiny_qwen2_awq gate files")
    a = ap.parse_args()
    ids = [int(s) for s in a.ids.split(",")] if a.ids else qwen2_ref.DEFAULT_IDS
    m = AwqModel(a.model)
    if a.gate_vectors:
        cmd = "python3 ckb/gates/reference/qwen2_awq_ref.py ckb/gates/fixtures/tiny-qwen2-awq " \
              f"--ids {','.join(map(str, ids))} --gate-vectors ckb/gates/vectors"
        qwen2_ref.write_gate_vectors(m, ids, a.gate_vectors, cmd, prefix="tiny_qwen2_awq",
                                     script="qwen2_awq_ref.py", how="AWQ unpacked and dequantized here")
        return
    if a.greedy:
        gen, margins = m.greedy(ids, a.greedy)
        print(",".join(map(str, gen)))
        print("margins: " + " ".join(f"{x:.4f}" for x in margins), file=sys.stderr)
    else:
        print("argmax at last position:", int(np.argmax(m.forward(ids)[-1])))


if __name__ == "__main__":
    main()
