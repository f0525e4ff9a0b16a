"""What a demo scenario is, and how it is printed.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> describe(AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c"}]))
    'assistant  → add({"a": 1})'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from rich.console import Console

from langgraph_loop.app.transcript import render_run
from langgraph_loop.core.messages import as_text, shorten

__all__ = ["Expect", "Scenario", "check", "describe", "loop_warnings", "print_run"]


@dataclass(frozen=True)
class Expect:
    """What a scenario's title and answer claim about its run (checked by the tests).

    ``loop_warnings`` counts delivered notices that came from the loop detector;
    ``model_calls`` is the total over the run's iterations (a final-answer call included).
    """

    stop_reason: str
    iterations: int | None = None
    loop_warnings: int | None = None
    model_calls: int | None = None


@dataclass
class Scenario:
    """A named offline scenario: ``run(console, checkpointer)`` prints a transcript."""

    key: str
    title: str
    run: Callable[[Console, Any], dict[str, Any]]
    tags: list[str] = field(default_factory=list)
    expect: Expect | None = None


def loop_warnings(messages: list[BaseMessage]) -> int:
    """Delivered notices that carry a loop detector warning."""
    return sum(1 for m in messages if isinstance(m, HumanMessage)
               and "loop" in ((m.additional_kwargs.get("langgraph_loop") or {}).get("sources") or []))


def check(expect: Expect, state: dict[str, Any]) -> list[str]:
    """Where a run differs from what its scenario claims (empty: it keeps its word)."""
    records = state.get("iterations") or []
    seen = {"stop_reason": state.get("stop_reason"), "iterations": state.get("iteration"),
            "loop_warnings": loop_warnings(state.get("messages") or []),
            "model_calls": sum(r.get("model_calls", 0) for r in records)}
    return [f"{name}: claimed {want!r}, ran {seen[name]!r}"
            for name, want in vars(expect).items() if want is not None and seen[name] != want]


def _text(content: Any, limit: int = 160) -> str:
    return shorten(as_text(content), limit)


def describe(message: BaseMessage) -> str:
    """One readable line for a message."""
    if isinstance(message, AIMessage):
        calls = ", ".join(f"{c['name']}({json.dumps(c['args'])})" for c in message.tool_calls)
        if calls:
            return f"assistant  → {calls}" + (f"  {_text(message.content)}" if message.content else "")
        return f"assistant  {_text(message.content)}"
    if isinstance(message, ToolMessage):
        mark = "✗" if message.status == "error" else "✓"
        return f"tool {mark}     {message.name or ''}: {_text(message.content)}"
    if isinstance(message, HumanMessage) and message.name:
        return f"[{message.name}] {_text(message.content)}"
    if isinstance(message, SystemMessage):
        return f"system     {_text(message.content)}"
    return f"user       {_text(message.content)}"


def print_run(console: Console, title: str, state: dict[str, Any], start: int = 0) -> None:
    """Print a run's transcript (from message ``start``), stop reason and usage."""
    render_run(console, title, state, start)
