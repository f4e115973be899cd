#!/usr/bin/env bash
# Cold `cargo build --release --timings` of two fresh user crates outside any workspace, with a
# path dependency on a metainfer checkout:
#   hit:  `model="qwen2", hw="generic", quant="q4_k_m", features=["server"]`, served from the
#         checkout's committed cache (METAINFER_CACHE_DIR=<checkout>/cache);
#   miss: the README's `model="qwen2", hw="x86_64-avx2", quant="q4_k_m"`, generated and
#         verified during the build into the crate's own cache/.
# Each gets its own fresh target dir. Prints wall time and cargo's unit count and total; the
# HTML reports stay under OUT/<case>/target/cargo-timings/.
#   scripts/user-crate-timings.sh [CHECKOUT] [OUT]     (defaults: this checkout, /tmp/metainfer-timings)
set -euo pipefail
CO="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
OUT="${2:-/tmp/metainfer-timings}"
rm -rf "$OUT"; mkdir -p "$OUT"
mk() { # dir attribute extra-dependency-keys
    mkdir -p "$1/src"
    printf '[package]\nname = "user-%s"\nversion = "0.1.0"\nedition = "2021"\n[dependencies]\nmetainfer = { path = "%s"%s }\n[workspace]\n' \
        "$(basename "$1")" "$CO" "$3" > "$1/Cargo.toml"
    printf '%s\npub struct Coder;\nfn main() { println!("{}", Coder::KEY); }\n' "$2" > "$1/src/main.rs"
    cp "$CO/Cargo.lock" "$1/"
}
mk "$OUT/hit" '#[metainfer::engine(model = "qwen2", hw = "generic", quant = "q4_k_m", features = ["server"])]' ', features = ["server"]'
mk "$OUT/miss" '#[metainfer::engine(model = "qwen2", hw = "x86_64-avx2", quant = "q4_k_m")]' ''
for case in hit miss; do
    env=(CARGO_TARGET_DIR="$OUT/$case/target")
    [[ $case == hit ]] && env+=(METAINFER_CACHE_DIR="$CO/cache")
    start=$(date +%s.%N)
    set +e
    (cd "$OUT/$case" && env "${env[@]}" cargo build --release --timings > "$OUT/$case.log" 2>&1)
    rc=$?
    set -e
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    report=$(ls "$OUT/$case"/target/cargo-timings/cargo-timing-2*.html | head -1)
    units=$(python3 -c 'import json,re,sys; print(len(json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", open(sys.argv[1]).read(), re.S).group(1))))' "$report")
    printf '%s: rc=%s wall=%.1f s, %s units (%s)\n' "$case" "$rc" "$wall" "$units" "$report"
done
