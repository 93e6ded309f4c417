#!/usr/bin/env bash
# make bench: one report, every figure next to its peer measured in the same run.
# Builds with the `bench` profile (release code, quicker link than the shipped zips).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/bench-report.txt
mkdir -p target
cargo build -q --profile bench -p state-sync -p cluster-bootstrap -p cellbridge-tests --bins
{
  echo "cellbridge benchmark report — $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -m)"
  echo
  cargo bench -q -p cellbridge-tests --benches 2>/dev/null
  echo
  echo "== Zip sizes (make package) =="
  if ls dist/*.zip >/dev/null 2>&1; then
    for z in dist/*.zip; do awk -v n="$z" -v s="$(stat -c %s "$z")" 'BEGIN { printf "%-28s %6.1f MB\n", n, s / 1048576 }'; done
  else
    echo "no zips in dist/: run \`make package\` first to include them"
  fi
} | tee "$out"
echo "(report saved to $out)"
