"""Shared fixtures: scripted models with the pairing check, the loopback OpenAI and Anthropic
servers, the stdio MCP server's tools, and PostgreSQL (a throwaway server per session, a fresh
database per test); and how ``make test`` spreads the suite over two workers
(:func:`pytest_collection_modifyitems`)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from langchain_core.tools import BaseTool

from langgraph_loop.core.messages import check_pairing
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.anthropic_server import AnthropicServer
from tests.support.openai_server import OpenAIServer
from tests.support.openai_server import check_pairing as check_wire_pairing
from tests.support.postgres import fresh_database, pg_uri

# Property-test budgets: ``ci`` (the default; ``make test``) fits CI's 15 minutes on 2 cores:
# 300 examples a property test (the async fuzz test 90, tests/faults/test_properties.py 600
# runs). ``compat`` is the compat runs' version check (25 examples: every property on the
# other versions, not a second fuzzing campaign); ``dev`` a quick local run; ``long`` a soak
# run (HYPOTHESIS_PROFILE=long).
settings.register_profile("ci", max_examples=300, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("compat", max_examples=25, deadline=None, database=None)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("long", max_examples=20_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """LangChain's vendored copy (tests/langchain_agents) ships the snapshots of tests that are not
    collected here (their cassettes are not in the package): syrupy would report them as unused
    and fail the whole run. Set here, not in the copy's conftest: under pytest-xdist the
    controller, which writes syrupy's report, never loads a conftest below ``tests/``."""
    if hasattr(config.option, "warn_unused_snapshots"):
        config.option.warn_unused_snapshots = True


# ``make test`` runs on two pytest-xdist workers with ``--dist loadfile``: a test module is one
# unit of work, so a module that starts something once (a wheel's virtualenv, Aegra and its
# database, LangGraph Server, the recorded traces) does it once, on one worker. (``--dist
# loadgroup`` with ``xdist_group`` marks would be finer, but pytest-xdist 3.8 sets the group on
# a node attribute pytest 9.2 no longer reads: every test lands in a group of its own.) Modules
# never share anything else: their own temporary directories, free ports, a PostgreSQL server
# per worker and a fresh database per test. ``--no-loadscope-reorder`` keeps the order below:
# the longest modules first (minutes each; a hypothesis test cannot be split across workers),
# so that no worker is left with one of them at the end.
LONG_FIRST = (
    "tests/properties/test_properties.py",
    "tests/ecosystem/test_wheel.py",
    "tests/faults/test_properties.py",
    "tests/ecosystem/test_aegra.py",
    "tests/e2e/test_crash.py",
    "tests/docs/test_docs.py",
)


def _long_rank(item: pytest.Item) -> int:
    module = item.nodeid.split("::", 1)[0]
    return LONG_FIRST.index(module) if module in LONG_FIRST else len(LONG_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``LONG_FIRST`` modules first, in that order (the sort keeps the rest in place)."""
    items.sort(key=_long_rank)


def assert_provider_valid(model: ScriptedChatModel) -> None:
    """Every request the scripted model received satisfies the pairing rule."""
    for i, request in enumerate(model.requests):
        problems = check_pairing(request)
        assert not problems, f"request {i} is not provider-valid: {problems}"


@pytest.fixture
def scripted() -> Iterator[list[ScriptedChatModel]]:
    """Collects scripted models; checks all their requests after the test."""
    models: list[ScriptedChatModel] = []
    yield models
    for model in models:
        assert_provider_valid(model)


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A scripted OpenAI-compatible server on loopback; after the test, every request
    body it received must satisfy the pairing rule on the wire."""
    with OpenAIServer() as server:
        yield server
    for i, body in enumerate(server.requests):
        problems = check_wire_pairing(body)
        assert not problems, f"wire request {i} is not provider-valid: {problems}"


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    """A scripted Anthropic Messages API server on loopback; after the test, no request it
    received may have broken Anthropic's rules (each such request was answered with HTTP 400)."""
    with AnthropicServer() as server:
        yield server
    broken = [f"request {i}: {problems}" for i, problems in server.rejected]
    assert not broken, "requests Anthropic would reject:\n" + "\n".join(broken)


@dataclass
class MCPTools:
    """The test MCP server's tools (see ``tests/support/mcp_server.py``) and its notes file."""

    tools: list[BaseTool]
    notes: Path

    def __getitem__(self, name: str) -> BaseTool:
        return next(t for t in self.tools if t.name == name)


@pytest.fixture
async def mcp_tools(tmp_path: Path) -> AsyncIterator[MCPTools]:
    """The tools of a real MCP server run over stdio (``python -m tests.support.mcp_server``),
    loaded through langchain-mcp-adapters on one session held open for the test."""
    # imported here: only the MCP tests need the mcp package (it does not import under
    # pydantic 2.10, the lowest version pyproject.toml allows)
    from tests.support.mcp_client import mcp_session_tools

    notes = tmp_path / "notes.txt"
    async with mcp_session_tools(notes) as tools:
        yield MCPTools(tools, notes)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """One PostgreSQL server for the session: ``$LANGGRAPH_LOOP_TEST_PG_URI`` or a throwaway
    local server (installed with apt-get when absent), stopped and deleted afterwards."""
    with pg_uri() as uri:
        yield uri


@pytest.fixture
def pg_db(pg_server: str) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return fresh_database(pg_server)
