"""The internal helpers of the graph's node modules, as their docstring examples showed them.

These were doctests; they moved here (same assertions) so that each module's docstring keeps
the contract and one runnable example (issue 38).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_loop.core.config import Approval, Judge, JudgeVerdict, LoopDetection
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.approval import apply_review, auto_allowed, check_decisions, needs_approval
from langgraph_loop.nodes.binding import FINAL_ANSWER, openai_compatible, tagged
from langgraph_loop.nodes.judge import judge_instructions, judge_request, resolve_verdict
from langgraph_loop.nodes.prepare import folded_budget, go_on, start_run
from langgraph_loop.nodes.router import default_message, explain_stop, resend_message, with_progress
from langgraph_loop.scripted import ScriptedChatModel

# --- router ------------------------------------------------------------------------------------


def test_explain_stop_max_iterations() -> None:
    s = LoopSettings.build(ScriptedChatModel(), iterations={"max": 2})
    assert explain_stop({"iteration": 2}, s, StopReason.MAX_ITERATIONS) == {
        "guard": "max_iterations", "reason": "max_iterations", "limit": 2, "value": 2}


def test_default_message_without_feedback() -> None:
    assert default_message(None) == "Continue working on the task. If it is complete, say so."


def test_with_progress_puts_the_latest_entry_first() -> None:
    assert with_progress("Go on.", ["read the file", "fixed the bug"], inject=True) == (
        "Progress so far:\n2. fixed the bug\n\nGo on.")


def test_resend_message() -> None:
    first = HumanMessage("Write a haiku.", id="r1")
    assert resend_message([first], request_id="r1", fresh_context=False,
                          feedback=None).content == "Write a haiku."
    assert resend_message([first], request_id="r1", fresh_context=True, feedback=None).content == (
        "Continue working on the task. If it is complete, say so.")


# --- approval ----------------------------------------------------------------------------------


def test_check_decisions_refuses_an_edit_into_another_gated_tool() -> None:
    calls = [{"name": "rm", "args": {}, "id": "c1"}]
    with pytest.raises(ValueError, match=r"^approval: decision 1 edits 'rm' into another gated "
                                         r"tool 'wipe'; an edit may keep the tool or switch to "
                                         r"an ungated one$"):
        check_decisions(calls, [{"type": "edit", "edited_action": {"name": "wipe", "args": {}}}],
                        gated={"rm", "wipe"}, known={"rm", "wipe"})


def test_auto_allowed_is_bounded_per_run() -> None:
    assert (auto_allowed({"auto_rounds": 2}, 3), auto_allowed({"auto_rounds": 3}, 3)) == (True, False)


def test_needs_approval() -> None:
    ai = AIMessage("", tool_calls=[{"name": "rm", "args": {}, "id": "c1"}])
    assert (needs_approval(ai, Approval(tools=("rm",))), needs_approval(ai, None)) == (True, False)


def test_apply_review() -> None:
    calls = [{"name": "rm", "args": {"p": 1}, "id": "c1"}, {"name": "ls", "args": {}, "id": "c2"}]
    review = {"message_id": "m", "decisions": {"c1": {"type": "reject"}}}
    r = apply_review(calls, review, message_id="m", gated={"rm"})
    assert (sorted(r.refusals), [c["name"] for c in r.calls]) == (["c1"], ["rm", "ls"])
    assert sorted(apply_review(calls, None, message_id="m", gated={"rm"}).refusals) == ["c1"]


# --- judge -------------------------------------------------------------------------------------


def test_judge_request() -> None:
    state = {"messages": [HumanMessage("2+2?", id="r"), AIMessage("4")], "run": {"request_id": "r"}}
    assert [m.type for m in judge_request(state, Judge(model=ScriptedChatModel()))] == [  # type: ignore[arg-type]
        "system", "human", "human", "human"]


def test_judge_instructions() -> None:
    assert judge_instructions("Be strict.{criteria}", ["short"]).startswith("Be strict.")
    assert "VERDICT: MORE" in judge_instructions("Be strict.", [])


def test_resolve_verdict() -> None:
    assert resolve_verdict(JudgeVerdict(answered=True, reasoning="ok"), [], "") == {
        "answered": True, "reasoning": "ok"}
    assert resolve_verdict(None, [{"answered": "yes please"}], "VERDICT: MORE")["answered"] is False


# --- binding -----------------------------------------------------------------------------------


def test_tagged() -> None:
    c = tagged({"tags": ["mine"]}, FINAL_ANSWER)
    assert (sorted(c["tags"]), c["run_name"]) == (["final_answer", "mine"], "final_answer")


def test_openai_compatible() -> None:
    assert openai_compatible(ScriptedChatModel()) is False


# --- prepare -----------------------------------------------------------------------------------


def test_folded_budget() -> None:
    assert folded_budget({"run": {"id": "r", "budget_extra": 500}, "usage": {"total_tokens": 900},
                          "thread_budget": {"spent": 100, "extra": 0}}) == {"spent": 1000, "extra": 500}


def test_go_on_continues_the_paused_run() -> None:
    s = LoopSettings.build(ScriptedChatModel(), loop_detection=LoopDetection(ask_human=True))
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a")
    state = {"messages": [ai, HumanMessage("try g", id="h")],
             "run": {"id": "r", "decision": {"guard": {"reason": "loop_detected"}, "finding": {}}}}
    update = go_on(state, s)  # type: ignore[arg-type]
    assert update is not None
    assert (update["run"], [m.type for m in update["messages"]]) == ({"id": "r"}, ["remove", "tool", "human"])


def test_start_run() -> None:
    s = LoopSettings.build(ScriptedChatModel())
    update = start_run({"messages": [HumanMessage("hi", id="h1")]}, s, now=5.0)
    assert (update["iteration"], update["run"]["request_id"], update["stop_reason"]) == (1, "h1", None)
