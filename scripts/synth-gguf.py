#!/usr/bin/env python3
"""A llama- or qwen3-family GGUF of a chosen shape with random weights, for speed measurements only.

The real test models are small (0.1-0.5B) and their matrices are mostly Q5_0 / Q8_0 / Q4_1: their
widths (576, 640, 896) are not multiples of 256, so llama.cpp's Q4_K_M falls back to the legacy
types for them. Models of 1B and up have k-quant widths, and a Q4_K_M file of one is nearly all
Q4_K and Q6_K. This writes such a file: the shape of Llama-3.2-1B by default (2048 wide, 8192
feed-forward, 16 layers, 32 query / 8 kv heads of 64, tied embeddings) with llama.cpp's Q4_K_M
type choice per tensor (Q6_K for the tied embedding/output matrix, and for attn_v and ffn_down in
the layers llama.cpp gives more bits), the quant blocks random bytes with small scales (every
block is a valid one; the text generated is noise, the work per token is a real model's), and the
tokenizer, chat template and rope/norm settings of a donor llama GGUF (SmolLM2's by default).

    PYTHONPATH=<dir with gguf, numpy> scripts/synth-gguf.py OUT.gguf [--layers 16 ...]

`--arch qwen3` writes a qwen3-family file instead (per-head q/k norms, the head dim as its own key,
no biases), with the tokenizer, chat template and settings of a qwen2 donor (Qwen2.5-Coder's by
default: the same vocab as Qwen3's); Qwen3-0.6B's shape is
`--arch qwen3 --embd 1024 --ff 3072 --layers 28 --heads 16 --kv-heads 8 --head-dim 128`.

Both engines then run the same bytes: scripts/bench-vs-llama.sh OUT.gguf 2 3.
"""

import argparse
import sys
from pathlib import Path

try:
    import gguf
    import numpy as np
except ImportError as e:
    sys.exit(f"synth-gguf: {e}: needs gguf-py and numpy (python3 -m pip install --target DIR gguf numpy; PYTHONPATH=DIR)")

Q = gguf.GGMLQuantizationType


