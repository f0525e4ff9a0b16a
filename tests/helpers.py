"""Small tools and helpers shared by the end-to-end tests."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from langgraph_loop.core.messages import check_pairing

EXECUTED: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    EXECUTED.append(f"add({a},{b})")
    return a + b


@tool
def boom(reason: str = "kaput") -> str:
    """A tool that always fails."""
    EXECUTED.append("boom")
    raise RuntimeError(reason)


@tool
def remember(fact: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Store a fact in state (returns a Command)."""
    EXECUTED.append(f"remember({fact})")
    return Command(update={
        "mode": fact,
        "messages": [ToolMessage(f"remembered {fact}", tool_call_id=tool_call_id)],
    })


def types(messages: list[BaseMessage]) -> list[str]:
    """Short type names, with the name tag of loop-made human messages."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            out.append("ai+calls" if m.tool_calls else "ai")
        elif isinstance(m, ToolMessage):
            out.append(f"tool:{m.status}")
        elif isinstance(m, HumanMessage) and m.name:
            out.append(f"human:{m.name}")
        else:
            out.append(m.type)
    return out


def thread(tid: str) -> RunnableConfig:
    """A config for a thread id."""
    return {"configurable": {"thread_id": tid}}


def assert_valid_thread(messages: list[BaseMessage]) -> None:
    """The stored thread is provider-valid."""
    problems = check_pairing(messages)
    assert not problems, problems
