#!/usr/bin/env bash
# Long prompts: prefill and decode speed of the generated engine against llama.cpp on the same
# GGUF and thread count, side by side in one run (issue 23's table).
#
#   scripts/bench-long.sh [MODEL]
#
# For each thread count in THREADS and prompt length N in LENGTHS: prefill of N tokens (ours:
# `demo-engine bench --prompt-tokens N`; llama.cpp: `llama-bench -p N -n 0`) and decode of 32
# tokens right after it, at depth N (`llama-bench -p 0 -n 32 -d N`); N = 0 is decode from an
# empty context (ours after a 1-token prompt). One run of each side per cell, alternating, so a
# slow spell of the machine hits both. Ours also reports its peak RSS (`--no-bandwidth`: without
# the bench's 1 GiB bandwidth probe, which was the peak of every row), whose growth with N is the
# KV cache (allocated zeroed, so its pages count only as positions fill).
# Env: THREADS (default "2 1"), LENGTHS (default "0 512 2048 8192 16384"), ENGINE (demo-engine's
# --engine, default auto), LLAMA_BENCH (default the anchor build's llama-bench).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:-$ROOT/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
THREADS="${THREADS:-2 1}"
LENGTHS="${LENGTHS:-0 512 2048 8192 16384}"
LLAMA_BENCH="${LLAMA_BENCH:-$ROOT/target/anchor/build/bin/llama-bench}"
[[ -x "$LLAMA_BENCH" ]] || { echo "bench-long: no llama-bench at $LLAMA_BENCH (run scripts/anchor/build-llama-cpp.sh or set LLAMA_BENCH)" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo build -q --release -p demo-engine
OURS="$ROOT/target/release/demo-engine"
rss=$(mktemp)
trap 'rm -f "$rss"' EXIT
echo "| threads | tokens | ours prefill tok/s | llama.cpp prefill tok/s | ratio | ours decode tok/s at depth | llama.cpp decode tok/s at depth | ratio | ours peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for T in $THREADS; do
    for N in $LENGTHS; do
        P=$((N > 0 ? N : 1))
        j=$(/usr/bin/time -f %M -o "$rss" "$OURS" bench --engine "${ENGINE:-auto}" --model "$MODEL" --threads "$T" \
            --prompt-tokens "$P" --gen-tokens 32 --reps 1 --json --no-bandwidth 2>/dev/null | tail -1)
        # (llama-bench's warm-up prefills the whole prompt again; past 2048 tokens it is skipped:
        # the model file is in the page cache by then, and ours warms up on 32 tokens)
        warm=$([[ $N -gt 2048 ]] && echo --no-warmup || true)
        l=$([[ $N -gt 0 ]] && "$LLAMA_BENCH" -m "$MODEL" -t "$T" -p "$N" -n 0 -r 1 $warm -o json 2>/dev/null || echo '[]')
        d=$("$LLAMA_BENCH" -m "$MODEL" -t "$T" -p 0 -n 32 -d "$N" -r 1 $warm -o json 2>/dev/null)
        python3 - "$j" "$l" "$d" "$T" "$N" "$(cat "$rss")" <<'PY'
import json, sys
ours, lp, ld = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
t, n, rss_kib = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
pp = lp[0]["avg_ts"] if lp else None
tg = ld[0]["avg_ts"]
cell = lambda a, b: (f"{a:.1f} | {b:.1f} | {a / b:.2f}x" if b else "- | - | -")
print(f"| {t} | {n} | {cell(ours['pp_tok_s'], pp) if n else '- | - | -'} | {cell(ours['tg_tok_s'], tg)} | {rss_kib / 1024:.0f} |", flush=True)
PY
    done
done
