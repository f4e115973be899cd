#!/usr/bin/env bash
# OPTIONAL anchor tool: records llama.cpp's reference numbers for the long-prompt tests of
# demo-engine/tests/real_model.rs (queries attending to more than 512 positions, which the
# engines' prefill sends through their flash-attention kernel):
#   demo-engine/tests/data/llamacpp_ppl_long.txt     llama-perplexity -c 1024 over
#                                                    demo-engine/tests/data/apache-2.0.txt
#                                                    (2273 tokens -> 2 chunks), -fa off and -fa on
#   demo-engine/tests/data/llamacpp_greedy_long.txt  llama.cpp's greedy ids for one ~740-token
#                                                    prompt (the License's section 1 and a question
#                                                    in Qwen's chat format), 16 tokens, with the
#                                                    top1-top2 margins and the near tie
# Usage (from anywhere in a checkout; the model from scripts/fetch-model.sh, the llama.cpp from
# scripts/anchor/build-llama-cpp.sh, whose Python bindings need numpy, jinja2, diskcache):
#   scripts/record-long-vectors.sh
# Env:
#   MODEL        the GGUF file (default: models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
#   ONLY         ppl or greedy: record that file only
#   LLAMA_BUILD  the llama.cpp build dir (default: target/anchor/build-noamx when it exists, the
#                AVX-512 build without AMX that `ISA=native-noamx` gives, else target/anchor/build)
# The greedy file is written by ckb/gates/reference/llama_greedy.py itself (the recorder of
# ckb/gates/vectors/llamacpp_greedy_*.txt: same format, same margins, same near-tie rule, flash
# attention off as there), with only its n_ctx and n_batch raised from 512 to 2048 so the long
# prompt fits (n_batch too: llama_greedy.py's batch evaluation reads every row of get_logits(),
# which holds only the last llama_decode's rows; at n_batch 512 it compared the wrong rows and saw
# a "flip" at every step); comment lines then add llama.cpp's picks with flash attention on.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
ANCHOR_DIR="${ANCHOR_DIR:-$REPO_ROOT/target/anchor}"
if [[ -z "${LLAMA_BUILD:-}" ]]; then
    LLAMA_BUILD="$ANCHOR_DIR/build-noamx"
    [[ -d "$LLAMA_BUILD" ]] || LLAMA_BUILD="$ANCHOR_DIR/build"
fi
MODEL="${MODEL:-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
DATA=demo-engine/tests/data
TEXT="$DATA/apache-2.0.txt"
die() { echo "record-long-vectors: error: $*" >&2; exit 1; }
[[ -f "$MODEL" ]] || die "no $MODEL; run scripts/fetch-model.sh"
[[ -x "$LLAMA_BUILD/bin/llama-perplexity" ]] || die "no $LLAMA_BUILD/bin/llama-perplexity; run scripts/anchor/build-llama-cpp.sh"
[[ -f "$TEXT" ]] || die "no $TEXT (a copy of /usr/share/common-licenses/Apache-2.0)"

# --- perplexity, -c 1024, flash attention off and on -------------------------------------------
if [[ "${ONLY:-ppl}" == ppl ]]; then
declare -A PPL RUNNING
for fa in off on; do
    log="$(LD_LIBRARY_PATH="$LLAMA_BUILD/bin" "$LLAMA_BUILD/bin/llama-perplexity" -m "$MODEL" \
        -f "$TEXT" -c 1024 -t 2 -fa "$fa" 2>&1)" || die "llama-perplexity -fa $fa failed:
$log"
    PPL[$fa]="$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 +\/- \2/p' <<<"$log")"
    RUNNING[$fa]="$(grep -o '\[[0-9]*\][0-9.]*' <<<"$log" | paste -sd, -)"
    chunks="$(sed -n 's/.*calculating perplexity over \([0-9]*\) chunks.*/\1/p' <<<"$log")"
    [[ -n "${PPL[$fa]}" && -n "$chunks" ]] || die "no estimate in llama-perplexity's output:
