#!/usr/bin/env bash
# OPTIONAL anchor tool: record ggml's vectorized expf and silu (ggml_v_expf / ggml_v_silu, AVX2
# form, from the vec.h of the llama.cpp copy that scripts/anchor/build-llama-cpp.sh unpacked) on
# a fixed set of inputs, for the vec_ops gate (ckb/gates/kernels.rs, gate_vec_ops). A small
# harness is compiled against that header with the anchor's flags (-O3 -march=native, gnu++17);
# no llama.cpp code is committed. Needs an x86-64 host with AVX2 and FMA.
#
#   scripts/anchor/ggml-expf-vectors.sh [OUT]   (default ckb/gates/vectors/ggml_expf.txt)
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ANCHOR_DIR="${ANCHOR_DIR:-$REPO_ROOT/target/anchor}"
OUT="${1:-$REPO_ROOT/ckb/gates/vectors/ggml_expf.txt}"
die() { echo "ggml-expf-vectors: error: $*" >&2; exit 1; }
GGML="$(ls -d "$ANCHOR_DIR"/llama_cpp_python-*/vendor/llama.cpp/ggml 2>/dev/null | head -1)"
[[ -n "$GGML" && -f "$GGML/src/ggml-cpu/vec.h" ]] || die "no llama.cpp source under $ANCHOR_DIR; run scripts/anchor/build-llama-cpp.sh first"
grep -q avx2 /proc/cpuinfo && grep -q fma /proc/cpuinfo || die "this host lacks AVX2 or FMA"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/h.cpp" <<'CPP'
#include "vec.h"
#include <cstdio>
#include <cstring>
#include <cstdint>
// reads hex f32 bit patterns, prints "x expf silu" as hex bits (lane 0 of an 8-lane call)
int main() {
    unsigned b;
    while (scanf("%x", &b) == 1) {
        float x[8], e[8], s[8];
        memcpy(&x[0], &b, 4);
        for (int i = 1; i < 8; i++) x[i] = x[0];
        _mm256_storeu_ps(e, ggml_v_expf(_mm256_loadu_ps(x)));
        _mm256_storeu_ps(s, ggml_v_silu(_mm256_loadu_ps(x)));
        uint32_t eb, sb;
        memcpy(&eb, &e[0], 4);
        memcpy(&sb, &s[0], 4);
        printf("%08x %08x %08x\n", b, eb, sb);
    }
}
CPP
c++ -O3 -march=native -std=gnu++17 -I"$GGML/src/ggml-cpu" -I"$GGML/src" -I"$GGML/include" "$work/h.cpp" -o "$work/h"
# inputs: the special values, every 1/4 from -200 to 100 (the overflow, underflow and scaled
# branches included), and 1000 values from a fixed LCG in [-12, 12) (silu's and softmax's range)
python3 - >"$work/in" <<'PY'
import struct
def bits(v): return struct.unpack('<I', struct.pack('<f', v))[0]
xs = [0.0, -0.0, float('inf'), float('-inf'), 3.4e38, -3.4e38, 1e-30, -1e-30]
xs += [i / 4.0 for i in range(-200 * 4, 100 * 4 + 1)]
s = 12345
for _ in range(1000):
    s = (s * 6364136223846793005 + 1442695040888963407) % 2**64
    xs.append(struct.unpack('<f', struct.pack('<f', ((s >> 40) / 2**24) * 24.0 - 12.0))[0])
print("\n".join("%08x" % bits(x) for x in xs))
PY
tmp="$OUT.tmp.$$"
{
    echo "# ggml_v_expf and ggml_v_silu (AVX2 form) per input, made by scripts/anchor/ggml-expf-vectors.sh"
    echo "# from the ggml vendored in ${GGML#"$ANCHOR_DIR"/} ($(c++ --version | head -1), -O3 -march=native)"
    echo "# format: x expf(x) silu(x), each as the hex bits of an f32"
    "$work/h" <"$work/in"
} >"$tmp"
mv "$tmp" "$OUT"
echo "wrote $(grep -vc '^#' "$OUT") cases to $OUT"
