#!/usr/bin/env bash
# Checks of the Terraform module and the event routing, for `make test`:
#   1. terraform fmt -check -recursive infra   (where terraform is installed)
#   2. checkov over infra/, zero failed checks (skips only as inline #checkov:skip=ID:reason)
#   3. pytest tests/infra                       (patterns in moto's EventBridge, events/ catalogue,
#                                                the module's wiring and the AWS operations table)
# `run.sh deployed` runs only tests/infra/test_deployed.py: the example applied to moto by
# terraform and driven end to end through the function binaries (target/debug, built first). It
# waits on AWS provider polls most of its time, so `make test` runs it beside the Rust suite.
# Python tools come from .venv (`pip install -r tests/requirements.txt`); CELLBRIDGE_TEST_PYTHON
# (set by `make test`) or PYTHON picks the interpreter, checkov is looked up beside it, CHECKOV
# overrides that. Exits non-zero when any step fails.
set -u
cd "$(dirname "$0")/../.."

PYTHON="${PYTHON:-${CELLBRIDGE_TEST_PYTHON:-.venv/bin/python}}"

if [ "${1:-}" = deployed ]; then
    # -rs: a skip (no terraform, no provider mirror) prints its reason.
    exec "$PYTHON" -m pytest tests/infra/test_deployed.py -q -rs -p no:cacheprovider
fi
passed=0
failed=0
skipped=0

step() { printf '\n== infra: %s\n' "$1"; }
ok() { passed=$((passed + 1)); echo "-- ok: $1"; }
ko() { failed=$((failed + 1)); echo "-- FAILED: $1"; }
skip() { skipped=$((skipped + 1)); echo "-- skipped: $1"; }

step "terraform fmt -check -recursive infra"
if command -v terraform >/dev/null 2>&1; then
    # fmt needs no providers and no CLI configuration, so it runs offline; a
    # TF_CLI_CONFIG_FILE naming a missing file only adds a warning.
    if [ -n "${TF_CLI_CONFIG_FILE:-}" ] && [ ! -e "$TF_CLI_CONFIG_FILE" ]; then unset TF_CLI_CONFIG_FILE; fi
    if terraform fmt -check -recursive -diff infra; then
        ok "terraform fmt"
    else
        ko "terraform fmt (run: terraform fmt -recursive infra)"
    fi
else
    skip "terraform fmt: no terraform binary on PATH"
fi

step "checkov -d infra"
checkov="${CHECKOV:-}"
if [ -z "$checkov" ]; then
    for candidate in "$(dirname "$PYTHON")/checkov" .venv/bin/checkov .venv-checkov/bin/checkov; do
        if [ -x "$candidate" ]; then checkov="$candidate"; break; fi
    done
fi
if [ -z "$checkov" ]; then
    ko "checkov: not installed (.venv/bin/pip install checkov)"
else
    # --skip-download: no call to the Prisma Cloud API (not reachable here, and not needed
    # for the built-in checks).
    start=$(date +%s)
    if "$checkov" -d infra --framework terraform --quiet --compact --skip-download; then
        ok "checkov, $(( $(date +%s) - start ))s ($("$checkov" --version 2>/dev/null))"
    else
        ko "checkov found failed checks (fix them, or skip one inline with #checkov:skip=CKV_...:reason)"
    fi
fi

step "pytest tests/infra"
if [ ! -x "$PYTHON" ]; then
    ko "pytest: $PYTHON missing (python3 -m venv .venv && .venv/bin/pip install -r tests/requirements.txt)"
elif "$PYTHON" -m pytest tests/infra -q -p no:cacheprovider --ignore=tests/infra/test_deployed.py; then
    ok "pytest tests/infra"
else
    ko "pytest tests/infra"
fi

echo
echo "infra: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