$log"
done
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
isa="$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo AVX2)"
cat >"$DATA/llamacpp_ppl_long.txt" <<EOF
# llama.cpp perplexity of the real model at -c 1024 on demo-engine/tests/data/apache-2.0.txt
# (every scored position, 512..1023 of each chunk, attends to more than 512 positions).
# Recorded by scripts/record-long-vectors.sh with $(basename "$LLAMA_BUILD") (llama.cpp vendored in
# llama-cpp-python 0.3.36, scripts/anchor/build-llama-cpp.sh) on: $cpu, $isa.
# model: $(basename "$MODEL") (sha256 $(sha256sum "$MODEL" | cut -c1-64))
# command (bin = the build's bin dir): \$bin/llama-perplexity -m MODEL -f $TEXT -c 1024 -t 2 -fa off|on
# running estimate after each chunk: -fa off ${RUNNING[off]}; -fa on ${RUNNING[on]}
# Format: '#' lines are comments; "ppl <value> +/- <stderr> chunks <n> ctx <n_ctx>" is -fa off (the
# order the engines' short spans follow; the test compares to it), "ppl-fa-on ..." the same with -fa on.
ppl ${PPL[off]} chunks $chunks ctx 1024
ppl-fa-on ${PPL[on]} chunks $chunks ctx 1024
EOF
echo "wrote $DATA/llamacpp_ppl_long.txt: -fa off ${PPL[off]}, -fa on ${PPL[on]}" >&2
fi
[[ "${ONLY:-greedy}" == greedy ]] || exit 0

# --- greedy ids of one long prompt --------------------------------------------------------------
source "$REPO_ROOT/scripts/anchor/bindings.sh"
anchor_bindings "$LLAMA_BUILD" "$REPO_ROOT/ckb/gates/reference"
OUT="$DATA/llamacpp_greedy_long.txt"
python3 - "$MODEL" "$TEXT" "$OUT" <<'PY'
import sys
import llama_cpp
import llama_greedy

model, text, out = sys.argv[1:4]
# the License up to the end of section 1 (Definitions), then a question whose answer quotes its
# start, ~600 positions back (its margins are all above 0.3, with flash attention off and on)
section1 = "".join(open(text, encoding="utf-8").readlines()[:66])
prompt = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + section1
          + "\nWhat does \"control\" mean in this License? Answer with the three conditions.<|im_end|>\n"
          + "<|im_start|>assistant\n")

Llama, fa = llama_cpp.Llama, [False]


def long_llama(**kw):
    # llama_greedy's settings with room for the long prompt; n_batch as n_ctx too: its batch
    # evaluation reads every row of get_logits(), which holds the last llama_decode's rows only
    # (llama.cpp still splits a decode into ubatches of 512, as at n_batch 512)
    kw["n_ctx"] = kw["n_batch"] = 2048
    return Llama(flash_attn=fa[0], **kw)


llama_cpp.Llama = long_llama
sys.argv = ["llama_greedy.py", model, "16", "--record", out, prompt]
llama_greedy.main()
fa[0] = True
toks, ids, margins = llama_greedy.greedy(long_llama(model_path=model, n_batch=512, n_threads=2,
                                                    n_threads_batch=2, n_gpu_layers=0,
                                                    logits_all=False, verbose=False), prompt, 16)
lines = open(out, encoding="utf-8").read().splitlines(keepends=True)
note = ["# (scripts/record-long-vectors.sh: llama_greedy.py's recording with n_ctx and n_batch 2048, flash attention\n",
        f"# off; the prompt is {len(toks)} tokens. With flash attention on, llama.cpp picks:\n",
        "#   " + ",".join(map(str, ids)) + "\n",
        "#   margins: " + " ".join(f"{m:.3f}" for m in margins) + ")\n"]
open(out, "w", encoding="utf-8").writelines(lines[:1] + note + lines[1:])
print(f"flash attention on: {ids}", file=sys.stderr)
PY
echo "wrote $OUT" >&2
