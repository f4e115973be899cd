#!/usr/bin/env bash
# OPTIONAL anchor tool: requantize a GGUF file with llama.cpp's own quantizer (llama-quantize's
# llama_model_quantize, through the Python bindings of the anchor build).
#   scripts/anchor/llama-quantize.sh IN OUT [TYPE]     TYPE: Q4_K_M (default), Q8_0, Q4_1, ...
# The input may itself be quantized (allow_requantize: its tensors are dequantized, then
# quantized again), so a real model of one family in a new file type needs no f16 download:
#   scripts/anchor/llama-quantize.sh models/SmolLM2-135M-Instruct.Q4_1.gguf \
#       models/SmolLM2-135M-Instruct.Q4_K_M.gguf Q4_K_M
# gives the llama-family Q4_K_M file the llama Q4_K_M engines' greedy_real gate runs on
# (ckb/gates/vectors/llamacpp_greedy_llama_q4_k_m.txt was recorded on it). The output is
# written under a temporary name and renamed when complete. Uses the llama.cpp built by
# scripts/anchor/build-llama-cpp.sh (same ANCHOR_DIR / LLAMA_BUILD env), 2 threads.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ANCHOR_DIR="${ANCHOR_DIR:-$REPO_ROOT/target/anchor}"
BUILD="${LLAMA_BUILD:-$ANCHOR_DIR/build}"
die() { echo "llama-quantize: error: $*" >&2; exit 1; }
[[ $# -eq 2 || $# -eq 3 ]] || die "usage: $0 IN OUT [TYPE]   (TYPE: Q4_K_M, Q8_0, Q4_1, ...; default Q4_K_M)"
[[ -f "$1" ]] || die "input not found: $1"
source "$REPO_ROOT/scripts/anchor/bindings.sh"
anchor_bindings "$BUILD"
exec python3 - "$1" "$2" "${3:-Q4_K_M}" <<'PY'
import ctypes, os, sys
import llama_cpp

src, dst, ty = sys.argv[1], sys.argv[2], sys.argv[3].upper()
ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ty}", None)
if ftype is None:
    known = sorted(n[len("LLAMA_FTYPE_MOSTLY_"):] for n in dir(llama_cpp) if n.startswith("LLAMA_FTYPE_MOSTLY_"))
    sys.exit(f"llama-quantize: error: unknown TYPE {ty!r}; llama.cpp knows {', '.join(known)}")
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = ftype
params.allow_requantize = True
params.nthread = 2
tmp = os.path.join(os.path.dirname(os.path.abspath(dst)), f".{os.path.basename(dst)}.{os.getpid()}.partial")
try:
    rc = llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit(f"llama-quantize: error: llama.cpp's quantizer returned {rc} for {src} (is it a GGUF model file?)")
    os.replace(tmp, dst)
finally:
    if os.path.exists(tmp):
        os.remove(tmp)
print(f"llama-quantize: wrote {dst} ({ty}, {os.path.getsize(dst)} bytes)")
PY
