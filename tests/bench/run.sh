#!/usr/bin/env bash
# make bench: one report, every figure next to its peer measured in the same run.
# Builds with the `bench` profile (release code, quicker link than the shipped zips).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/bench-report.txt
mkdir -p target
# Built apart: one cargo invocation unifies features, and the function binaries the cold-start
# bench measures must be built as shipped, without the test crates' `test-support`.
cargo build -q --profile bench -p state-sync -p cluster-bootstrap
cargo build -q --profile bench -p cellbridge-tests --bins
# The CLI on its own, with the features it ships with (not the tests' test-support): the check
# bench runs it, and builds it again only if this did not.
cargo build -q --profile bench -p cellbridge-cli
# A bench that fails (docs/github.md's request budget exceeded, say) fails `make bench`, but only
# after every bench has run and the whole report is printed and saved: --no-fail-fast, the
# status kept, and the pipeline's status (pipefail) taken past `tee`.
status=0
{
  echo "cellbridge benchmark report — $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -m)"
  echo
  bench_status=0
  cargo bench -q --no-fail-fast -p cellbridge-tests --benches 2>/dev/null || bench_status=$?
  echo
  echo "== The fault matrices, hangs included (kept out of make test for its time) =="
  start=$(date +%s)
  if CELLBRIDGE_FAULT_SHAPES=all cargo test -q -p cellbridge-tests --features fault-matrices --test faults --test bootstrap_faults -- --include-ignored >target/bench-hangs.log 2>&1; then
    echo "every call failing once, for good and hanging, converged (state-sync's, then cluster-bootstrap's): $(grep -h '^test result' target/bench-hangs.log | tr '\n' ' ')in $(( $(date +%s) - start )) s"
  else
    bench_status=1
    echo "FAULT MATRIX FAILED (target/bench-hangs.log):"; grep -E "^test .* FAILED|panicked" target/bench-hangs.log | head -20
  fi
  echo
  echo "== The seeded schedules, ten times make test's (kept out of make test for its time) =="
  start=$(date +%s)
  if CELLBRIDGE_RACE_SEEDS=3000 cargo test -q -p cellbridge --features test-support --test rules schedules >target/bench-schedules.log 2>&1; then
    echo "3000 schedules of state-sync and 3000 of cluster-bootstrap: $(grep -h '^test result' target/bench-schedules.log | tr '\n' ' ')in $(( $(date +%s) - start )) s"
  else
    bench_status=1
    echo "SCHEDULES FAILED (target/bench-schedules.log):"; grep -E "^test .* FAILED|panicked" target/bench-schedules.log | head -20
  fi
  echo
  echo "== The module deployed to moto and driven end to end (tests/infra/test_deployed.py; kept out of make test for its time) =="
  start=$(date +%s)
  # The test drives the debug function binaries (target/debug), as make test builds them.
  if cargo build -q --workspace --bins && bash tests/infra/run.sh deployed >target/bench-deployed.log 2>&1; then
    echo "$(grep -E '[0-9]+ passed' target/bench-deployed.log | tail -n 1) (in $(( $(date +%s) - start )) s)"
  else
    bench_status=1
    echo "DEPLOYED MODULE FAILED (target/bench-deployed.log):"; grep -v '"[A-Z]* /.* HTTP/1.1" [0-9]' target/bench-deployed.log | tail -n 30
  fi
  echo
  echo "== GitHub Enterprise Server's bed for every GitHub scenario (make test runs it for the pull request and credential ones) =="
  start=$(date +%s)
  if cargo test -q -p cellbridge-tests --features every-bed --test github_conformance http_ghes >target/bench-ghes.log 2>&1; then
    echo "every scenario on GitHub Enterprise Server with App credentials (API version 2022-11-28): $(grep -h '^test result' target/bench-ghes.log | tr '\n' ' ')in $(( $(date +%s) - start )) s"
  else
    bench_status=1
    echo "GHES SCENARIOS FAILED (target/bench-ghes.log):"; grep -E "^test .* FAILED|panicked" target/bench-ghes.log | head -20
  fi
  echo
  echo "== GitHub's unhappy answers, every shape at every request of every phase, on the in-memory GitHub (make test gives each request one shape) =="
  start=$(date +%s)
  if CELLBRIDGE_FAULT_SHAPES=all cargo test -q -p cellbridge --features test-support --test rules fault_matrix -- --nocapture >target/bench-github-faults.log 2>&1; then
    echo "$(grep -h ' cases$' target/bench-github-faults.log | tr '\n' ' ')kept every invariant: $(grep -h '^test result' target/bench-github-faults.log | tr '\n' ' ')in $(( $(date +%s) - start )) s"
  else
    bench_status=1
    echo "GITHUB FAULT MATRIX FAILED (target/bench-github-faults.log):"; grep -E "^test .* FAILED|panicked" target/bench-github-faults.log | head -20
  fi
  echo
  echo "== Zip sizes (make package) =="
  if ls dist/*.zip >/dev/null 2>&1; then
    for z in dist/*.zip; do awk -v n="$z" -v s="$(stat -c %s "$z")" 'BEGIN { printf "%-28s %6.1f MB\n", n, s / 1048576 }'; done
  else
    echo "no zips in dist/: run \`make package\` first to include them"
  fi
  exit "$bench_status"
} | tee "$out" || status=$?
echo "(report saved to $out)"
if [ "$status" -ne 0 ]; then
  echo "make bench: a benchmark failed (exit status $status): see the report above (a budget check prints BUDGET CHECK FAILED)" >&2
fi
exit "$status"
