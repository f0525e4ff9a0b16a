"""Issue 21, overrides: a run's ``context=`` is validated before the run writes anything,
any ``Mapping`` is accepted and anything else is a clear ``ValueError``, and the overrides
belong to the run: every resume of that run enforces them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Approval, Limits, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import assert_rejected, texts, thread

RAN: list[str] = []


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    RAN.append(url)
    return f"page {url}"


@tool
def publish(url: str) -> str:
    """Publish a page (needs approval)."""
    RAN.append(f"publish {url}")
    return f"published {url}"


def pages() -> ScriptedChatModel:
    """A model that fetches one new page per call, forever (a final answer without tools)."""
    counter = iter(range(1, 1000))
    return ScriptedChatModel(default=lambda _m: [("fetch", {"url": f"u{next(counter)}"})],
                             no_tools_reply="summary")


class Overrides(Mapping[str, Any]):
    """A read-only mapping that is not a dict (as a settings object or a proxy may be)."""

    def __init__(self, **values: Any) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def test_an_invalid_context_is_rejected_before_the_input_is_written(
        scripted: list[ScriptedChatModel]) -> None:
    """Error, before anything is written: retrying with a valid ``context`` then sends the
    user's message once, not twice."""
    model = pages()
    scripted.append(model)
    agent: Any = create_loop_agent(model, [fetch], checkpointer=InMemorySaver())
    go = {"messages": [HumanMessage("read the site")]}
    text = assert_rejected(agent, model, thread("ctx"),
                           lambda: agent.invoke(go, thread("ctx"),
                                                context={"limits": {"max_tool_calls": 0}}))
    assert "max_tool_calls" in text
    agent.invoke(go, thread("ctx"), context={"limits": {"max_tool_calls": 2}})
    assert texts(model.requests[0]) == ["read the site"]


@pytest.mark.parametrize("context", [MappingProxyType({"limits": {"max_tool_calls": 2}}),
                                     Overrides(limits={"max_tool_calls": 2})],
                         ids=["mappingproxy", "custom-mapping"])
def test_a_context_given_as_any_mapping_is_applied(scripted: list[ScriptedChatModel],
                                                   context: Mapping[str, Any]) -> None:
    """Accept any ``Mapping`` (``dict`` is only one of them): the cap it sets holds."""
    RAN.clear()
    model = pages()
    scripted.append(model)
    agent: Any = create_loop_agent(model, [fetch], limits=Limits(max_tool_calls=5))
    result = agent.invoke({"messages": [HumanMessage("read the site")]}, context=context)
    assert RAN == ["u1", "u2"]
    assert result["stop_reason"] == "max_tool_calls"


@pytest.mark.parametrize("context", ["max_tool_calls=2", [("max_tool_calls", 2)]],
                         ids=["string", "list-of-pairs"])
def test_a_context_that_is_not_a_mapping_is_a_value_error(scripted: list[ScriptedChatModel],
                                                          context: Any) -> None:
    """Error. Silently ignoring it ran 5 tools under a requested cap of 2; a list of pairs
    is not guessed into a dict either (LangGraph's ``context`` is the run's context object,
    and the loop reads overrides from a mapping): the error names ``context`` and what it
    accepts, nothing runs and nothing is written."""
    RAN.clear()
    model = pages()
    scripted.append(model)
    agent = create_loop_agent(model, [fetch], limits=Limits(max_tool_calls=5),
                              checkpointer=InMemorySaver())
    text = assert_rejected(
        agent, model, thread("bad-type"),
        lambda: agent.invoke({"messages": [HumanMessage("read the site")]}, thread("bad-type"),
                             context=context))
    assert "context" in text and "mapping" in text.lower(), text
    assert RAN == []


def test_a_context_cap_holds_after_an_approval_resume(scripted: list[ScriptedChatModel]) -> None:
    """The overrides are stored with the run: a run started with ``max_tool_calls=2`` that
    pauses for approval and is resumed *without* ``context`` (as a UI or LangGraph Server
    resume does) still stops after 2 tool calls."""
    RAN.clear()
    counter = iter(range(1, 1000))

    def reply(messages: list[BaseMessage]) -> Any:
        if not any(isinstance(m, AIMessage) for m in messages):
            return [("publish", {"url": "home"})]
        return [("fetch", {"url": f"u{next(counter)}"})]

    model = ScriptedChatModel(default=reply, no_tools_reply="summary")
    scripted.append(model)
    agent = create_loop_agent(model, [fetch, publish], approval=Approval(tools=("publish",)),
                              checkpointer=InMemorySaver())
    paused = agent.invoke({"messages": [HumanMessage("publish, then read")]}, thread("ap"),
                          context={"limits": {"max_tool_calls": 2}})
    assert "__interrupt__" in paused and RAN == []
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), thread("ap"))
    assert RAN == ["publish home", "u1"]
    assert result["stop_reason"] == "max_tool_calls"


def test_a_context_cap_holds_after_a_resume_from_a_provider_error(
        scripted: list[ScriptedChatModel]) -> None:
    """The same class, found by the property draft: the provider fails on the first call, the
    caller resumes the run with ``invoke(None)`` (as the README's error handling says) and
    the run's ``max_tool_calls=1`` no longer holds."""
    RAN.clear()
    counter = iter(range(1, 1000))

    def reply(_messages: list[BaseMessage]) -> Any:
        return [("fetch", {"url": f"u{next(counter)}"})]

    model = ScriptedChatModel(script=[RuntimeError("provider down")], default=reply,
                              no_tools_reply="summary")
    scripted.append(model)
    agent = create_loop_agent(model, [fetch], limits=Limits(max_tool_calls=4),
                              checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="provider down"):
        agent.invoke({"messages": [HumanMessage("read the site")]}, thread("down"),
                     context={"limits": {"max_tool_calls": 1}})
    result = agent.invoke(None, thread("down"))
    assert RAN == ["u1"]
    assert result["stop_reason"] == "max_tool_calls"


def test_a_resume_context_cannot_loosen_the_run_cap(scripted: list[ScriptedChatModel]) -> None:
    """Added with the fix: a resume that brings its own ``context`` (a server may send the
    assistant's) may add overrides, but the run's own ``max_tool_calls=1`` still holds."""
    RAN.clear()
    model = ScriptedChatModel(script=[RuntimeError("provider down")],
                              default=lambda _m: [("fetch", {"url": f"u{len(RAN) + 1}"})],
                              no_tools_reply="summary")
    scripted.append(model)
    agent = create_loop_agent(model, [fetch], checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="provider down"):
        agent.invoke({"messages": [HumanMessage("read the site")]}, thread("loosen"),
                     context={"limits": {"max_tool_calls": 1}})
    result = agent.invoke(None, thread("loosen"), context={"limits": {"max_tool_calls": 9}})
    assert RAN == ["u1"] and result["stop_reason"] == "max_tool_calls"
