# codeact — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
# The suites are mostly waiting (sandboxes, servers, workers): 4 processes, one test file each at a time
# (module fixtures stay per file). `make test PYTEST_ARGS=` runs them in one process.
PYTEST_ARGS ?= -n 4 --dist loadfile
export LITELLM_LOCAL_MODEL_COST_MAP := True
# The local model of the real-model tier (tests/real_model, marker real_model): pulled once, cached by hash.
REAL_MODEL ?= qwen2.5-coder-1.5b

.PHONY: help install test test-real-model model-pull demo demo-local bench lint typecheck format services-up services-down sandbox-image clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml
	@command -v bwrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

install: $(VENV)/.installed ## Create .venv with the package (editable) and dev tools; apt-get bubblewrap

services-up: ## Install and start Docker + Redis (writes .services/env)
	@scripts/services.sh up

services-down: ## Stop the services that services-up started
	@scripts/services.sh down

sandbox-image: ## Build the Docker sandbox image from Debian packages (cached by recipe hash)
	@sandbox/image/build.sh >/dev/null

test: install ## Install everything, start real Redis + Docker, build the image, run every test (then the real-model tier alone)
	@set -o pipefail; rc=0; \
	scripts/services.sh up && sandbox/image/build.sh >/dev/null && source .services/env && \
	CODEACT_REQUIRE_SERVICES=1 $(PY) -m pytest $(PYTEST_ARGS) -m "not real_model" || rc=$$?; \
	scripts/services.sh down; \
	$(MAKE) --no-print-directory test-real-model || rc=$$?; exit $$rc

model-pull: install ## Pull the real-model tier's local model into the model cache (a no-op when cached, by hash)
	@$(VENV)/bin/codeact models pull $(REAL_MODEL)

# Alone and in one process: beside the parallel suite the model's threads starve (llama.cpp spin-waits).
test-real-model: install model-pull ## Run the real-model tier (a local model at temperature 0; minutes)
	@start=$$(date +%s); rc=0; \
	CODEACT_REAL_MODEL=$(REAL_MODEL) $(PY) -m pytest -m real_model -n 0 -p no:cacheprovider tests/real_model || rc=$$?; \
	echo "real-model tier on $(REAL_MODEL): $$(( $$(date +%s) - start )) s"; exit $$rc

demo: install ## Run the bundled DevOps example agent end to end, offline
	@scripts/demo.sh

demo-local: install ## Pull a local model (progress shown) and run the DevOps example on it, streaming its reply
	@scripts/demo-local.sh

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev,bench]'
	@touch $@

bench: install $(VENV)/.bench-installed ## Run the benchmarks (installs the bench extra), write bench/results.json
	@set -o pipefail; rc=0; \
	scripts/services.sh up && sandbox/image/build.sh >/dev/null && source .services/env && \
	$(PY) -m bench || rc=$$?; \
	scripts/services.sh down; exit $$rc

lint: install ## ruff check + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install ## mypy --strict over engine, segments, sandbox, toolkits, prompts
	$(VENV)/bin/mypy

format: install ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean: ## Remove the venv and caches
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .services
