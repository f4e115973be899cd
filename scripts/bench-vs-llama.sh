#!/usr/bin/env bash
# Decode and prefill speed of the generated engine against llama.cpp on the same GGUF and
# thread count, measured alternately in one run, plus the memory-bandwidth ceiling.
#
#   scripts/bench-vs-llama.sh [MODEL] [THREADS] [ROUNDS]
#
# Needs llama-bench from scripts/anchor/build-llama-cpp.sh (LLAMA_BENCH overrides its path).
# ENGINE picks demo-engine's engine (default auto: avx512 where the cpu has AVX-512 VNNI, else
# avx2); compare ENGINE=avx2 with llama.cpp's AVX2 build, avx512 with its native one.
# Both decode 64 tokens after a 128-token prompt (llama-bench -p 0 -n 64 -d 128).
# Prints each measurement and the ratios ours / llama.cpp (median of the rounds, and of the
# best round of each side). Both sides warm up untimed first (llama-bench's default warm-up run;
# demo-engine bench's own).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:-$ROOT/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
T="${2:-2}"
ROUNDS="${3:-3}"
LLAMA_BENCH="${LLAMA_BENCH:-$ROOT/target/anchor/build/bin/llama-bench}"
[[ -x "$LLAMA_BENCH" ]] || { echo "bench: no llama-bench at $LLAMA_BENCH (run scripts/anchor/build-llama-cpp.sh or set LLAMA_BENCH)" >&2; exit 1; }
cargo build -q --release -p demo-engine
OURS="$ROOT/target/release/demo-engine"
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
    j=$("$OURS" bench --engine "${ENGINE:-auto}" --model "$MODEL" --threads "$T" --prompt-tokens 128 --gen-tokens 64 --reps 1 --json 2>/dev/null | tail -1)
    # demo-engine bench decodes right after its 128-token prompt, so llama.cpp's decode is
    # timed at the same depth (-d 128); its plain tg64 starts from an empty cache.
    l=$("$LLAMA_BENCH" -m "$MODEL" -t "$T" -p 128 -n 0 -r 1 -o json 2>/dev/null)
    d=$("$LLAMA_BENCH" -m "$MODEL" -t "$T" -p 0 -n 64 -d 128 -r 1 -o json 2>/dev/null)
    python3 - "$j" "$l" "$d" >>"$out" <<'PY'
import json, sys
ours = json.loads(sys.argv[1]); ll = json.loads(sys.argv[2]) + json.loads(sys.argv[3])
pp = [x["avg_ts"] for x in ll if x["n_prompt"] > 0][0]
tg = [x["avg_ts"] for x in ll if x["n_gen"] > 0][0]
print(ours["pp_tok_s"], ours["tg_tok_s"], pp, tg, ours["mem_gb_s"])
PY
    tail -1 "$out" | awk -v r="$r" '{printf "round %s: ours pp %.2f tg %.2f | llama.cpp pp %.2f tg %.2f\n", r, $1, $2, $3, $4}'
done
python3 - "$out" "$MODEL" "$T" <<'PY'
import statistics, sys, gguf
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = [statistics.median(c) for c in zip(*rows)]
print(f"median: ours pp {med[0]:.2f} tg {med[1]:.2f} tok/s; llama.cpp pp {med[2]:.2f} tg {med[3]:.2f} tok/s")
print(f"ratio ours/llama.cpp: prefill {med[0]/med[2]:.3f}x, decode {med[1]/med[3]:.3f}x")
# Contention on a shared machine only slows a run down, so the best round of each side is the
# steadier comparison when the medians swing from run to run.
best = [max(c) for c in zip(*rows)]
print(f"best rounds: ours pp {best[0]:.2f} tg {best[1]:.2f}; llama.cpp pp {best[2]:.2f} tg {best[3]:.2f}; "
      f"ratio prefill {best[0]/best[2]:.3f}x, decode {best[1]/best[3]:.3f}x")
r = gguf.GGUFReader(sys.argv[2])
# A decode step reads every matrix once but the embedding (one row of it), unless the output is
# tied to the embedding (no output.weight: SmolLM2, gemma3, Llama 3.2 1B), when the logits read
# all of it.
names = {t.name for t in r.tensors}
tied = "output.weight" not in names
per_tok = sum(int(t.n_bytes) for t in r.tensors if t.name != "token_embd.weight" or tied)
bw = med[4] * 1e9
print(f"weights read per token {per_tok/1e6:.1f} MB{' (the output tied to the embedding)' if tied else ''}; memory read bandwidth {med[4]:.1f} GB/s ({sys.argv[3]} threads) "
      f"-> decode ceiling {bw/per_tok:.1f} tok/s; ours at {med[1]*per_tok/bw*100:.0f}% of it, llama.cpp at {med[3]*per_tok/bw*100:.0f}%")
PY
rm -f "$out"
