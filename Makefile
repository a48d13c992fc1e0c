# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed

.PHONY: demo test lint format bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# compat editable mode: a plain .pth path entry; the default import-hook finder adds ~30 ms
# to every process start, and recall runs before every prompt.
$(RUNTIME): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e . --config-settings editable_mode=compat || $(PY) -m pip install -q -e .
	touch $@

$(DEV): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat || $(PY) -m pip install -q -e '.[dev]'
	touch $@ $(RUNTIME)

demo: $(RUNTIME)
	$(VENV)/bin/qmem-git demo

test: $(DEV)
	$(PY) -m pytest

lint: $(DEV)
	$(VENV)/bin/ruff check qmem_git tests bench
	$(VENV)/bin/ruff format --check qmem_git tests bench
	$(VENV)/bin/mypy qmem_git

format: $(DEV)
	$(VENV)/bin/ruff check --fix qmem_git tests bench
	$(VENV)/bin/ruff format qmem_git tests bench

bench: $(DEV)
	@status=0; for script in bench/bench_*.py; do echo "### $$script"; $(PY) $$script || status=1; echo; done; exit $$status

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
