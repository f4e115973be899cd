#!/usr/bin/env python3
"""A GGUF's matrices requantized to Q8_0 (the F32 tensors and all metadata kept), for speed
measurements of the Q8_0 kernels on a real model's shapes and weights.

Each quantized tensor is dequantized and quantized again by gguf-py (the values are those of the
source file rounded to Q8_0, not of the original f16 model); general.file_type becomes 7
(MOSTLY_Q8_0). llama.cpp and the engines load the result like any Q8_0 file.

    PYTHONPATH=<dir with gguf, numpy> scripts/requant-q8_0.py models/SmolLM2-135M-Instruct.Q4_1.gguf OUT.gguf

Then: ENGINE=avx512 scripts/bench-vs-llama.sh OUT.gguf 2 5.
"""

import importlib.util
import sys
from pathlib import Path

try:
    import gguf
    import numpy as np
except ImportError as e:
    sys.exit(f"requant-q8_0: {e}: needs gguf-py and numpy (python3 -m pip install --target DIR gguf numpy; PYTHONPATH=DIR)")


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[2].strip())
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    # the metadata copier of synth-gguf.py (one definition of how a field is written back)
    spec = importlib.util.spec_from_file_location("synth_gguf", Path(__file__).resolve().parent / "synth-gguf.py")
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    try:
        r = gguf.GGUFReader(src)
    except (OSError, ValueError) as e:
        sys.exit(f"requant-q8_0: cannot read {src} as a GGUF file: {e}")
    arch = r.fields["general.architecture"].contents()
    tmp = out.with_name(out.name + ".partial")
    w = gguf.GGUFWriter(tmp, arch)
    for name, f in r.fields.items():
        if not name.startswith("GGUF.") and name not in ("general.architecture", "general.file_type"):
            synth.copy_field(w, f)
    w.add_uint32("general.file_type", 7)  # MOSTLY_Q8_0
    q8 = gguf.GGMLQuantizationType.Q8_0
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # rows, columns
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            w.add_tensor(t.name, np.array(t.data, dtype=np.float32).reshape(shape))
        else:
            x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
            w.add_tensor(t.name, gguf.quants.quantize(x, q8), raw_dtype=q8)
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)  # no half-written file left behind
        raise
    print(f"{out}: {out.stat().st_size / 1e6:.0f} MB, {len(r.tensors)} tensors ({arch})")


if __name__ == "__main__":
    main()
