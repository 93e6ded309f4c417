#!/usr/bin/env bash
# Runs fuzz targets with libFuzzer on the stable toolchain.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     default: 60 seconds, every target in fuzz_targets/
#
# cargo-fuzz works on the stable toolchain with `--sanitizer none` (its default AddressSanitizer
# needs the nightly-only `-Zsanitizer`); without `--sanitizer` all it adds is coverage flags,
# which are stable `-C` options. This script uses cargo-fuzz when it is installed
# (`cargo install cargo-fuzz --locked`) and otherwise passes those flags itself, so it needs
# nothing but cargo and a C++ compiler (libfuzzer-sys compiles libFuzzer). Safe Rust needs no
# AddressSanitizer for memory errors; what the fuzzer finds here are panics, failed
# assertions, hangs (-timeout) and runaway memory (-rss_limit_mb). The first build compiles the
# whole library (AWS SDK, kube, ...) instrumented: about 25 minutes on two cores.
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

triple="$(rustc -vV | sed -n 's/^host: //p')"
# cargo-fuzz and this script both build into fuzz/target/<host>/release/<target>.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target}"
if cargo fuzz --version >/dev/null 2>&1; then
    for t in "${targets[@]}"; do cargo fuzz build --sanitizer none "$t"; done
else
    # What `cargo fuzz build --sanitizer none` passes, all stable options. An explicit --target
    # keeps RUSTFLAGS off build scripts and proc macros: instrumented proc macros do not link.
    export RUSTFLAGS="${RUSTFLAGS:-} -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 -Cllvm-args=-sanitizer-coverage-stack-depth \
 --cfg fuzzing -Cdebug-assertions"
    bins=()
    for t in "${targets[@]}"; do bins+=(--bin "$t"); done
    cargo build --release --target "$triple" "${bins[@]}"
fi

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
