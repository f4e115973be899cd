#!/usr/bin/env bash
# OPTIONAL anchor tool: build llama.cpp's CLI tools (CPU only, Release, native) from the
# llama.cpp copy vendored in the PyPI sdist of llama-cpp-python. MetaInfer does not depend on
# llama.cpp; it is only used to record reference numbers (greedy ids, perplexity, bench) that
# the gates compare against. No llama.cpp code is committed to this repository.
#
# Usage: scripts/anchor/build-llama-cpp.sh
# Env:
#   ANCHOR_DIR    where everything goes (default: <repo>/target/anchor, git-ignored)
#   LLAMA_SDIST   an already-downloaded llama_cpp_python-<ver>.tar.gz (default: pip download)
#   LLAMA_SRC     an already-unpacked llama.cpp source tree (skips the sdist entirely)
#   LLAMA_BUILD   an existing build dir to reuse (default: $ANCHOR_DIR/build)
#   JOBS          parallel build jobs (default: nproc)
#   ISA           native (default); native-noamx: native without AMX (llama-cpp-python 0.3.36's
#                 AMX matmul dies with SIGILL at its first tilezero on some VMs whose cpu lists
#                 amx_int8, while AMX itself works there), which leaves llama.cpp's AVX-512 + VNNI
#                 paths; or avx2: AVX2+FMA+F16C only, no AVX-512, for a same-ISA comparison with
#                 hw = "x86_64-avx2" engines (use another LLAMA_BUILD dir for each)
# Prints the bin dir on the last line. Re-running reuses the build dir (incremental).
# Shared libraries are built (libllama.so, libggml*.so in <build>/bin) so that the Python
# bindings shipped in the same sdist (llama_cpp/) can be used without pip-installing them:
#   PYTHONPATH=$ANCHOR_DIR/llama_cpp_python-<ver> LLAMA_CPP_LIB_PATH=<build>/bin python3 ...
# (scripts/anchor/llama-greedy.sh does exactly that; it needs numpy, jinja2, diskcache).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ANCHOR_DIR="${ANCHOR_DIR:-$REPO_ROOT/target/anchor}"
BUILD="${LLAMA_BUILD:-$ANCHOR_DIR/build}"
JOBS="${JOBS:-$(nproc)}"
WANTED=(llama llama-simple llama-completion llama-cli llama-bench llama-perplexity llama-tokenize llama-server)

die() { echo "build-llama-cpp: error: $*" >&2; exit 1; }
command -v cmake >/dev/null || die "cmake not found (apt-get install -y cmake)"
command -v c++ >/dev/null || die "no C++ compiler (apt-get install -y build-essential)"
mkdir -p "$ANCHOR_DIR"

if [[ -z "${LLAMA_SRC:-}" ]]; then
    if [[ -z "${LLAMA_SDIST:-}" ]]; then
        LLAMA_SDIST="$(ls "$ANCHOR_DIR"/sdist/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)"
        if [[ -z "$LLAMA_SDIST" ]]; then
            # Only the sdist itself is built from source; its build deps may come as wheels.
            python3 -m pip download --no-deps --no-binary llama-cpp-python \
                -d "$ANCHOR_DIR/sdist" "llama-cpp-python==$VERSION" \
                || die "pip download of llama-cpp-python==$VERSION failed"
            LLAMA_SDIST="$ANCHOR_DIR/sdist/llama_cpp_python-$VERSION.tar.gz"
        fi
    fi
    [[ -f "$LLAMA_SDIST" ]] || die "sdist not found: $LLAMA_SDIST"
    if [[ ! -d "$ANCHOR_DIR/llama_cpp_python-$VERSION" ]]; then
        tar -xzf "$LLAMA_SDIST" -C "$ANCHOR_DIR"
    fi
    LLAMA_SRC="$ANCHOR_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
[[ -f "$LLAMA_SRC/CMakeLists.txt" ]] || die "no llama.cpp source at $LLAMA_SRC (sdist lacks vendor/llama.cpp?)"

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    case "${ISA:-native}" in
        native) isa_flags=(-DGGML_NATIVE=ON) ;;
        native-noamx) isa_flags=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                                 "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16") ;;
        avx2) isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF) ;;
        *) die "ISA must be native, native-noamx or avx2, not ${ISA}" ;;
    esac
    cmake -S "$LLAMA_SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=ON
fi

# A build configured before llama-server was wanted (scripts/bench-serve.py): turn it on.
if grep -q "^LLAMA_BUILD_SERVER:BOOL=OFF" "$BUILD/CMakeCache.txt"; then
    cmake -S "$LLAMA_SRC" -B "$BUILD" -DLLAMA_BUILD_SERVER=ON
fi

# Build whichever of the wanted tools this llama.cpp version defines.
targets=()
avail="$(cmake --build "$BUILD" --target help 2>/dev/null || true)"
for t in "${WANTED[@]}"; do
    if grep -qE "(^|[ .:])$t(:|$| )" <<<"$avail"; then targets+=("$t"); fi
done
[[ ${#targets[@]} -gt 0 ]] || die "none of ${WANTED[*]} are targets of this llama.cpp"
echo "build-llama-cpp: building ${targets[*]} with $JOBS jobs"
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"
# where the python bindings of the same sdist live (used by llama-greedy.sh)
if [[ -d "$LLAMA_SRC/../../llama_cpp" ]]; then
    (cd "$LLAMA_SRC/../.." && pwd) > "$BUILD/bindings-path.txt"
fi
echo "$BUILD/bin"
