# Sourced by the scripts that drive the anchor llama.cpp through the Python bindings of the
# llama-cpp-python sdist (scripts/anchor/build-llama-cpp.sh builds both). The caller defines
# `die`.
#   anchor_bindings BUILD [EXTRA_PYTHONPATH]
# checks that BUILD has libllama.so and the bindings' path, then puts the bindings (then
# EXTRA_PYTHONPATH) first on PYTHONPATH and points LLAMA_CPP_LIB_PATH at BUILD/bin.
anchor_bindings() {
    local build="$1" extra="${2:-}"
    [[ -f "$build/bin/libllama.so" ]] || die "no $build/bin/libllama.so; run scripts/anchor/build-llama-cpp.sh first (or set LLAMA_BUILD)"
    [[ -f "$build/bindings-path.txt" ]] || die "no $build/bindings-path.txt; re-run scripts/anchor/build-llama-cpp.sh"
    export PYTHONPATH="$(cat "$build/bindings-path.txt")${extra:+:$extra}${PYTHONPATH:+:$PYTHONPATH}"
    export LLAMA_CPP_LIB_PATH="$build/bin"
}
