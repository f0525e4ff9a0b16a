"""A bad answer to one of our questions (approval, the loop question, the budget check-in) is
refused before the run starts with a plain ``ValueError``: what the question takes and a valid
answer, no pydantic internals; the thread stays paused and a right answer then works. A tool's
own ``interrupt()`` stays free-form (issue 43, item 12).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from langgraph_loop import Approval, Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.questions import BUDGET_TITLE, answer_problem, the_decision, whole_number
from langgraph_loop.scripted import ScriptedChatModel


@tool
def status() -> str:
    """The job's status."""
    return "pending"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def ask_person(question: str) -> str:
    """Ask the person a question."""
    return str(interrupt(question))


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def looping() -> Any:
    model = ScriptedChatModel(default=lambda messages: [("status", {})], no_tools_reply="Stopped.")
    return create_loop_agent(model, [status], checkpointer=InMemorySaver(),
                             loop_detection=LoopDetection(ask_human=True))


def budgeted() -> Any:
    model = ScriptedChatModel(default=lambda messages: [("status", {})], no_tools_reply="Stopped.")
    return create_loop_agent(model, [status], checkpointer=InMemorySaver(),
                             limits=Limits(token_budget=400, budget_check_in=True))


def approving() -> Any:
    model = ScriptedChatModel(script=[[("delete_file", {"path": "a"})], "Done."])
    return create_loop_agent(model, [delete_file], checkpointer=InMemorySaver(),
                             approval=Approval(tools=["delete_file"]))


CASES = [
    (looping, {"decisions": [{"type": "edit", "edited_action": {"name": "x", "args": {"hint": 3}}}]},
     "loop question: an 'edit' carries its hint as text, args {'hint': '...'}, got 3; its question "
     "'Loop detected: status' "
     "takes {'decisions': [{'type': 'approve' | 'edit' | 'reject', ...}]}, e.g. "
     "{'decisions': [{'type': 'approve'}]}; nothing was resumed"),
    (budgeted, {"decisions": [{"type": "edit", "edited_action": {"name": BUDGET_TITLE, "args": {
        "tokens": "lots"}}}]},
     "token budget: the edited 'tokens' must be a whole number >= 1, got 'lots'; its question "
     "'Token budget reached: add more?' takes"),
    (approving, {"decisions": [{"type": "maybe"}]},
     "approval: a decision's type must be one of approve, edit, reject, got 'maybe'; its question "
     "'delete_file' takes"),
    (approving, {"decisions": [{"type": "approve"}, {"type": "approve"}]},
     "approval: expected one decision (one per action), got"),
]


@pytest.mark.parametrize(("agent", "answer", "message"), CASES)
def test_a_bad_answer_to_our_question_is_refused_before_the_run_plainly(
        agent: Any, answer: Any, message: str) -> None:
    graph, thread = agent(), config()
    (asked,) = graph.invoke({"messages": [HumanMessage("go")]}, thread)["__interrupt__"]
    before = graph.get_state(thread)
    with pytest.raises(ValueError) as refused:
        graph.invoke(Command(resume=answer), thread)
    assert str(refused.value).startswith("resume: " + message)
    assert "function-before" not in str(refused.value) and "validation error" not in str(refused.value)
    after = graph.get_state(thread)
    assert after.config == before.config and [i.value for i in after.interrupts] == [asked.value]
    by_id = graph.invoke(Command(resume={asked.id: {"decisions": [{"type": "reject"}]}}), thread)
    assert by_id["stop_reason"] in (StopReason.COMPLETED, StopReason.LOOP_DETECTED,
                                    StopReason.TOKEN_BUDGET)


def test_an_answer_by_interrupt_id_is_checked_too() -> None:
    graph, thread = looping(), config()
    (asked,) = graph.invoke({"messages": [HumanMessage("go")]}, thread)["__interrupt__"]
    with pytest.raises(ValueError, match=r"^resume: loop question: 'later' is not an answer 0.4 takes"):
        graph.invoke(Command(resume={asked.id: "later"}), thread)


def test_a_tools_own_interrupt_stays_free_form() -> None:
    model = ScriptedChatModel(script=[[("ask_person", {"question": "Which file?"})], "Done."])
    graph, thread = create_loop_agent(model, [ask_person], checkpointer=InMemorySaver()), config()
    assert graph.invoke({"messages": [HumanMessage("go")]}, thread)["__interrupt__"]
    result = graph.invoke(Command(resume="the first one"), thread)
    assert result["stop_reason"] == StopReason.COMPLETED
    assert [m.content for m in result["messages"] if m.type == "tool"] == ["the first one"]


def test_the_decision_and_whole_number() -> None:  # were the module's doctests
    assert the_decision({"decisions": [{"type": "approve"}]}, "loop question") == {"type": "approve"}
    with pytest.raises(ValueError) as old:
        the_decision({"action": "stop"}, "loop question")  # 0.3's shape
    assert str(old.value)[:60] == "loop question: {'action': 'stop'} is not an answer 0.4 takes"
    assert whole_number("20,000", "tokens") == 20000


def test_answer_problem_leaves_other_interrupts_alone() -> None:
    assert answer_problem([("tools", "i1", "Which file?")], 42) is None
    assert answer_problem([("model", "i1", {"action_requests": [{"name": "mine", "args": {}}]})],
                          "x") is None
