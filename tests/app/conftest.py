"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest

from tests.support.openai_server import OpenAIServer


@pytest.fixture
def live_env(openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIServer:
    """The CLI's model configured to the loopback server through the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("LANGGRAPH_LOOP_MODEL", "m")
    return openai_server
