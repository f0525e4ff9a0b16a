"""The examples that opened the ``nodes`` modules' docstrings, as tests."""

from __future__ import annotations

from langchain.agents.middleware import ModelRequest, dynamic_prompt
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

from langgraph_loop import create_loop_agent
from langgraph_loop.core.config import Limits
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.structured import resolve_response_format
from langgraph_loop.engine.decision import Decision
from langgraph_loop.nodes.compaction import plan_compaction
from langgraph_loop.nodes.judge import parse_text_verdict
from langgraph_loop.nodes.loop_detector import apply
from langgraph_loop.nodes.prepare import repair_dangling
from langgraph_loop.nodes.respond import read_tool_answer, structured_due
from langgraph_loop.nodes.router import decide
from langgraph_loop.nodes.stall import StallDetection, flat_tokens, stall_guard
from langgraph_loop.nodes.tools import plan_calls
from langgraph_loop.nodes.view import policy_of, run_view
from langgraph_loop.scripted import ScriptedChatModel


def test_compaction_summarizes_the_old_part_and_keeps_a_reply_with_its_results() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1")
    msgs = [HumanMessage("task", id="h0"), AIMessage("x", id="a0"),
            HumanMessage("more", id="h1"), ai, ToolMessage("ok", tool_call_id="c1", id="t1")]
    split = plan_compaction(msgs, keep_last=1, keep_ids={"h0"})
    assert ([m.id for m in split.old], [m.id for m in split.tail]) == (["a0", "h1"], ["a1", "t1"])


def test_a_users_dynamic_prompt_middleware_sets_the_system_message_the_model_gets() -> None:
    @dynamic_prompt
    def prompt(request: ModelRequest) -> str:
        return f"You serve {len(request.messages)} message(s)."

    model = ScriptedChatModel(script=["ok"])
    agent = create_loop_agent(model, middleware=[prompt])
    assert agent.invoke({"messages": [HumanMessage("hi")]})["stop_reason"] == "completed"
    assert model.requests[0][0].content == "You serve 1 message(s)."


def test_a_text_verdict_is_read_from_its_json_or_its_last_line() -> None:
    assert parse_text_verdict("Looks complete.\nVERDICT: DONE") == {
        "answered": True, "reasoning": "Looks complete."}
    assert parse_text_verdict('{"answered": false, "reasoning": "no sources"} VERDICT: DONE') == {
        "answered": False, "reasoning": "no sources"}


def test_a_stop_decision_answers_the_replys_calls_as_not_run() -> None:
    s = LoopSettings.build(ScriptedChatModel())
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    state = {"messages": [HumanMessage("go"), ai], "run": {"id": "r"}}
    update = apply(Decision(ai, guard={"guard": "limits", "reason": "max_tool_calls"}), state, s)
    assert (update["stop_reason"], [m.status for m in update["messages"]]) == (
        "max_tool_calls", ["error"])


def test_a_reply_left_with_unanswered_calls_before_a_new_question_is_repaired() -> None:
    msgs = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a"),
            HumanMessage("new question", id="h")]
    assert [type(m).__name__ for m in repair_dangling(msgs)] == [
        "RemoveMessage", "ToolMessage", "HumanMessage"]


class Weather(BaseModel):
    city: str


def test_a_structured_answer_is_read_from_its_tool_call() -> None:
    out = resolve_response_format(Weather, ScriptedChatModel(), [])
    ai = AIMessage("", tool_calls=[{"name": "Weather", "args": {"city": "Oslo"}, "id": "c1"}])
    assert structured_due({"messages": [ai]}, out) is True
    answers, response = read_tool_answer(ai, out)
    assert (response, answers[0].content) == (
        Weather(city="Oslo"), "Returning structured response: city='Oslo'")


def test_the_router_completes_a_run_without_a_condition_and_continues_one_that_asks_for_more() -> None:
    assert repr(decide(iteration=1, max_iterations=10, has_condition=False, predicate=None,
                       verdict=None)) == "(<StopReason.COMPLETED: 'completed'>, None)"
    assert decide(iteration=2, max_iterations=5, has_condition=True, predicate=(True, "more"),
                  verdict=None) == (None, "more")


def test_a_stall_is_flat_tokens_or_no_new_work_over_consecutive_iterations() -> None:
    assert flat_tokens([1000, 1040, 980], tolerance=0.10) is True
    assert flat_tokens([1000, 1080, 1160], tolerance=0.10) is False  # steady growth: 16% spread
    recs = [{"iteration": i, "usage": {"total_tokens": t}, "answer_hash": None,
             "work_hash": "w"} for i, t in [(1, 500), (2, 900), (3, 1700)]]
    found = stall_guard(recs, StallDetection(consecutive=3), new_work={})  # type: ignore[arg-type]
    assert found is not None and found["layer"] == "work"
    assert stall_guard(recs, StallDetection(consecutive=3), new_work={3: True}) is None  # type: ignore[arg-type]


def test_an_unknown_tool_is_refused_with_the_names_of_those_there_are() -> None:
    assert plan_calls([{"name": "a", "args": {}, "id": "1"}, {"name": "zz", "args": {}, "id": "2"}],
                      known={"a"}, offered=None, allowance=None) == [
        ("run", None), ("refuse", "Error: unknown tool 'zz'. Available tools: a.")]


def test_the_runs_view_counts_a_persons_extension_in_its_budget() -> None:
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    view = run_view({"run": {"id": "r", "request_id": "h", "budget_extra": 50},  # type: ignore[typeddict-item]
                     "usage": {"total_tokens": 40}}, s)
    assert (view.id, view.budget, view.spent, policy_of(s).limits.token_budget) == ("r", 150, 40, 100)
