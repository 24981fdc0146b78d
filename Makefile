# codeact — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
PY := $(VENV)/bin/python
# The suites are mostly waiting (sandboxes, servers, workers): 4 processes, one test file each at a time
# (module fixtures stay per file). `make test PYTEST_ARGS=` runs them in one process.
PYTEST_ARGS ?= -n 4 --dist loadfile --durations=30
export LITELLM_LOCAL_MODEL_COST_MAP := True
# uv installs exactly the lock (uv.lock) with the machine's python3; it never downloads a Python.
UV_VERSION := 0.13.8
UV := $(abspath .tools/uv/bin/uv)
export UV_PYTHON := python3
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# Compile the installed packages' bytecode at install (uv does not by default; pip does). Without it a
# machine with PYTHONDONTWRITEBYTECODE=1 compiles litellm's ~1,100 modules in every process: 14 s an import.
export UV_COMPILE_BYTECODE := 1

.PHONY: help install install-dev lock test test-latest test-real-model model-pull demo demo-local bench lint typecheck format services-up services-down sandbox-image dist clean
# The local model of the real-model tier (tests/real_model, marker real_model): pulled once, cached by hash.
REAL_MODEL ?= qwen2.5-coder-1.5b

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(UV):
	@python3 -m venv .tools/uv
	@.tools/uv/bin/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"

$(VENV)/.installed: pyproject.toml uv.lock | $(UV)
	@command -v bwrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
	@$(UV) sync -q --frozen --no-dev --inexact
	@touch $@

$(VENV)/.installed-dev: pyproject.toml uv.lock | $(UV)
	@command -v bwrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
	@$(UV) sync -q --frozen --all-extras
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed ## Install codeact (editable, runtime only, exactly the lock) into .venv; the CLI is .venv/bin/codeact
	@echo "codeact is installed: run .venv/bin/codeact, or put it on the PATH: export PATH=\"$(abspath $(VENV))/bin:\$$PATH\""

install-dev: $(VENV)/.installed-dev ## install + every extra + the developers' tools (pytest, ruff, mypy), exactly the lock

lock: | $(UV) ## Refresh uv.lock from pyproject.toml (newest versions the bounds allow), then install it
	$(UV) lock --upgrade
	@$(UV) sync -q --frozen --all-extras
	@touch $(VENV)/.installed-dev $(VENV)/.installed

services-up: ## Install and start Docker + Redis (writes .services/env)
	@scripts/services.sh up

services-down: ## Stop the services that services-up started
	@scripts/services.sh down

sandbox-image: ## Build the Docker sandbox image from Debian packages (cached by recipe hash)
	@sandbox/image/build.sh >/dev/null

DIST ?= dist
dist: | $(UV) ## Build the wheel and the sdist into dist/ (then pip install dist/codeact-*.whl; README "Install")
	@rm -f $(DIST)/codeact-*.whl $(DIST)/codeact-*.tar.gz
	@$(UV) build -q --out-dir $(DIST) . && ls $(DIST)/codeact-*

TEST_DEPS ?= install-dev
test: $(TEST_DEPS) ## Install everything, start real Redis + Docker, build the image, run every test (the real-model tier last, alone)
	@set -o pipefail; rc=0; \
	scripts/services.sh up && sandbox/image/build.sh >/dev/null && source .services/env && \
	CODEACT_REQUIRE_SERVICES=1 $(PY) -m pytest $(PYTEST_ARGS) -m "not real_model and not load" || rc=$$?; \
	CODEACT_REQUIRE_SERVICES=1 $(PY) -m pytest -m load -p no:cacheprovider || rc=$$?; \
	scripts/services.sh down; \
	$(MAKE) --no-print-directory test-real-model || rc=$$?; exit $$rc

model-pull: install ## Pull the real-model tier's local model into the model cache (a no-op when cached, by hash)
	@$(VENV)/bin/codeact models pull $(REAL_MODEL)

# Alone and in one process: beside the parallel suite the model's threads starve (llama.cpp spin-waits).
test-real-model: install-dev model-pull ## Run the real-model tier alone (a local model at temperature 0; ~10 min; make test runs it last)
	@start=$$(date +%s); rc=0; \
	CODEACT_REAL_MODEL=$(REAL_MODEL) $(PY) -m pytest -m real_model -n 0 -p no:cacheprovider -rP tests/real_model || rc=$$?; \
	echo "real-model tier on $(REAL_MODEL): $$(( $$(date +%s) - start )) s"; exit $$rc

LATEST ?=
test-latest: | $(UV) ## The suite against the newest versions pyproject allows (LATEST='litellm>=1.106' overrides a bound), in .venv-latest
	@$(UV) venv -q --allow-existing .venv-latest
	@$(UV) pip compile -q pyproject.toml --all-extras --group dev --upgrade $(if $(LATEST),--override <(printf '%s\n' $(foreach r,$(LATEST),'$(r)'))) -o .venv-latest/requirements.txt
	@$(UV) pip sync -q --python .venv-latest/bin/python .venv-latest/requirements.txt
	@$(UV) pip install -q --python .venv-latest/bin/python --no-deps -e .
	@echo "test-latest: these versions differ from uv.lock:"
	@.venv/bin/python scripts/lock_diff.py uv.lock .venv-latest/requirements.txt || true
	@$(MAKE) --no-print-directory test VENV=.venv-latest UV_PROJECT_ENVIRONMENT=.venv-latest PY=.venv-latest/bin/python TEST_DEPS=

demo: install ## Run the bundled DevOps example agent end to end, offline
	@scripts/demo.sh

demo-local: install-dev ## Pull a local model (progress shown) and run the DevOps example on it, streaming its reply
	@scripts/demo-local.sh

bench: install-dev ## Run the benchmarks (installs the bench extra), write bench/results.json
	@set -o pipefail; rc=0; \
	scripts/services.sh up && sandbox/image/build.sh >/dev/null && source .services/env && \
	$(PY) -m bench || rc=$$?; \
	scripts/services.sh down; exit $$rc

lint: install-dev ## ruff check + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install-dev ## mypy --strict over the codeact package (engine, segments, sandbox, toolkits, prompts)
	$(VENV)/bin/mypy

format: install-dev ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean: ## Remove the venv and caches
	rm -rf $(VENV) .venv-latest .tools .mypy_cache .pytest_cache .ruff_cache .services
