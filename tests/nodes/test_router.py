"""Pure decisions at the end of a pass: stop/continue, continuation text, request window."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langgraph_loop import Iterations
from langgraph_loop.core.messages import CONTINUE_NAME
from langgraph_loop.core.prompts import CONTINUE as DEFAULT_CONTINUE
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.model import build_request
from langgraph_loop.nodes.router import (
    continuation_text,
    decide,
    default_message,
    normalize_predicate,
    resend_message,
    with_progress,
)
from langgraph_loop.scripted import ScriptedChatModel


def _decide(**kw):
    base = {"iteration": 1, "max_iterations": 10, "has_condition": True, "predicate": None,
            "verdict": None}
    return decide(**{**base, **kw})


def test_without_condition_the_first_pass_end_completes() -> None:
    assert _decide(has_condition=False) == (StopReason.COMPLETED, None)


def test_cap_wins_over_predicate_and_verdict() -> None:
    assert _decide(iteration=3, max_iterations=3, predicate=(True, "more")) == (
        StopReason.MAX_ITERATIONS, None)
    assert _decide(iteration=3, max_iterations=3, verdict={"answered": False, "reasoning": "x"}) == (
        StopReason.MAX_ITERATIONS, None)


def test_unbounded_never_caps() -> None:
    assert _decide(iteration=10_000, max_iterations=None, predicate=(True, None)) == (None, None)


def test_predicate_continue_wins_over_a_positive_verdict() -> None:
    assert _decide(predicate=(True, "fb"), verdict={"answered": True}) == (None, "fb")


def test_predicate_stop_then_verdict_decides() -> None:
    assert _decide(predicate=(False, None), verdict={"answered": True, "reasoning": "ok"}) == (
        StopReason.COMPLETED, None)
    assert _decide(predicate=(False, None), verdict={"answered": False, "reasoning": "no date"}) == (
        None, "no date")
    assert _decide(verdict={"answered": False, "reasoning": ""}) == (None, None)


def test_predicate_stop_without_judge_completes_with_its_feedback() -> None:
    assert _decide(predicate=(False, "all done")) == (StopReason.COMPLETED, "all done")


def test_normalize_predicate() -> None:
    assert normalize_predicate(True) == (True, None)
    assert normalize_predicate((False, "fine")) == (False, "fine")
    assert normalize_predicate((1, None)) == (True, None)
    with pytest.raises(TypeError, match="should_continue must return"):
        normalize_predicate("yes")


def test_default_message_with_and_without_feedback() -> None:
    assert default_message(None) == DEFAULT_CONTINUE
    assert default_message("") == DEFAULT_CONTINUE
    assert default_message("cite a source") == (
        f"Feedback on your last answer: cite a source\n\n{DEFAULT_CONTINUE}")


def test_progress_injection_lists_only_the_latest_entry() -> None:
    assert with_progress("Go.", ["a", "b", "c"], inject=True) == "Progress so far:\n3. c\n\nGo."
    assert with_progress("Go.", ["a"], inject=False) == "Go."
    assert with_progress("Go.", [], inject=True) == "Go."
    assert continuation_text("fb", ["x"], True) == (
        f"Progress so far:\n1. x\n\nFeedback on your last answer: fb\n\n{DEFAULT_CONTINUE}")


def test_resend_keeps_multimodal_content_and_tags_it() -> None:
    content = [{"type": "text", "text": "Describe"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    first = HumanMessage(content, id="r1")  # type: ignore[arg-type]
    again = resend_message([first], request_id="r1", fresh_context=False, feedback="fb")
    assert again.content == content and again.name == CONTINUE_NAME and again.id != "r1"


def test_resend_in_fresh_context_does_not_repeat_the_request() -> None:
    first = HumanMessage("task", id="r1")
    assert resend_message([first], request_id="r1", fresh_context=True, feedback="fb").content == (
        default_message("fb"))
    later = HumanMessage("step 2", id="c2")
    assert resend_message([later], request_id="r1", fresh_context=True, feedback=None).content == (
        "step 2")
    assert resend_message(None, request_id="r1", fresh_context=False, feedback=None).content == (
        DEFAULT_CONTINUE)


def _fresh_state() -> dict:
    return {
        "messages": [HumanMessage("old", id="o"), AIMessage("old answer", id="oa"),
                     HumanMessage("task", id="r"), AIMessage("pass 1", id="a1"),
                     HumanMessage("continue", id="c", name=CONTINUE_NAME),
                     AIMessage("", id="a2", tool_calls=[{"name": "f", "args": {}, "id": "t1"}]),
                     ToolMessage("ok", tool_call_id="t1", id="tm")],
        "iteration": 2, "progress": ["pass 1"],
        "run": {"request_id": "r"}, "iteration_info": {"start_id": "c"},
    }


def test_fresh_context_window() -> None:
    s = LoopSettings.build(ScriptedChatModel(), system_prompt="Be brief.",
                           iterations=Iterations(fresh_context=True))
    request = build_request(_fresh_state(), s, [])  # type: ignore[arg-type]
    assert [m.id for m in request[1:]] == ["r", request[2].id, "c", "a2", "tm"]
    assert isinstance(request[0], SystemMessage) and request[0].content == "Be brief."
    assert request[2].content == "Progress so far:\n1. pass 1" and request[2].name == "loop_progress"


def test_fresh_context_without_progress_injection() -> None:
    s = LoopSettings.build(ScriptedChatModel(),
                           iterations=Iterations(fresh_context=True, inject_progress=False))
    request = build_request(_fresh_state(), s, [])  # type: ignore[arg-type]
    assert [m.id for m in request] == ["r", "c", "a2", "tm"]


def test_first_pass_of_fresh_context_sends_the_whole_thread() -> None:
    s = LoopSettings.build(ScriptedChatModel(), iterations=Iterations(fresh_context=True))
    state = {**_fresh_state(), "iteration": 1}
    assert len(build_request(state, s, [])) == 7  # type: ignore[arg-type]
