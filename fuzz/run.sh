#!/usr/bin/env bash
# Runs fuzz targets with libFuzzer on the stable toolchain.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     default: 60 seconds, every target in fuzz_targets/
#
# cargo-fuzz itself works on stable only with `--sanitizer none` (its default AddressSanitizer
# needs the nightly-only `-Zsanitizer`), and then all it adds is these coverage flags, which are
# stable `-C` options. So this script builds the targets with them directly and needs nothing
# but cargo and a C++ compiler (libfuzzer-sys compiles libFuzzer). Safe Rust needs no
# AddressSanitizer to catch memory errors; what the fuzzer finds here are panics, assertion
# failures, hangs (-timeout) and runaway memory (-rss_limit_mb).
#
# Each target's corpus grows in fuzz/corpus/<target> (git-ignored), seeded from
# fuzz/seeds/<target>; a crashing input is written to fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-60}"
shift || true
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi

export RUSTFLAGS="${RUSTFLAGS:-} -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cllvm-args=-sanitizer-coverage-stack-depth \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# A target dir of its own: the instrumented build must not mix with the workspace's.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target}"

# An explicit --target keeps RUSTFLAGS off build scripts and proc macros (as cargo-fuzz does):
# instrumented proc macros would not link.
triple="$(rustc -vV | sed -n 's/^host: //p')"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo build --release --target "$triple" "${bins[@]}"

status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t" "seeds/$t"
    echo "== fuzzing $t for ${seconds}s"
    start=$(date +%s)
    if "$CARGO_TARGET_DIR/$triple/release/$t" "corpus/$t" "seeds/$t" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"artifacts/$t.log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "artifacts/$t.log" | grep -o '[0-9]*$' || echo '?')
        echo "ok   $t: clean for $(( $(date +%s) - start ))s, $runs executions, $(ls "corpus/$t" | wc -l) corpus entries"
    else
        status=1
        echo "FAIL $t: see fuzz/artifacts/$t.log and fuzz/artifacts/$t/"
        grep -m5 -E 'panicked|ERROR|SUMMARY' "artifacts/$t.log" || tail -20 "artifacts/$t.log"
    fi
done
exit $status
