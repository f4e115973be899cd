#!/usr/bin/env bash
# The CUDA engines on a GPU machine, in one run: the kernels against their Rust references,
# greedy tokens of every CUDA engine against the CPU engine on the tiny fixtures and on the real
# models that are present, speed, and the fraction of the device's memory bandwidth decode reaches.
#
#   scripts/device-check.sh
#
# Works offline from prebuilt binaries (a device machine may have no network and no cargo
# registry): scripts/device-pack.sh packs both binaries and the models into .device/ (and prints
# the calls that carry them over), and this script unpacks and reassembles them; or set
# DEMO_ENGINE to a release `demo-engine` and CUDA_KERNELS_TEST to the test binary
# `cargo test -p metainfer-build --test cuda_kernels --no-run` printed; otherwise both are built
# here with cargo. QWEN (default the fetched Qwen2.5-Coder file) and SMOL (SmolLM2-135M Q4_1) are
# used when present; the tiny committed fixtures always are. Every engine run is bounded by
# `timeout` (STEP_TIMEOUT s, default 180) so a hung kernel cannot eat the machine's time; a failing
# run prints its stderr's tail.
# Prints `DEVICE <what> key=value ...` lines and exits non-zero when any check fails.
set -uo pipefail
# shellcheck source=scripts/device-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
FIX="$ROOT/ckb/gates/fixtures"
STEP_TIMEOUT="${STEP_TIMEOUT:-180}"
ONLY="${ONLY:-kernels,tiny,real,bench}"
fail=0
log=$(mktemp)
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# What scripts/device-pack.sh brought (.device/, git-ignored): the stripped binaries, unpacked
# here, and models in parts, put together in models/ and checked against their sha256.
if [[ -f "$DEV/bin.tar.xz" ]]; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
        "$DEV/bin.tar.xz" "$DEV" || { echo "device-check: cannot unpack $DEV/bin.tar.xz" >&2; exit 1; }
    DEMO_ENGINE="${DEMO_ENGINE:-$DEV/bin/demo-engine}"
    CUDA_KERNELS_TEST="${CUDA_KERNELS_TEST:-$DEV/bin/cuda_kernels}"
fi
for sum in "$DEV"/models/*.sha256; do
    [[ -f "$sum" ]] && { want real || want bench; } || continue
    name=$(awk '{print $2; exit}' "$sum")
    mkdir -p "$ROOT/models"
    if [[ -f "$ROOT/models/$name" ]] && (cd "$ROOT/models" && sha256sum --quiet -c "$sum" >/dev/null 2>&1); then
        continue
    fi
    parts=("$DEV/models/$name".part*)
    [[ -f "${parts[0]}" ]] || { echo "DEVICE model=$name status=skipped reason=\"no parts of it in $DEV/models\""; continue; }
    want_n=$((10#${parts[0]##*-of-}))
    missing=""
    for ((i = 0; i < want_n; i++)); do
        p=$(printf '%s/models/%s.part%02d-of-%02d' "$DEV" "$name" "$i" "$want_n")
        [[ -f "$p" ]] || missing+=" ${p##*/}"
    done
    if [[ -n "$missing" ]]; then
        echo "DEVICE model=$name status=fail reason=\"parts missing:$missing (carry them, one call each, on the warm machine)\""
        fail=1
        continue
    fi
    cat "${parts[@]}" >"$ROOT/models/$name.tmp"
    if (cd "$ROOT/models" && sha256sum --quiet -c <(sed 's/$/.tmp/' "$sum") >/dev/null 2>&1); then
        mv "$ROOT/models/$name.tmp" "$ROOT/models/$name"
        echo "DEVICE model=$name status=reassembled parts=$want_n sha256=ok"
    else
        rm -f "$ROOT/models/$name.tmp"
        echo "DEVICE model=$name status=fail reason=\"sha256 of the $want_n parts put together differs from $sum\""
        fail=1
    fi
done

nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader || echo "device-check: nvidia-smi failed" >&2

BIN="${DEMO_ENGINE:-}"
if [[ -z "$BIN" ]]; then
    cargo build -q --release -p demo-engine || exit 1
    BIN="$ROOT/target/release/demo-engine"
fi

