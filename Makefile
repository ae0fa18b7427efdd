# Gridline. Two commands do all set-up on a fresh machine:
#   make dev    the local stack on http://127.0.0.1:3000 (PORT overrides)
#   make test   every check and test
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      := .venv
STAMP     := $(VENV)/.installed
BIN       := $(VENV)/bin
CHECKOV_VENV  := $(VENV)/checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# The template tools validate offline; they only need a region.
export AWS_DEFAULT_REGION ?= us-east-1
export SAM_CLI_TELEMETRY := 0
CARGO_TARGET := aarch64-unknown-linux-gnu
CONSOLE_STAMP := console/node_modules/.installed
TARGET_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))
# apt-get needs root: sudo when not already.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: help dev console browser-deps browser-stack browser-run test-browser screenshots token gridctl invoke-local ddblocal test lint fmt clippy template-check unit conformance test-ddblocal build deploy delete invoke bench tools rust-target clean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

## --- Local ---------------------------------------------------------------

dev: console ## Run the local stack: embedded engine, tables from template.yaml, the API and the web console on localhost
	cargo run -p gridline-local -- serve

console: $(CONSOLE_STAMP) ## Build the web console into console/dist (type-checked; packages from its npm lock file)
	cd console && npm run -s build

# --ignore-scripts: the packages need no install step (no browser download either: the
# browser test drives Debian's Chromium).
$(CONSOLE_STAMP): console/package-lock.json
	cd console && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

token: ## Print a local token: make token USER=alice [TENANT=acme] [EMAIL=alice@example.com] (no TENANT: the running stack's trigger picks the chosen workspace)
	@cargo run -q -p gridline-local -- token --user "$(USER)" $(if $(TENANT),--tenant "$(TENANT)") $(if $(EMAIL),--email "$(EMAIL)")

gridctl: ## The operator tool against the local stack: make gridctl ARGS="verify" (ARGS="--help" lists commands)
	@cargo run -q -p gridctl -- --endpoint $(or $(ENDPOINT),http://127.0.0.1:8100) $(ARGS)

invoke-local: ## Sample events through their handlers, no Docker: [FN=IssuesFunction] [EVENT=events/x.json]; none: all
	@cargo run -q -p gridline-local -- invoke $(if $(FN),--function $(FN)) $(EVENT)

ddblocal: ## AWS's DynamoDB Local on port 8000 (DDB_PORT overrides), in memory
	tools/ddblocal/ddblocal.sh serve $(or $(DDB_PORT),8000)

## --- Checks --------------------------------------------------------------

test: ## Everything CI runs: lint, all tests, schemathesis, the browser test, the DynamoDB Local cross-check
	@# Two at a time where one side mostly waits (CI has 2 cores and 30 minutes): Chromium's
	@# install beside the lint, the browser test beside DynamoDB Local's suite. -O keeps each
	@# target's output together.
	$(MAKE) -O -j2 lint browser-deps
	$(MAKE) unit conformance console browser-stack
	$(MAKE) -O -j2 browser-run test-ddblocal

lint: fmt clippy template-check ## Formatting, clippy and the template linters

fmt:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

template-check: $(STAMP) $(CHECKOV_STAMP) ## cfn-lint, sam validate, sam validate --lint and checkov (offline)
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --template template.yaml
	$(BIN)/sam validate --lint --template template.yaml
	@# Offline: no platform key, no policy download, no update check. Every skip is a
	@# `checkov:skip=` comment with its reason in the template.
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true BC_SKIP_MAPPING=true \
	  $(CHECKOV_VENV)/bin/checkov --file template.yaml --framework cloudformation \
	  --skip-download --skip-results-upload --quiet --compact

unit: ## All Rust tests (unit, property, integration against the embedded engine, events)
	cargo test --workspace

conformance: $(STAMP) ## Schemathesis against the local stack (bounded; fails on any 5xx or off-spec response)
	tools/conformance/run.sh

browser-deps: ## Debian's chromium, which the browser test drives (installed once)
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }

test-browser: console browser-deps browser-stack ## The web console in Chromium (Playwright) against a fresh in-memory local stack
	$(MAKE) browser-run

screenshots: console browser-deps browser-stack ## The browser test, writing the README's pictures to docs/images
	$(MAKE) browser-run SCREENSHOTS=../docs/images

# The stack's binary for the browser test, copied: a cargo build beside the test (make test
# runs DynamoDB Local's suite at the same time) may re-link target/debug's while it starts.
BROWSER_BIN := $(TARGET_DIR)/browser/gridline-local
browser-stack:
	cargo build -q -p gridline-local
	mkdir -p $(dir $(BROWSER_BIN)) && cp $(TARGET_DIR)/debug/gridline-local $(BROWSER_BIN)

browser-run:
	cd console && $(if $(SCREENSHOTS),SCREENSHOTS=$(SCREENSHOTS)) GRIDLINE_LOCAL_BIN=$(BROWSER_BIN) npx playwright test

test-ddblocal: ## The integration suite against AWS's DynamoDB Local (Java 17, from the npm lock file)
	tools/ddblocal/ddblocal.sh test

bench: ## Benchmarks, not part of make test: regenerates BENCHMARKS.md, benchmarks.svg and bench/results.json (BENCH_ARGS="--sizes 1000" for a quick run)
	cargo build --release -p projects -p issues -p grid -p people -p inbox -p indexer -p fieldjob -p gridline-bench
	target/release/gridline-bench $(BENCH_ARGS)

## --- Build and deploy ----------------------------------------------------

build: $(STAMP) rust-target ## sam build: every function for arm64 with cargo-lambda
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/sam build --template template.yaml

deploy: build console ## sam deploy (--guided the first time; answers saved to samconfig.toml), then the console's upload
	@if [ -f samconfig.toml ]; then \
	  PATH="$(abspath $(BIN)):$$PATH" $(BIN)/sam deploy; \
	else \
	  PATH="$(abspath $(BIN)):$$PATH" $(BIN)/sam deploy --guided --capabilities CAPABILITY_IAM; \
	fi
	$(BIN)/python tools/console/publish.py

delete: $(STAMP) ## sam delete: the stack and everything in it but the two tables and the user pool (retained and deletion-protected)
	$(BIN)/python tools/console/publish.py --empty
	$(BIN)/sam delete

invoke: build ## sam local invoke (needs Docker): make invoke FN=IssuesFunction EVENT=events/issues-get.json
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=IssuesFunction EVENT=events/issues-get.json"; exit 2; }
	$(BIN)/sam local invoke $(FN) --event $(EVENT) --env-vars events/env.json \
	  --add-host host.docker.internal:host-gateway

rust-target:
	@rustup target list --installed | grep -qx $(CARGO_TARGET) || rustup target add $(CARGO_TARGET)

## --- Tools ---------------------------------------------------------------

tools: $(STAMP) $(CHECKOV_STAMP) ## Install the pinned SAM CLI, cfn-lint, cargo-lambda and checkov into .venv

$(STAMP): tools/requirements.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r tools/requirements.txt
	touch $@

# checkov pins its own boto3, which conflicts with the SAM CLI's: it gets a venv of its own.
$(CHECKOV_STAMP): tools/checkov-requirements.txt
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r tools/checkov-requirements.txt
	touch $@

clean: ## Remove build output and local data
	rm -rf target .aws-sam .local console/dist console/node_modules console/test-results
