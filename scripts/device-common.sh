# Sourced by scripts/device-pack.sh and scripts/device-check.sh: the repo root (made the working
# directory), the real models they use (QWEN, SMOL: env overrides), the git-ignored folder the
# packed files go to (DEV), and how to find the cuda_kernels test binary.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
QWEN="${QWEN:-$ROOT/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}"
SMOL="${SMOL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
DEV="$ROOT/.device"

# Builds the cuda_kernels test without running it and prints its executable's path.
cuda_kernels_test() {
    cargo test -q -p metainfer-build --test cuda_kernels --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys; [print(j["executable"]) for j in map(json.loads, sys.stdin) if j.get("executable")]' | tail -1
}