# 1. every kernel against its Rust reference (fails rather than skips without a driver); the
# PTX comes from NVRTC where it is installed, else from the committed cache entries
if want kernels; then
    KT="${CUDA_KERNELS_TEST:-}"
    if [[ -z "$KT" ]]; then
        KT=$(cuda_kernels_test)
    fi
    ptx_dir=$(mktemp -d)
    for f in cache/*/kernels/kernels_cuda.sm_*.ptx; do
        [[ -f "$f" ]] && cp "$f" "$ptx_dir/kernels_cuda.cuda.${f##*kernels_cuda.}"
    done
    if [[ -n "$KT" && -x "$KT" ]]; then
        t0=$SECONDS
        if METAINFER_REQUIRE_CUDA=1 METAINFER_PTX_DIR="$ptx_dir" timeout "$STEP_TIMEOUT" "$KT" --nocapture --test-threads=1 >"$log" 2>&1; then
            echo "DEVICE kernels status=pass seconds=$((SECONDS - t0)) $(grep -E '^test result' "$log" | head -1)"
        else
            echo "DEVICE kernels status=fail seconds=$((SECONDS - t0))"
            tail -40 "$log"
            fail=1
        fi
    else
        echo "DEVICE kernels status=skipped reason=no_test_binary"
    fi
fi

# 2. greedy ids: each cuda engine against the CPU engine (avx2, else generic)
greedy() { # "engine [flags]" model prompt n -> ids; stderr to $log
    # shellcheck disable=SC2086 # $1 is the engine and its flags
    timeout "$STEP_TIMEOUT" "$BIN" generate --engine $1 --model "$2" --prompt "$3" --max-tokens "$4" --temperature 0 --print-ids 2>"$log" | tail -1
}
compare() { # model n "engines" prompt...
    local model="$1" n="$2" engines="$3"; shift 3
    local prompt cpu gpu e same total
    for prompt in "$@"; do
        cpu=$(greedy avx2 "$model" "$prompt" "$n")
        [[ -n "$cpu" ]] || cpu=$(greedy generic "$model" "$prompt" "$n")
        for e in $engines; do
            e=${e//+/ }
            local t0=$SECONDS
            gpu=$(greedy "$e" "$model" "$prompt" "$n")
            same=$(python3 -c 'import sys; a=sys.argv[1].split(","); b=sys.argv[2].split(","); n=0
while n < min(len(a),len(b)) and a[n]==b[n]: n+=1
print(n)' "$cpu" "$gpu")
            total=$(tr ',' '\n' <<<"$cpu" | grep -c .)
            echo "DEVICE greedy engine=${e// /} model=$(basename "$model") prompt=${prompt:0:24}... matching_prefix=$same tokens=$total seconds=$((SECONDS - t0))"
            if [[ -z "$cpu" || "$cpu" != "$gpu" ]]; then
                fail=1
                echo "  cpu: $cpu"
                echo "  gpu: $gpu"
                tail -15 "$log" | sed 's/^/  stderr: /'
            fi
        done
    done
}
QWEN_ENGINES="sm_90 sm_89 sm_80 sm_90+--no-cuda-graph"
if want tiny; then
    compare "$FIX/tiny-qwen2.gguf" 24 "$QWEN_ENGINES" "Hello world" "The quick brown fox"
    compare "$FIX/tiny-qwen2-awq" 24 "$QWEN_ENGINES" "Hello world"
    compare "$FIX/tiny-llama.gguf" 24 "sm_89 sm_89+--no-cuda-graph" "Hello world" "The quick brown fox"
    # head dim 32 with embedding 96 and 2 heads: q narrower than the embedding (the q_dim buffers)
    compare "$FIX/tiny-llama-head-dim.gguf" 24 "sm_89 sm_89+--no-cuda-graph" "Hello world"
fi
if want real; then
    if [[ -f "$QWEN" ]]; then
        compare "$QWEN" 32 "$QWEN_ENGINES" "def fibonacci(n):" "The capital of France is" "// A C function that reverses a string"
    else
        echo "DEVICE real_model model=qwen2 status=skipped reason=\"$QWEN is absent (scripts/fetch-model.sh)\""
    fi
    if [[ -f "$SMOL" ]]; then
        compare "$SMOL" 32 "sm_89 sm_89+--no-cuda-graph" "def fibonacci(n):" "The capital of France is" "// A C function that reverses a string"
    else
        echo "DEVICE real_model model=llama status=skipped reason=\"$SMOL is absent\""
    fi
fi

# 3. speed: prefill and decode tok/s at 128 and 2048 prompt tokens, and the fraction of the
# measured device-to-device copy bandwidth that decode reaches (weights read per token: about
# the file's size, every weight once)
if want bench; then
    bw=$(timeout 120 python3 - <<'PY' 2>/dev/null
import torch
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(20): b.copy_(a)
e.record(); torch.cuda.synchronize()
print(f"{2 * n * 20 / (s.elapsed_time(e) / 1e3) / 1e9:.0f}")
PY
    )
    echo "DEVICE bandwidth_probe d2d_copy_gb_s=${bw:-unknown} (bytes read + written)"
    for model in "$QWEN" "$SMOL"; do
        [[ -f "$model" ]] || continue
        case "$model" in *SmolLM2*) engines="sm_89 sm_89+--no-cuda-graph" ;; *) engines="$QWEN_ENGINES" ;; esac
        for e in $engines; do
            e=${e//+/ }
            for p in 128 2048; do
                # shellcheck disable=SC2086
                j=$(timeout "$STEP_TIMEOUT" "$BIN" bench --engine $e --model "$model" --prompt-tokens $p --gen-tokens 128 --reps 3 --json 2>"$log" | tail -1)
                if [[ -z "$j" ]]; then
                    echo "DEVICE bench engine=${e// /} model=$(basename "$model") prompt=$p status=fail"
                    tail -15 "$log" | sed 's/^/  stderr: /'
                    fail=1
                    continue
                fi
                python3 - "$model" "${bw:-0}" "$j" "${e// /}" "$p" <<'PY' || true
import json, os, sys
model, bw, j, e, p = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
gb = os.path.getsize(model) / 1e9
used = f" gb_per_token={gb:.3f} bandwidth_used={j['tg_tok_s'] * gb / bw:.1%}_of_{bw:.0f}_GB/s" if bw > 0 else ""
print(f"DEVICE bench engine={e} model={os.path.basename(model)} prompt={p} pp_tok_s={j['pp_tok_s']:.1f} tg_tok_s={j['tg_tok_s']:.1f}{used}")
PY
            done
        done
    done
fi
rm -f "$log"
exit $fail
