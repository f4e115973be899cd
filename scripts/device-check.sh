#!/usr/bin/env bash
# The CUDA engines on a GPU machine, in one run: the kernels against their Rust references,
# greedy tokens of the sm_90 and sm_89 engines against the CPU engine, and speed.
#
#   scripts/device-check.sh
#
# Works offline from prebuilt binaries (a device machine may have no network and no cargo
# registry): set DEMO_ENGINE to a release `demo-engine` and CUDA_KERNELS_TEST to the test binary
# `cargo test -p metainfer-build --test cuda_kernels --no-run` printed (both built on a machine
# with the repo's toolchain); otherwise both are built here with cargo. MODEL (default the
# fetched real model) is used when present; the tiny committed fixture always is.
# Prints `DEVICE <what> key=value ...` lines and exits non-zero when any check fails.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODEL="${MODEL:-$ROOT/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
TINY="$ROOT/ckb/gates/fixtures/tiny-qwen2.gguf"
fail=0

nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader || echo "device-check: nvidia-smi failed" >&2

BIN="${DEMO_ENGINE:-}"
if [[ -z "$BIN" ]]; then
    cargo build -q --release -p demo-engine || exit 1
    BIN="$ROOT/target/release/demo-engine"
fi
KT="${CUDA_KERNELS_TEST:-}"
if [[ -z "$KT" ]]; then
    KT=$(cargo test -q -p metainfer-build --test cuda_kernels --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys; [print(j["executable"]) for j in map(json.loads, sys.stdin) if j.get("executable")]' | tail -1)
fi

# 1. every kernel against its Rust reference (fails rather than skips without a driver); the
# PTX comes from NVRTC where it is installed, else from the committed cache entries
ptx_dir=$(mktemp -d)
for f in cache/*/kernels/kernels_cuda.sm_*.ptx; do
    [[ -f "$f" ]] && cp "$f" "$ptx_dir/kernels_cuda.cuda.${f##*kernels_cuda.}"
done
if [[ -n "$KT" && -x "$KT" ]]; then
    if METAINFER_REQUIRE_CUDA=1 METAINFER_PTX_DIR="$ptx_dir" "$KT" --nocapture --test-threads=1; then echo "DEVICE kernels status=pass"; else echo "DEVICE kernels status=fail"; fail=1; fi
else
    echo "DEVICE kernels status=skipped reason=no_test_binary"
fi

# 2. greedy ids: each cuda engine against the CPU engine (generic: the reference order)
greedy() { # "engine [flags]" model prompt n -> ids
    # shellcheck disable=SC2086 # $1 is the engine and its flags
    "$BIN" generate --engine $1 --model "$2" --prompt "$3" --max-tokens "$4" --temperature 0 --print-ids 2>/dev/null | tail -1
}
compare() { # model n prompt...
    local model="$1" n="$2"; shift 2
    for prompt in "$@"; do
        cpu=$(greedy avx2 "$model" "$prompt" "$n")
        [[ -n "$cpu" ]] || cpu=$(greedy generic "$model" "$prompt" "$n")
        for e in sm_90 sm_89 "sm_90 --no-cuda-graph"; do
            gpu=$(greedy "$e" "$model" "$prompt" "$n")
            same=$(python3 -c 'import sys; a=sys.argv[1].split(","); b=sys.argv[2].split(","); n=0
while n < min(len(a),len(b)) and a[n]==b[n]: n+=1
print(n)' "$cpu" "$gpu")
            total=$(tr ',' '\n' <<<"$cpu" | grep -c .)
            echo "DEVICE greedy engine=${e// /} model=$(basename "$model") prompt=${prompt:0:24}... matching_prefix=$same tokens=$total"
            [[ "$cpu" == "$gpu" ]] || fail=1
        done
    done
}
compare "$TINY" 24 "Hello world" "The quick brown fox"
if [[ -f "$MODEL" ]]; then
    compare "$MODEL" 32 "def fibonacci(n):" "The capital of France is" "// A C function that reverses a string"
    # 3. speed: prefill and decode tok/s, and the fraction of HBM bandwidth decode reaches
    for e in sm_90 sm_89 "sm_90 --no-cuda-graph"; do
        # shellcheck disable=SC2086
        j=$("$BIN" bench --engine $e --model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --reps 3 --json 2>/dev/null | tail -1)
        echo "DEVICE bench engine=${e// /} $j"
    done
    j=$("$BIN" bench --engine sm_89 --model "$MODEL" --prompt-tokens 512 --gen-tokens 128 --reps 3 --json 2>/dev/null | tail -1)
    bw=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo 4800 || echo 0)
    python3 - "$MODEL" "$bw" "$j" <<'PY' || true
import json, os, sys
model, bw, j = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
gb = os.path.getsize(model) / 1e9  # weights read per decoded token, about the file size
if bw > 0:
    print(f"DEVICE bandwidth engine=sm_89 tg_tok_s={j['tg_tok_s']:.1f} gb_per_token={gb:.3f} used={j['tg_tok_s']*gb/bw:.3%} of {bw:.0f} GB/s")
PY
else
    echo "DEVICE real_model status=skipped reason=\"$MODEL is absent (scripts/fetch-model.sh)\""
fi
exit $fail
