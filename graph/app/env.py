"""Configuration the CLI and the server entry read from the environment.

Example:
    >>> try:
    ...     model_from_env({})
    ... except UsageError as exc:
    ...     print("OPENAI_API_KEY" in str(exc))
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

__all__ = ["DEFAULT_DB", "UsageError", "model_from_env"]

DEFAULT_DB = Path(".langgraph-loop") / "threads.sqlite"
"""Where the CLI stores threads unless ``--db`` says otherwise."""


class UsageError(Exception):
    """A user-facing error: printed as one line (and a hint) without a traceback, exit 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def model_from_env(env: Mapping[str, str]) -> BaseChatModel:
    """ChatOpenAI from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``LANGGRAPH_LOOP_MODEL``.

    Raises:
        UsageError: neither ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` is set.
    """
    key, base = env.get("OPENAI_API_KEY"), env.get("OPENAI_BASE_URL")
    if not key and not base:
        raise UsageError(
            "no model configured. Set OPENAI_API_KEY (and OPENAI_BASE_URL for a local "
            "OpenAI-compatible server such as vLLM or Ollama; LANGGRAPH_LOOP_MODEL picks the "
            "model). To try langgraph-loop offline, run `langgraph-loop demo`."
        )
    return ChatOpenAI(model=env.get("LANGGRAPH_LOOP_MODEL", "gpt-4o-mini"), api_key=SecretStr(key or "none"),
                      base_url=base, stream_usage=True, max_retries=2)
