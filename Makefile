# The project's front door. `make demo` and `make test` are all a newcomer needs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
CLI := target/debug/cellbridge

.PHONY: demo test testbed test-rust test-infra bench fuzz package fmt clean-testbed

## demo: plan a new cell and a changed value on the example fleet (no cloud account needed)
demo:
	$(CARGO) build -q -p cellbridge-cli
	@echo "== 1. A cell Terraform created that the fleet repo has never seen: staging-us-east-1"
	@$(CLI) plan --state examples/states/staging-us-east-1.tfstate --fleet examples/fleet || test $$? -eq 1
	@echo
	@echo "== 2. A changed value in an existing cell: prod-eu-west-1 (karpenter_queue_name)"
	@$(CLI) plan --state examples/states/prod-eu-west-1.tfstate --fleet examples/fleet || test $$? -eq 1
	@echo
	@echo "== 3. The strict substitution check, as the fleet repo's CI runs it"
	@$(CLI) check --fleet examples/fleet || test $$? -eq 1

## testbed: the local virtual environment with moto_server, pytest and checkov
testbed: $(VENV)/.installed
$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

## test: install the test bed, start it, run every test (Rust and infra)
# Every log line, result and error of the integration tests is captured under target/leak-capture
# together with every secret value the tests and fakes use; leak_check.py fails on any leak.
test: testbed
	rm -rf target/leak-capture
	CELLBRIDGE_LEAK_DIR=$(abspath target/leak-capture) CELLBRIDGE_TEST_PYTHON=$(abspath $(PY)) $(CARGO) test --workspace --lib --bins --tests --no-fail-fast
	CELLBRIDGE_TEST_PYTHON=$(abspath $(PY)) bash tests/infra/run.sh
	$(PY) tests/leak_check.py target/leak-capture

## bench: the benchmark report (release-like build); prints every figure next to its peer
bench: testbed
	CELLBRIDGE_TEST_PYTHON=$(abspath $(PY)) bash tests/bench/run.sh

## fuzz: run every fuzz target for FUZZ_SECONDS each (default 60)
fuzz:
	bash fuzz/run.sh $${FUZZ_SECONDS:-60}

## package: deployable zips for provided.al2023 under dist/
package:
	bash infra/package.sh

fmt:
	$(CARGO) fmt --all
