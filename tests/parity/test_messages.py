"""Issue 20, item 4: ``RemoveMessage`` in the input behaves as LangGraph's ``add_messages``."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from tests.parity.compare import run_both, scripted


def test_remove_all_messages_starts_the_thread_over() -> None:
    """``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` wipes the stored history: the next model call
    sees only what follows it."""
    fresh = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh start")]}
    pair = run_both(scripted("first answer", "second answer"), [],
                    [{"messages": [HumanMessage("hello")]}, fresh])
    pair.assert_same()
    assert [m.content for m in pair.loop.messages] == ["fresh start", "second answer"]
    assert pair.loop.seen[-1] == [{"type": "human", "content": "fresh start"}]


def test_remove_message_by_id() -> None:
    """A known id is removed from the stored history."""
    first = {"messages": [HumanMessage("drop me", id="m-1"), HumanMessage("keep me", id="m-2")]}
    second = {"messages": [RemoveMessage(id="m-1"), HumanMessage("go on")]}
    pair = run_both(scripted("one", "two"), [], [first, second])
    pair.assert_same()
    assert "drop me" not in [m.content for m in pair.loop.messages]


def test_remove_message_with_unknown_id_raises() -> None:
    """``add_messages`` raises for an id that is not in the state; the loop must not accept it
    silently."""
    bad = {"messages": [RemoveMessage(id="no-such-id"), HumanMessage("again")]}
    pair = run_both(scripted("one", "two"), [], [{"messages": [HumanMessage("hello")]}, bad])
    assert isinstance(pair.reference.error, ValueError)
    assert "no-such-id" in str(pair.reference.error)
    pair.assert_same()
