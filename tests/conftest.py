"""Shared fixtures: scripted models, the pairing check applied to every request."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from graph.pairing import check_pairing
from graph.scripted import ScriptedChatModel

# Property-test budgets: ``ci`` (the default) fits ``make test`` on 2 cores; ``dev`` is a
# quick local run; ``long`` is for a soak run (HYPOTHESIS_PROFILE=long).
settings.register_profile("ci", max_examples=1000, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("long", max_examples=20_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """One throwaway PostgreSQL server (or $LOOPGRAPH_TEST_PG_URI) for the session."""
    from tests.support.postgres import pg_uri

    with pg_uri() as uri:
        yield uri
