#!/usr/bin/env bash
# OPTIONAL anchor tool: print llama.cpp's greedy token ids for a raw prompt.
#   scripts/anchor/llama-greedy.sh MODEL PROMPT N
# No BOS, no chat template, argmax each step, N tokens (stops early after an EOG token, which is
# printed), 2 threads. Uses the llama.cpp built by scripts/anchor/build-llama-cpp.sh (same
# ANCHOR_DIR / LLAMA_BUILD env) through the Python bindings of the same PyPI sdist.
# Needs python3 with numpy, jinja2, diskcache (pip install numpy jinja2 diskcache).
# Record the gate file (MODEL N --record OUT PROMPT...) with:
#   scripts/anchor/llama-greedy.sh --record MODEL N OUT PROMPT...
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ANCHOR_DIR="${ANCHOR_DIR:-$REPO_ROOT/target/anchor}"
BUILD="${LLAMA_BUILD:-$ANCHOR_DIR/build}"
die() { echo "llama-greedy: error: $*" >&2; exit 1; }
source "$REPO_ROOT/scripts/anchor/bindings.sh"
anchor_bindings "$BUILD"
PY="$REPO_ROOT/ckb/gates/reference/llama_greedy.py"
if [[ "${1:-}" == "--record" ]]; then
    shift
    [[ $# -ge 4 ]] || die "usage: $0 --record MODEL N OUT PROMPT..."
    model="$1" n="$2" out="$3"; shift 3
    exec python3 "$PY" "$model" "$n" --record "$out" "$@"
fi
[[ $# -eq 3 ]] || die "usage: $0 MODEL PROMPT N"
[[ -f "$1" ]] || die "model not found: $1"
exec python3 "$PY" "$1" "$3" "$2"
