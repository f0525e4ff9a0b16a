"""Small tools and helpers shared by the end-to-end tests."""

from __future__ import annotations

import re
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from langgraph_loop.core.messages import check_pairing
from langgraph_loop.scripted import ScriptedChatModel

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


# --- a person's answers to the loop's questions (LangChain's human-in-the-loop decisions) ----

def approve() -> dict[str, Any]:
    """``{"decisions": [{"type": "approve"}]}``."""
    return {"decisions": [{"type": "approve"}]}


def reject(message: str | None = None) -> dict[str, Any]:
    """A reject decision, with the person's reason when given."""
    return {"decisions": [{"type": "reject", **({"message": message} if message else {})}]}


def edit(name: str, **args: Any) -> dict[str, Any]:
    """An edit decision of the action ``name`` with ``args``."""
    return {"decisions": [{"type": "edit", "edited_action": {"name": name, "args": args}}]}


def add_tokens(tokens: int | str, message: str | None = None) -> dict[str, Any]:
    """The budget check-in's edit: add ``tokens`` (a UI sends text), and say ``message``."""
    return edit("Token budget reached: add more?", tokens=tokens,
                **({"message": message} if message else {}))


def asked_numbers(question: Any) -> tuple[int, int, int]:
    """``(spent, budget, needed)`` as the budget check-in's description states them."""
    description = question["action_requests"][0]["description"]
    found = re.search(r"used ([\d,]+) of its ([\d,]+)-token budget; the next step needs about "
                      r"([\d,]+)", description)
    assert found is not None, description
    spent, budget, needed = (int(g.replace(",", "")) for g in found.groups())
    return spent, budget, needed


def researcher() -> ScriptedChatModel:
    """Researches until a person's message asks it to wrap up."""
    def script(messages: list[BaseMessage]) -> Any:
        if "wrap up" in str(messages[-1].content):
            return "Summary sent."
        return [("research", {"query": f"q{sum(m.type == 'tool' for m in messages)}"})]
    return ScriptedChatModel(default=script, no_tools_reply="final")
