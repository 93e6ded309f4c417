#!/usr/bin/env bash
# make test's running part, once everything is built (`cargo test --no-run`): the suites that wait
# on something outside a core run side by side, so that their waits overlap.
#   - the library's own tests (cellbridge's unit tests and shared/tests): CPU, no service;
#   - the GitHub scenarios (`github_conformance`): the GitHub fake's process, on its own core;
#   - the integration suites (every other package): moto, the GitHub and Kubernetes fakes, the
#     function binaries, most of their time waiting on an answer;
#   - the module's offline checks (tests/infra/run.sh: terraform fmt, checkov, pytest tests/infra).
# Each writes its own log under target/suites/; the integration suites stream as they run, the
# others' results are printed when they are done (a failure's tail is repeated at the end).
# Exits non-zero when any suite failed, after all of them finished.
# Environment: what `make test` sets (TEST_ENV, CELLBRIDGE_LEAK_DIR, CELLBRIDGE_GITHUB_CONFORMANCE_DIR).
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
logs=target/suites
rm -rf "$logs" && mkdir -p "$logs"

# The test executables cargo built, as it lists them (`cargo test --no-run`): run here as cargo
# runs them (from their package's directory), in three lanes, so that no second cargo resolves
# features afresh and builds anything again. The lanes: the library's own tests (cellbridge's
# unit tests and shared/tests: in-memory, CPU), the GitHub scenarios (`github_conformance`, most
# of its time in the GitHub fake's process) and every other package's (the integration suites).
"$CARGO" test --workspace --lib --bins --tests --no-run --quiet --message-format=json-render-diagnostics 2>"$logs/build.log" \
  | "${PYTHON:-${CELLBRIDGE_TEST_PYTHON:-python3}}" -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        pkg = m["package_id"]
        lane = "rules" if "/shared#cellbridge@" in pkg else "github" if m["target"]["name"] == "github_conformance" else "integration"
        d = os.path.dirname(m["manifest_path"])
        print(lane, d, m["target"]["name"], m["executable"], sep="\t")
' >"$logs/executables.tsv" || { cat "$logs/build.log"; echo "FAILED: building the tests"; exit 1; }
[ -s "$logs/executables.tsv" ] || { echo "FAILED: cargo listed no test executable"; exit 1; }

# lane NAME: runs that lane's executables one after another, as cargo test --no-fail-fast does;
# exits with the number of executables that failed.
lane() {
  local bad=0 dir name exe l
  while IFS=$'\t' read -r l dir name exe; do
    [ "$l" = "$1" ] || continue
    echo "     Running $name (${exe#"$PWD"/})"
    ( cd "$dir" && "$exe" ) || { bad=$((bad + 1)); echo "error: test failed, to rerun pass \`--test $name\` ($dir)"; }
  done <"$logs/executables.tsv"
  return "$bad"
}

lane rules >"$logs/rules.log" 2>&1 &
rules=$!
lane github >"$logs/github.log" 2>&1 &
github=$!
bash tests/infra/run.sh >"$logs/infra.log" 2>&1 &
infra=$!

echo "== the integration suites (the library's own tests, the GitHub scenarios and the module's checks run beside them: $logs/)"
lane integration 2>&1 | tee "$logs/integration.log"
integration=${PIPESTATUS[0]}

failed=()
wait "$rules" && rules=0 || rules=$?
echo "== the library's own tests (cellbridge's unit tests and shared/tests)"
grep -E '^( *Running|test result|failures:|---- |test .* FAILED|thread .* panicked|error: test failed)' "$logs/rules.log" || true
[ "$rules" -eq 0 ] || failed+=("the rules: $logs/rules.log")

wait "$github" && github=0 || github=$?
echo "== the GitHub scenarios (github_conformance)"
grep -E '^( *Running|test result|failures:|---- |test .* FAILED|thread .* panicked|error: test failed)' "$logs/github.log" || true
[ "$github" -eq 0 ] || failed+=("the GitHub scenarios: $logs/github.log")

wait "$infra" && infra=0 || infra=$?
echo "== the module's offline checks (tests/infra/run.sh)"
cat "$logs/infra.log"
[ "$infra" -eq 0 ] || failed+=("the module's offline checks: $logs/infra.log")

[ "$integration" -eq 0 ] || failed+=("the integration suites: $logs/integration.log")
if [ "${#failed[@]}" -gt 0 ]; then
  [ "$rules" -eq 0 ] || { echo "== the rules' failures"; sed -n '/^failures:/,$p' "$logs/rules.log" | tail -n 80; }
  [ "$github" -eq 0 ] || { echo "== the GitHub scenarios' failures"; sed -n '/^failures:/,$p' "$logs/github.log" | tail -n 80; }
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "suites: the library's own tests, the GitHub scenarios, the integration suites and the module's checks passed"
