#!/usr/bin/env bash
# The x86 gemv kernels of generated engines against llama.cpp's (ggml_vec_dot_*) on the same
# bytes, one thread, L2-resident (~256 KiB matrices): the compute side of a decode matvec.
#
#   scripts/kernel-bench.sh [CACHE_KEY_PREFIX...]
#
# Default: every x86_64-avx2 GGUF entry in cache/. For each entry a small crate around its
# engine.rs (target/kernel-bench/<key>) runs scripts/kernel-bench/bench.rs inside the kernels
# gate's module (its random rows), then scripts/kernel-bench/ggml.c, linked against the anchor
# build's libggml (scripts/anchor/build-llama-cpp.sh; LLAMA_LIB overrides its directory), times
# ggml's function for that type on the rows and activation bench.rs wrote. Prints ns per row:
# ours one row at a time, ours four rows at a time (dot_rows4, where the type has it: what decode
# uses), ggml's, and the speed ratio ours (the decode form) / ggml's. KB_REPS sets the passes
# (best of; 2000). Then "streamed": one thread over the rows repeated to 96 MiB, GB/s of weights
# (median of 15), ours through the engine's matvec (its prefetch and decode form) and ggml's
# vec_dot row after row: decode reads its weights from memory, and a kernel that wins in L2 can
# lose there (a four-row Q4_K form did: 1.15x in L2, ~0.9x of the one-row kernel streamed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIB="${LLAMA_LIB:-$ROOT/target/anchor/build/bin}"
REPS="${KB_REPS:-2000}"
[[ -f "$LIB/libggml-cpu.so" ]] || { echo "kernel-bench: no libggml-cpu.so in $LIB (run scripts/anchor/build-llama-cpp.sh or set LLAMA_LIB)" >&2; exit 1; }
OUT="$ROOT/target/kernel-bench"
mkdir -p "$OUT"
gcc -O2 -o "$OUT/ggml" "$ROOT/scripts/kernel-bench/ggml.c" -L"$LIB" -lggml-cpu -lggml-base -Wl,-rpath,"$LIB"
keys=()
for e in "$ROOT"/cache/*/manifest.toml; do
    k=$(basename "$(dirname "$e")")
    if [[ $# -gt 0 ]]; then
        for p in "$@"; do [[ $k == "$p"* ]] && keys+=("$k"); done
    elif grep -q '^hw = "x86_64-avx2"' "$e" && grep -q '^format = "gguf"' "$e"; then
        keys+=("$k")
    fi
done
[[ ${#keys[@]} -gt 0 ]] || { echo "kernel-bench: no cache entry matches ${*:-x86_64-avx2 gguf}" >&2; exit 1; }
for k in "${keys[@]}"; do
    crate="$OUT/${k:0:16}"
    mkdir -p "$crate/src" "$crate/data"
    cat >"$crate/Cargo.toml" <<TOML
[package]
name = "kernel-bench-${k:0:16}"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
metainfer-rt = { path = "$ROOT/metainfer-rt", features = ["server"] }

[profile.release]
opt-level = 3

[workspace]
TOML
    cat >"$crate/src/lib.rs" <<RS
#![allow(dead_code, unused_imports)]
use metainfer_rt as rt;
include!("$ROOT/cache/$k/engine.rs");
pub(crate) const METAINFER_KERNELS: &[(&str, &[u8])] = &[];
#[cfg(test)]
mod gate_common {
    use super::*;
    include!("$ROOT/ckb/gates/common.rs");
}
#[cfg(test)]
pub(crate) use gate_common::*;
#[cfg(test)]
mod gate_kernels {
    use super::*;
    include!("$ROOT/ckb/gates/kernels.rs");
    include!("$ROOT/scripts/kernel-bench/bench.rs");
}
RS
    field() { sed -n "s/^$1 = \"\(.*\)\"/\1/p" "$ROOT/cache/$k/manifest.toml" | head -1; }
    echo "== ${k:0:16} ($(field model), $(field hw))"
    bench() { (cd "$crate" && CARGO_TARGET_DIR="$OUT/target" KB_DIR="$crate/data" KB_REPS="$REPS" cargo test -q --release --lib "$@"); }
    bench --no-run 2>"$crate/build.log" || { cat "$crate/build.log" >&2; echo "kernel-bench: $crate does not build (above)" >&2; exit 1; }
    res=$(bench -- --nocapture --exact gate_kernels::kernel_bench 2>"$crate/run.log") \
        || { echo "$res" >&2; tail -20 "$crate/run.log" >&2; echo "kernel-bench: the bench of ${k:0:16} failed (above)" >&2; exit 1; }
    streamed=$(bench -- --nocapture --exact gate_kernels::kernel_stream 2>"$crate/run.log") \
        || { echo "$streamed" >&2; tail -20 "$crate/run.log" >&2; echo "kernel-bench: the streamed bench of ${k:0:16} failed (above)" >&2; exit 1; }
    grep '^KB ' <<<"$res" | while read -r _ ty cols rows one four; do
        cols=${cols#cols=}; rows=${rows#rows=}; one=${one#one_row_ns=}; four=${four#four_row_ns=}
        stream=$(sed -n "s/^KS $ty stream_gb_s=//p" <<<"$streamed")
        gg=$("$OUT/ggml" "$ty" "$cols" "$rows" "$crate/data" "$REPS")
        read -r g gstream <<<"$gg"
        ours=$([[ $four == - ]] && echo "$one" || echo "$four")
        printf '%-5s %5s cols %4s rows: ours %7s ns/row one row, %7s four rows; ggml %7s; speed ours/ggml %sx; streamed %6s / %6s GB/s = %sx\n' \
            "$ty" "$cols" "$rows" "$one" "$four" "$g" "$(awk -v a="$ours" -v b="$g" 'BEGIN { printf "%.2f", b / a }')" \
            "$stream" "$gstream" "$(awk -v a="$stream" -v b="$gstream" 'BEGIN { printf "%.2f", a / b }')"
    done
done
