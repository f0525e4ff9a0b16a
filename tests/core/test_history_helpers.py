"""The input check's internal helpers (``core/history.py``), once their doctests."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_loop.core.history import (
    _continued,
    _results_removed,
    _with_answers_removed,
    answer_unanswered,
    checked_messages,
    new_user_messages,
    removal_breaks,
    resolve_removals,
    saved_answers,
)


def _ai() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a")


def _thread() -> list:
    return [HumanMessage("q", id="h"), _ai(), ToolMessage("r", tool_call_id="c1", id="t")]


def test_results_removed_names_the_removal_and_the_call() -> None:
    ai = _ai()
    assert _results_removed([ai, ToolMessage("r", tool_call_id="c1", id="t")], [ai])[0][:46] \
        == "removing tool message 't' leaves call 'c1' of "


def test_saved_answers_finds_the_answers_of_the_given_calls() -> None:
    found = saved_answers([{"message": ToolMessage("r", tool_call_id="c1")}], ["c1", "c2"])
    assert found == [ToolMessage(content="r", tool_call_id="c1")]


def test_answer_unanswered_answers_a_call_before_the_next_message() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    out = answer_unanswered([HumanMessage("a"), ai, HumanMessage("b")])
    assert [m.type for m in out] == ["human", "ai", "tool", "human"]


def test_resolve_removals_expands_remove_all_and_rejects_unknown_ids() -> None:
    old = [HumanMessage("a", id="1")]
    resolved = resolve_removals(old, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("b", id="2")])
    assert [m.id for m in resolved] == ["1", "2"]
    with pytest.raises(ValueError, match=r"^Attempting to delete a message with an ID that "
                                         r"doesn't exist \('9'\)$"):
        resolve_removals(old, [RemoveMessage(id="9")])


def test_with_answers_removed_removes_the_results_of_a_removed_ai_message() -> None:
    assert [m.id for m in _with_answers_removed(_thread(), [RemoveMessage(id="a")])] == ["a", "t"]


def test_removal_breaks_names_the_call_left_without_a_result() -> None:
    old = _thread()
    assert removal_breaks(old, [RemoveMessage(id="t")]) == \
        ["message 1: tool calls ['c1'] not answered at the end"]
    assert removal_breaks(old, resolve_removals(old, [RemoveMessage(id="a")])) == []


def test_new_user_messages_only_without_ids() -> None:
    assert new_user_messages({"messages": [("user", "hi")]}) is True
    assert new_user_messages({"messages": []}) is False
    assert new_user_messages({"messages": [HumanMessage("hi", id="h1")]}) is False


def test_continued_answers_open_calls_as_tools_and_clears_the_stop_as_model() -> None:
    ai = _ai()
    assert [m.type for m in _continued({"messages": [ai]}, "tools", {})["messages"]] == ["ai", "tool"]
    assert _continued({"messages": [ai]}, "model", {"stop_reason": "completed"})["stop_reason"] is None


def test_checked_messages_answers_an_open_call_and_rejects_an_orphan_result() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert [m.type for m in checked_messages([HumanMessage("a"), ai, HumanMessage("b")], [])] == [
        "human", "ai", "tool", "human"]
    with pytest.raises(ValueError) as exc:
        checked_messages([HumanMessage("a"), ToolMessage("3", tool_call_id="ghost")], [])
    assert str(exc.value)[:57] == "input: message 1 (tool '3'): a tool message must answer a"