def use_more_bits(i: int, n: int) -> bool:
    # llama.cpp's llama_tensor_get_type for Q4_K_M: these layers' attn_v and ffn_down get Q6_K
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def random_rows(rng: np.random.Generator, ty, rows: int, cols: int) -> np.ndarray:
    """rows x cols values of type ty as random blocks: [rows][row bytes] of u8."""
    elems, size = gguf.GGML_QUANT_SIZES[ty]
    if cols % elems:
        sys.exit(f"synth-gguf: {cols} columns are not a whole number of {ty.name} blocks ({elems})")
    b = rng.integers(0, 256, size=(rows, cols // elems, size), dtype=np.uint8)
    small = np.frombuffer(np.float16(2.0**-14).tobytes(), dtype=np.uint8)
    if ty == Q.Q4_K:  # d, dmin (f16), scales[12], qs[128]
        b[:, :, 0:2] = small
        b[:, :, 2:4] = small
    elif ty == Q.Q6_K:  # ql[128], qh[64], scales[16] (i8), d (f16)
        b[:, :, 208:210] = small
    else:
        sys.exit(f"synth-gguf: no random blocks for {ty.name}")
    return b.reshape(rows, -1)


def copy_field(w: "gguf.GGUFWriter", f, name: str) -> None:
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        sub = f.types[1]
        if sub == gguf.GGUFValueType.STRING:
            val = [bytes(f.parts[i]).decode("utf-8", errors="surrogateescape") for i in f.data]
        else:
            val = [f.parts[i][0].item() for i in f.data]
        w.add_key_value(name, val, t, sub_type=sub)
    elif t == gguf.GGUFValueType.STRING:
        w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8", errors="surrogateescape"), t)
    else:
        w.add_key_value(name, f.parts[f.data[0]][0].item(), t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--arch", choices=["llama", "qwen3"], default="llama")
    ap.add_argument("--donor", type=Path, default=None,
                    help="a GGUF whose tokenizer and settings are copied: a llama-family one for --arch llama (default: SmolLM2's, "
                         "scripts/fetch-model.sh smollm2), a qwen2 one for qwen3 (default: Qwen2.5-Coder's, scripts/fetch-model.sh qwen2)")
    ap.add_argument("--head-dim", type=int, default=None, help="the head dim (default: --embd / --heads; qwen3 only otherwise)")
    ap.add_argument("--embd", type=int, default=2048)
    ap.add_argument("--ff", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.heads % a.kv_heads or (a.head_dim is None and a.embd % a.heads):
        sys.exit(f"synth-gguf: --embd {a.embd} must split into --heads {a.heads} (or give --head-dim), and those into --kv-heads {a.kv_heads}")
    if a.head_dim is not None and a.arch != "qwen3":
        sys.exit("synth-gguf: --head-dim is for --arch qwen3 (a llama file here takes embd / heads)")
    models = Path(__file__).resolve().parent.parent / "models"
    donor_arch = {"llama": "llama", "qwen3": "qwen2"}[a.arch]
    donor_path = a.donor or models / {"llama": "SmolLM2-135M-Instruct.Q4_1.gguf", "qwen3": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"}[a.arch]
    donor = gguf.GGUFReader(donor_path)
    if donor.fields["general.architecture"].contents() != donor_arch:
        sys.exit(f"synth-gguf: {donor_path} is not a {donor_arch}-family file (the donor of --arch {a.arch})")
    hd = a.head_dim or a.embd // a.heads
    arch = a.arch
    shape = {
        f"{arch}.block_count": a.layers,
        f"{arch}.embedding_length": a.embd,
        f"{arch}.feed_forward_length": a.ff,
        f"{arch}.attention.head_count": a.heads,
        f"{arch}.attention.head_count_kv": a.kv_heads,
        f"{arch}.rope.dimension_count": hd,
    }
    if arch == "qwen3":
        shape |= {"qwen3.attention.key_length": hd, "qwen3.attention.value_length": hd}
    tmp = a.out.with_name(a.out.name + ".partial")
    w = gguf.GGUFWriter(tmp, arch)
    # the donor's general.* fields describe the donor (its basename, finetune, size label,
    # license...), not this file: only how the file is laid out is kept
    keep_general = {"general.alignment", "general.quantization_version"}
    skip = set(shape)
    for name, f in donor.fields.items():
        if name.startswith(donor_arch + "."):
            name = arch + name[len(donor_arch):]  # the donor's rope base, eps, context under this arch
        if name.startswith("general.") and name not in keep_general:
            continue
        if not name.startswith("GGUF.") and name not in skip:
            copy_field(w, f, name)
    for k, v in shape.items():
        w.add_uint32(k, v)
    w.add_uint32("general.file_type", 15)  # MOSTLY_Q4_K_M
    w.add_name(f"synthetic {a.embd}x{a.layers} Q4_K_M (random weights)")
    n_vocab = len(donor.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(a.seed)

    def mat(name: str, ty, rows: int, cols: int) -> None:
        w.add_tensor(name, random_rows(rng, ty, rows, cols), raw_dtype=ty)

    mat("token_embd.weight", Q.Q6_K, n_vocab, a.embd)  # tied: also the output matrix
    w.add_tensor("output_norm.weight", np.ones(a.embd, dtype=np.float32))
    qd, kvd = a.heads * hd, a.kv_heads * hd
    for i in range(a.layers):
        more = Q.Q6_K if use_more_bits(i, a.layers) else Q.Q4_K
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(a.embd, dtype=np.float32))
        mat(f"blk.{i}.attn_q.weight", Q.Q4_K, qd, a.embd)
        mat(f"blk.{i}.attn_k.weight", Q.Q4_K, kvd, a.embd)
        mat(f"blk.{i}.attn_v.weight", more, kvd, a.embd)
        mat(f"blk.{i}.attn_output.weight", Q.Q4_K, a.embd, qd)
        if arch == "qwen3":
            w.add_tensor(f"blk.{i}.attn_q_norm.weight", np.ones(hd, dtype=np.float32))
            w.add_tensor(f"blk.{i}.attn_k_norm.weight", np.ones(hd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(a.embd, dtype=np.float32))
        mat(f"blk.{i}.ffn_gate.weight", Q.Q4_K, a.ff, a.embd)
        mat(f"blk.{i}.ffn_up.weight", Q.Q4_K, a.ff, a.embd)
        mat(f"blk.{i}.ffn_down.weight", more, a.embd, a.ff)
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        tmp.replace(a.out)
    except BaseException:
        tmp.unlink(missing_ok=True)  # no half-written file left behind
        raise
    print(f"{a.out}: {a.out.stat().st_size / 1e6:.0f} MB, {arch}, {a.layers} layers of {a.embd} (ff {a.ff}, head dim {hd}), vocab {n_vocab}")


if __name__ == "__main__":
    main()
