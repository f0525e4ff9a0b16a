"""The internal helpers of ``graph/engine/limits.py`` (and of the model node and the middleware),
as their docstring examples showed them.

These were doctests; they moved here (same assertions) so that the module's docstring keeps
the contract and one runnable example (issue 38).
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_loop.core.config import BudgetPressure, Limits
from langgraph_loop.core.messages import is_redirect
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.stop import guard
from langgraph_loop.engine.limits import (
    BUDGET_TITLE,
    budget_pressure_guard,
    budget_question,
    call_guard,
    check_in,
    estimate_input,
    failed_rounds,
    parse_budget_answer,
    redirect_message,
    run_budget,
    skipped_reply,
    spent_tokens,
    suggested_tokens,
    timeout_guard,
    tool_errors_guard,
)
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.middleware.stopping import stop_record
from langgraph_loop.nodes.model import build_request
from langgraph_loop.scripted import ScriptedChatModel

WHY = {"guard": "limits", "reason": "token_budget", "limit": 2000, "value": 1781, "estimate": 4632}


def test_run_budget_adds_the_run_extension_and_per_thread_the_threads() -> None:
    state = {"run": {"budget_extra": 50}, "thread_budget": {"extra": 7}}
    run = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    thread = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100, budget_scope="thread"))
    assert run_budget(state, run) == 150  # type: ignore[arg-type]
    assert run_budget(state, thread) == 157  # type: ignore[arg-type]


def test_estimate_input_is_the_reported_call_plus_what_came_after() -> None:
    ai = AIMessage("", usage_metadata={"input_tokens": 40, "output_tokens": 10, "total_tokens": 50})
    assert estimate_input([HumanMessage("hi"), ai, ToolMessage("x" * 40, tool_call_id="c")]) == 72


def test_call_guard_stops_when_the_call_and_a_final_answer_do_not_fit() -> None:
    request = [HumanMessage("x" * 400)]
    assert call_guard(request, request, budget=1000, spent=0) is None
    assert call_guard(request, request, budget=1000, spent=800)["reason"] == "token_budget"  # type: ignore[index]


def test_skipped_reply_says_why_there_is_no_answer() -> None:
    reply = skipped_reply({"guard": "limits", "reason": "token_budget"}, 12)
    assert str(reply.content)[:58] == "(No answer: the run stopped (token_budget) with about 12 t"


def test_spent_tokens_counts_the_replies_from_start() -> None:
    used = {"input_tokens": 40, "output_tokens": 10, "total_tokens": 50}
    messages = [HumanMessage("hi"), AIMessage("a", usage_metadata=used),  # type: ignore[arg-type]
                HumanMessage("more"), AIMessage("b", usage_metadata=used)]  # type: ignore[arg-type]
    assert spent_tokens(messages, 2) == 50


def test_suggested_tokens_and_the_budget_question() -> None:
    assert suggested_tokens(WHY) == 5000  # type: ignore[arg-type]
    (action,) = budget_question(WHY)["action_requests"]  # type: ignore[arg-type]
    assert (action["name"], action["args"]) == ("Token budget reached: add more?", {"tokens": 5000})
    assert action["description"].splitlines()[0][:50] == "This run has used 1,781 of its 2,000-token budget;"


def test_parse_budget_answer_takes_an_edited_number_as_text_and_approve_the_offer() -> None:
    edit = {"type": "edit", "edited_action": {"name": BUDGET_TITLE, "args": {"tokens": "20000"}}}
    assert parse_budget_answer({"decisions": [edit]}).tokens == 20000
    assert parse_budget_answer({"decisions": [{"type": "approve"}]}, 5000).tokens == 5000


def test_redirect_message_is_marked() -> None:
    assert (is_redirect(redirect_message("Only check the first file.")), is_redirect(HumanMessage("hi"))) \
        == (True, False)


def test_check_in_asks_until_the_call_fits_and_ends_at_a_redirect() -> None:
    answers = iter([{"decisions": [{"type": "edit", "edited_action": {
                        "name": BUDGET_TITLE, "args": {"tokens": "99"}}}]},
                    {"decisions": [{"type": "edit", "edited_action": {
                        "name": BUDGET_TITLE, "args": {"tokens": 1, "message": "Be brief."}}}]}])

    def rule(extra: int) -> dict[str, str] | None:
        return None if extra >= 200 else {"guard": "limits", "reason": "token_budget"}

    done = check_in(rule, lambda question: next(answers))  # type: ignore[arg-type]
    # the redirect is returned at once (written to the thread before the call is weighed again)
    assert done.added is not None and (done.extra, done.added.content, done.stop) == (100, "Be brief.", None)
    assert check_in(rule, lambda question: None, extra=200).added is None  # fits: nobody asked


def test_failed_rounds_and_the_tool_errors_guard() -> None:
    def failed(i: int) -> list[AIMessage | ToolMessage]:
        return [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]),
                ToolMessage(f"Error: no {i}", tool_call_id=f"c{i}", status="error")]

    messages = [HumanMessage("go", id="h"), *failed(1), *failed(2)]
    ask = failed(3)[0]
    assert isinstance(ask, AIMessage)
    assert failed_rounds(messages, len(messages), "h", limit=5) == 2
    assert tool_errors_guard(ask, messages, len(messages), "h", 2)["reason"] == "tool_errors"  # type: ignore[index]
    assert tool_errors_guard(AIMessage("done"), messages, len(messages), "h", 2) is None


def test_stop_record_is_the_graphs_keys() -> None:  # was middleware/stopping.py's doctest
    update = stop_record(None, guard("limits", "token_budget", limit=10, value=12))
    assert (update["stop_reason"], update["stop_guard"]["limit"]) == ("token_budget", 10)


def test_build_request_sends_the_system_prompt_first() -> None:  # was nodes/model.py's doctest
    settings = LoopSettings.build(ScriptedChatModel(), system_prompt="Be brief.")
    state: Any = {"messages": [HumanMessage("hi", id="h1")], "iteration": 1}
    assert [m.type for m in build_request(state, settings, [])] == ["system", "human"]


def test_the_middleware_package_runs_in_create_agent() -> None:  # was middleware/__init__'s
    agent = create_agent(ScriptedChatModel(script=["hi"]), [], middleware=[LoopDetectionMiddleware()])
    assert agent.invoke({"messages": [("user", "hello")]})["messages"][-1].content == "hi"


def test_the_time_cap_and_budget_pressure_as_guards() -> None:
    """The module's former doctest."""
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(
        token_budget=100, budget_pressure=BudgetPressure(threshold=0.8)))
    assert timeout_guard({"run": {"started_at": 0.0}}, s, now=5.0) is None  # type: ignore[typeddict-item]
    assert budget_pressure_guard({"usage": {"total_tokens": 85},  # type: ignore[typeddict-item]
                                  "run": {"pressure_queued": True}}, s) == {
        "guard": "budget_pressure", "reason": "budget_pressure", "threshold": 0.8, "limit": 100,
        "value": 85}
