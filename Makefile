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

# compat editable mode: a plain .pth path entry; the default import-hook finder adds ~15 ms
# to every process start (measured: 18 ms vs 33 ms for `python -c "import qmem_git"`), and
# recall runs before every prompt. setuptools warns that compat mode is transitional; that
# warning is chosen-for and silenced here (-W), and plain `pip install -e .` is the fallback
# for the day compat mode is gone.
COMPAT := -W "ignore:Compat editable installs"
$(RUNTIME): pyproject.toml | $(PY)
	$(PY) $(COMPAT) -m pip install -q -e . --config-settings editable_mode=compat || $(PY) -m pip install -q -e .
	touch $@

$(DEV): pyproject.toml | $(PY)
	$(PY) $(COMPAT) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat || $(PY) -m pip install -q -e '.[dev]'
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
