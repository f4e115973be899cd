#!/usr/bin/env bash
# Packs what scripts/device-check.sh needs on a GPU machine that has no cargo, no network and a
# cap on what one call may carry there (the device tool sends the whole working tree each call,
# 64 MiB at most, tracked files included): stripped release binaries, and each model split into
# parts that fit beside the tree, with a sha256 of the whole file to check the reassembly.
#
#   scripts/device-pack.sh [MODEL...]      # default: QWEN and SMOL (scripts/device-common.sh)
#
# Writes the git-ignored folder .device/:
#   bin.tar.xz                 demo-engine (release) and the cuda_kernels test binary, stripped
#   models/<file>.partNN-of-MM the model in parts of PART_MIB MiB (default: what fits beside the
#                              tree, less MARGIN_MIB, default 1)
#   models/<file>.sha256       the whole file's sha256 (device-check.sh verifies it)
# and prints the calls that bring them over, one part each, the first model's first; bin.tar.xz
# and the .sha256 files ride in the first call with the first model's last, shortest part, and
# that call checks the kernels and the tiny fixtures at once. Ignored paths a call brought stay
# on the warm machine (it goes back after 30 s idle), so the calls must follow each other at once;
# the last one runs `ONLY=real,bench scripts/device-check.sh`, which reassembles the models (and
# fails, naming the part, when one is missing or the checksum differs).
# Env: LIMIT_MIB (default 64), PART_MIB, MARGIN_MIB.
set -euo pipefail
# shellcheck source=scripts/device-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
LIMIT_MIB="${LIMIT_MIB:-64}"
MARGIN_MIB="${MARGIN_MIB:-1}"
die() { echo "device-pack: error: $*" >&2; exit 1; }
grep -qx '/.device/' .gitignore || die ".device/ is not git-ignored (add '/.device/' to .gitignore)"
if [[ $# -eq 0 ]]; then
    set -- "$QWEN" "$SMOL"
fi
for m in "$@"; do [[ -f "$m" ]] || die "model $m not found (scripts/fetch-model.sh fetches both defaults)"; done

cargo build -q --release -p demo-engine
kt=$(cuda_kernels_test)
[[ -x "$kt" ]] || die "no cuda_kernels test binary (cargo test -p metainfer-build --test cuda_kernels --no-run)"

rm -rf "$DEV"
mkdir -p "$DEV/bin" "$DEV/models"
strip -o "$DEV/bin/demo-engine" target/release/demo-engine
strip -o "$DEV/bin/cuda_kernels" "$kt"
tar -C "$DEV" -cJf "$DEV/bin.tar.xz" bin
rm -rf "$DEV/bin"

# What travels besides a part: the tracked files and the untracked ones git does not ignore.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
bins=$(stat -c %s "$DEV/bin.tar.xz")
if [[ -n "${PART_MIB:-}" ]]; then
    part=$((PART_MIB * 1048576))
else
    part=$((LIMIT_MIB * 1048576 - tree - MARGIN_MIB * 1048576))
fi
((part >= 8 * 1048576)) || die "only $((part / 1048576)) MiB per part fit beside the ${tree}-byte tree; set PART_MIB or shrink the tree"

calls=()
for m in "$@"; do
    name=$(basename "$m")
    split -d -a 2 -b "$part" "$m" "$DEV/models/$name.part"
    total=$(ls "$DEV/models/$name".part* | wc -l)
    for p in "$DEV/models/$name".part*; do
        mv "$p" "$p-of-$(printf %02d "$total")"
        calls+=("\"${p#"$ROOT"/}-of-$(printf %02d "$total")\"")
    done
    (cd "$(dirname "$m")" && sha256sum "$name") >"$DEV/models/$name.sha256"
done
# The binaries and checksums ride with the first model's last (shortest) part where they fit.
extra="\".device/bin.tar.xz\""
for s in "$DEV"/models/*.sha256; do extra+=", \"${s#"$ROOT"/}\""; done
first=$(basename "$1")
last=$(ls "$DEV/models/$first".part* | tail -1)
for i in "${!calls[@]}"; do
    if [[ "${calls[$i]}" == "\"${last#"$ROOT"/}\"" ]] && (($(stat -c %s "$last") + bins + 4096 <= part)); then
        extra="$extra, ${calls[$i]}"
        unset "calls[$i]"
    fi
done
calls=("$extra" "${calls[@]}")

echo "device-pack: tree $((tree / 1048576)) MiB + parts of at most $((part / 1048576)) MiB (bin.tar.xz $((bins / 1024)) KiB rides with one); limit $LIMIT_MIB MiB"
echo "device-pack: the calls, one after another on the warm machine (run's carry argument and command):"
for i in "${!calls[@]}"; do
    cmd="true"
    # The first call brings the binaries: it checks the kernels and the tiny fixtures right away,
    # so a broken host path shows before the models' parts are sent.
    ((i == 0)) && cmd="ONLY=kernels,tiny scripts/device-check.sh 2>&1 | tee \$OUT/device-check-tiny.log"
    echo "  $((i + 1))/${#calls[@]} carry [${calls[$i]}]  command: $cmd"
done
echo "  then: ONLY=real,bench scripts/device-check.sh 2>&1 | tee \$OUT/device-check.log (no carry: what the calls brought is there)"
