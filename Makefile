# Every target creates its virtualenv and installs the project on first use.
#
# The editable install is setuptools' *strict* mode: a link tree under build/ that maps graph/
# to langgraph_loop and nodes/ to langgraph_loop.nodes, which mypy and IDEs can follow. A module
# added or removed needs a reinstall, so the install stamp depends on the list of modules.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
MODLIST := build/.modules
PYTEST_ARGS ?=
EDITABLE := --config-settings editable_mode=strict

# Refresh build/.modules only when the set of modules changed (keeps its mtime otherwise).
$(shell mkdir -p build && find graph nodes -name '*.py' -o -name py.typed | LC_ALL=C sort \
    > $(MODLIST).new && (cmp -s $(MODLIST).new $(MODLIST) || mv $(MODLIST).new $(MODLIST)); \
    rm -f $(MODLIST).new)

.PHONY: install demo test test-fast lint bench notebooks picture clean test-lowest test-py313 test-compat

$(STAMP): pyproject.toml $(MODLIST)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	rm -rf build/__editable__.*
	$(PY) -m pip install -q -e ".[dev]" $(EDITABLE)
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/langgraph-loop demo

# The whole suite on two workers, a test module at a time (a module's servers and virtualenvs
# are built once), the longest modules first (tests/conftest.py).
WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# Everything but the ecosystem group (LangGraph Server, Aegra, notebooks, the wheel), with
# hypothesis' dev profile, on two workers: the quick check while working.
test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=dev $(PY) -m pytest -q -m "not ecosystem" -n 2 --dist worksteal $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check graph nodes tests benchmarks
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m benchmarks
	$(PY) -m benchmarks.detector_cost
	$(PY) -m benchmarks.real_traces

notebooks: $(STAMP)
	$(PY) -m pytest -q tests/test_notebooks.py

# notebooks/graph.mmd is what the current graph draws (tests/test_picture.py checks it);
# notebooks/graph.png is rendered from it. Re-run after changing the graph.
picture: $(STAMP)
	$(PY) -c "from langgraph_loop.app.picture import write_picture; print(*write_picture())"

# The suite against the lowest versions pyproject.toml allows (.ci/lowest.txt), and on Python
# 3.13. These virtualenvs hold a regular (non-editable) install of the checkout, refreshed before
# every run. They run every library module through the in-process tests; what they leave to
# make test, where it runs on the newest versions and Python 3.11:
# - the "ecosystem" group (LangGraph Server, Aegra, notebooks, the wheel build: tests/ecosystem,
#   whose tool chain the test extra leaves out);
# - LangChain 1.5.2's own create_agent tests (tests/langchain_agents/v1_5_2: on 3.13 they would
#   test the same newest versions as make test); test-lowest runs 1.4.0's copy (v1_4_0) instead;
# - tests that only drive the library from fresh interpreters: the documentation's snippets
#   (tests/docs), SIGKILL and resume across processes (e2e/test_crash.py, e2e/test_durable.py;
#   faults/test_crash_recovery.py and e2e/test_checkpointers.py keep the savers covered), the
#   benchmark scripts (e2e/test_bench_systems.py, test_real_traces.py, test_rivals.py,
#   test_long_thread_bench.py) and the CLI (app/test_exit_codes.py, app/test_cli.py: our own
#   argparse layer, the least tied to the dependencies' versions).
# Hypothesis runs its "compat" profile here (25 examples a property test: a version check).
COMPAT_TESTS := -m "not ecosystem" tests --ignore=tests/ecosystem \
    --ignore=tests/langchain_agents/v1_5_2 --ignore=tests/docs \
    --ignore=tests/e2e/test_crash.py --ignore=tests/e2e/test_durable.py \
    --ignore=tests/e2e/test_bench_systems.py --ignore=tests/e2e/test_real_traces.py \
    --ignore=tests/e2e/test_rivals.py --ignore=tests/e2e/test_long_thread_bench.py \
    --ignore=tests/app/test_exit_codes.py --ignore=tests/app/test_cli.py
COMPAT_ENV := HYPOTHESIS_PROFILE=compat

# The checkout is installed from a copy (SOURCE), so two of these builds running at once never
# share setuptools' build/ folder.
SOURCE = rm -rf $(1)/src && mkdir -p $(1)/src && cp -r graph nodes pyproject.toml README.md LICENSE $(1)/src/

.venv-lowest/.installed-stamp: pyproject.toml .ci/lowest.txt $(MODLIST)
	test -x .venv-lowest/bin/python || python3.11 -m venv .venv-lowest
	.venv-lowest/bin/python -m pip install -q --upgrade pip
	$(call SOURCE,.venv-lowest)
	.venv-lowest/bin/python -m pip install -q ".venv-lowest/src[test]" -c .ci/lowest.txt
	touch $@

test-lowest: .venv-lowest/.installed-stamp
	$(call SOURCE,.venv-lowest)
	.venv-lowest/bin/python -m pip install -q --no-deps --force-reinstall .venv-lowest/src
	.venv-lowest/bin/python -m pip list 2>/dev/null | grep -E "^(langgraph|langchain-core|langchain-openai|pydantic) "
	$(COMPAT_ENV) .venv-lowest/bin/python -m pytest -q $(COMPAT_TESTS)

# python3.13 may be a pyenv shim that only works with that version selected: take the first
# interpreter that runs.
PY313 ?= $(shell for c in python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3.13 \
    /usr/local/bin/python3.13 /usr/bin/python3.13; do $$c -c '' 2>/dev/null && { echo $$c; break; }; done)

.venv-py313/.installed-stamp: pyproject.toml $(MODLIST)
	@test -n "$(PY313)" || { echo "Python 3.13 not found (install it, or set PY313=/path/to/python3.13)"; exit 1; }
	test -x .venv-py313/bin/python || $(PY313) -m venv .venv-py313
	.venv-py313/bin/python -m pip install -q --upgrade pip
	$(call SOURCE,.venv-py313)
	.venv-py313/bin/python -m pip install -q ".venv-py313/src[test]"
	touch $@

test-py313: .venv-py313/.installed-stamp
	$(call SOURCE,.venv-py313)
	.venv-py313/bin/python -m pip install -q --no-deps --force-reinstall .venv-py313/src
	$(COMPAT_ENV) .venv-py313/bin/python -m pytest -q $(COMPAT_TESTS)

test-compat: test-lowest test-py313

clean:
	rm -rf $(VENV) .venv-lowest .venv-py313 build .pytest_cache .mypy_cache .ruff_cache
