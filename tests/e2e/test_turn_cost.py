"""A turn's own work does not grow with the thread (issue 42): deterministic counts, not timings.

The model node makes the text it sends encodable (a lone surrogate becomes its escape,
docs/reliability.md). It looks at what came in since the newest reply; what a run's input or
an ``update_state`` brings (an imported history) is escaped by the input check, where every
input message is already read. So a turn on a long thread looks at as many messages as a turn
on a short one, and an imported history is still sent and stored escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

import langgraph_loop.nodes.model as model_node
from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, thread

ODD = "caf\udce9.txt"
"""A lone surrogate, as a non-UTF-8 file name reads in Python."""


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[BaseMessage]:
    """The messages the model node looks at for text to escape, as it looks at them."""
    seen: list[BaseMessage] = []
    escape: Callable[[Any], Any] = model_node.encodable

    def counting(message: Any) -> Any:
        seen.append(message)
        return escape(message)

    monkeypatch.setattr(model_node, "encodable", counting)
    return seen


def test_a_turn_looks_at_as_many_messages_on_a_long_thread_as_on_a_short_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counted(monkeypatch)
    model = ScriptedChatModel(default=lambda messages: (
        "3" if isinstance(messages[-1], ToolMessage) else [("add", {"a": 1, "b": 2})]))
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    looked: list[int] = []
    for turn in range(30):
        seen.clear()
        agent.invoke({"messages": [HumanMessage(f"turn {turn}: add 1 and 2")]}, thread("long"))
        looked.append(len(seen))
    assert len(agent.get_state(thread("long")).values["messages"]) == 120
    assert looked == [4] * 30  # the new message, the call's result and the two replies


def _history() -> list[BaseMessage]:
    """An imported history whose older AIMessage called a tool with a lone surrogate."""
    call = {"name": "add", "args": {"a": 1, "b": 2, "note": ODD}, "id": "c1", "type": "tool_call"}
    return [HumanMessage("open it", id="h1"), AIMessage("", tool_calls=[call], id="a1"),
            ToolMessage("3", tool_call_id="c1", id="t1"), AIMessage("Opened.", id="a2"),
            HumanMessage("and now?", id="h2")]


def _sent_note(model: ScriptedChatModel) -> Any:
    (request,) = model.requests
    return next(m for m in request if m.id == "a1").tool_calls[0]["args"]["note"]


def test_an_imported_history_is_sent_and_stored_escaped() -> None:
    model = ScriptedChatModel(script=["Nothing else."])
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    agent.invoke({"messages": _history()}, thread("imported"))
    stored = agent.get_state(thread("imported")).values["messages"]
    assert _sent_note(model) == "caf\\udce9.txt"
    assert next(m for m in stored if m.id == "a1").tool_calls[0]["args"]["note"] == "caf\\udce9.txt"


def test_a_history_written_by_update_state_is_sent_escaped() -> None:
    model = ScriptedChatModel(script=["Nothing else."])
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    agent.update_state(thread("edited"), {"messages": _history()[:-1]})
    agent.invoke({"messages": [HumanMessage("and now?")]}, thread("edited"))
    assert _sent_note(model) == "caf\\udce9.txt"


def _parent(model: ScriptedChatModel) -> Any:
    """A parent graph with the agent as its node (the agent's input is not checked there)."""
    parent = StateGraph(MessagesState)
    parent.add_node("agent", create_loop_agent(model, [add]))
    parent.add_edge(START, "agent")
    return parent.compile(checkpointer=InMemorySaver())


def test_a_parent_graphs_history_is_sent_escaped() -> None:
    model = ScriptedChatModel(script=["Nothing else."])
    out = _parent(model).invoke({"messages": _history()}, thread("p"))
    assert _sent_note(model) == "caf\\udce9.txt"
    assert out["messages"][-1].content == "Nothing else."


async def test_a_parent_graphs_history_is_sent_escaped_async() -> None:
    model = ScriptedChatModel(script=["Nothing else."])
    out = await _parent(model).ainvoke({"messages": _history()}, thread("p"))
    assert _sent_note(model) == "caf\\udce9.txt"
    assert out["messages"][-1].content == "Nothing else."


def test_ten_round_turns_write_a_full_copy_of_the_thread_at_most_every_four_turns() -> None:
    """A full copy (a snapshot) costs the whole thread to write (at 550 messages on SQLite
    about 36 ms of CPU, each time); the steps after it cost a load little to replay."""
    saver = InMemorySaver()

    def ten_rounds(messages: list[BaseMessage]) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return "done" if done % 10 == 0 and isinstance(messages[-1], ToolMessage) else [
            ("add", {"a": done, "b": 1})]

    agent = create_loop_agent(ScriptedChatModel(default=ten_rounds), [add], checkpointer=saver)
    for turn in range(8):
        agent.invoke({"messages": [HumanMessage(f"turn {turn}: ten rounds")]}, thread("copies"))
    messages = agent.get_state(thread("copies")).values["messages"]
    copies = sum("messages" in c.checkpoint["channel_values"] for c in saver.list(thread("copies")))
    assert (len(messages), copies) == (8 * 22, 1)  # 176 writes: one copy, at the 100th
