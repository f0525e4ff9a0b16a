# Every target creates .venv and installs the project on first use.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install demo test lint bench notebooks clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/loopgraph demo

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check graph nodes tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m benchmarks
	$(PY) -m benchmarks.token_economy
	$(PY) -m benchmarks.detector_cost

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

notebooks: $(STAMP)
	$(PY) -m pytest -q tests/test_notebooks.py
