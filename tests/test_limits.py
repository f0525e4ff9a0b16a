"""Budgets and the time cap: token_budget, budget-pressure wrap-up, timeout."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_loop import BudgetPressure, Limits, StopReason, create_loop_agent
from langgraph_loop.core.config import DEFAULT_PRESSURE_INSTRUCTION
from langgraph_loop.nodes import limits as nodes_limits
from langgraph_loop.nodes import passes as nodes_records
from langgraph_loop.nodes import prepare as nodes_prepare
from langgraph_loop.nodes.budget_pressure import budget_pressure_guard, pressure_due, pressure_seen
from langgraph_loop.nodes.limits import check_limits, timeout_guard
from langgraph_loop.scripted import ScriptedChatModel


@tool
def search(q: str) -> str:
    """Search the web."""
    return f"result for {q}"


def ai(text: str = "", calls: list[tuple[str, dict[str, Any]]] | None = None,
       total: int = 100) -> AIMessage:
    """A reply with fixed usage (``total`` tokens, split 80/20)."""
    tool_calls = [{"name": n, "args": a, "id": f"c{i}-{total}-{n}", "type": "tool_call"}
                  for i, (n, a) in enumerate(calls or [])]
    inp = total * 8 // 10
    return AIMessage(text, tool_calls=tool_calls,
                     usage_metadata={"input_tokens": inp, "output_tokens": total - inp,
                                     "total_tokens": total})


def shape(request: list[BaseMessage]) -> list[tuple[str, str | None]]:
    return [(m.type, m.name if m.type == "human" else None) for m in request]


def go(text: str = "research this") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def keep_going(_state: Any) -> bool:
    return True


# --- pure decisions -----------------------------------------------------------------

def test_pressure_due_once_per_run_at_threshold() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000),
                           budget_pressure=BudgetPressure(threshold=0.5))
    assert not pressure_due({"usage": {"total_tokens": 499}, "run": {}}, s)
    assert pressure_due({"usage": {"total_tokens": 500}, "run": {}}, s)
    assert not pressure_due({"usage": {"total_tokens": 900}, "run": {"pressure_queued": True}}, s)
    no_budget = LoopSettings.build(ScriptedChatModel(), budget_pressure=BudgetPressure())
    assert not pressure_due({"usage": {"total_tokens": 10**9}, "run": {}}, no_budget)


def test_pressure_seen_only_after_delivery() -> None:
    queued = {"run": {"pressure_queued": True},
              "pending_notices": [{"run": "r", "key": "budget_pressure", "text": "t",
                                   "source": "budget_pressure"}]}
    assert not pressure_seen(queued)  # type: ignore[arg-type]
    assert pressure_seen({"run": {"pressure_queued": True}, "pending_notices": []})
    assert not pressure_seen({"run": {"pressure_queued": False}, "pending_notices": []})


def test_budget_pressure_guard_needs_budget_and_config() -> None:
    from langgraph_loop.core.settings import LoopSettings
    state: Any = {"run": {"pressure_queued": True}, "usage": {"total_tokens": 850}}
    on = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000),
                            budget_pressure=BudgetPressure())
    assert budget_pressure_guard(state, on) == {
        "guard": "budget_pressure", "reason": "budget_pressure", "threshold": 0.8,
        "limit": 1000, "value": 850}
    off = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000))
    assert budget_pressure_guard(state, off) is None


def test_token_budget_is_exceeded_strictly() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    assert check_limits({"usage": {"total_tokens": 100}}, s, has_calls=False) is None
    guard = check_limits({"usage": {"total_tokens": 101}}, s, has_calls=False)
    assert guard == {"guard": "limits", "reason": "token_budget", "limit": 100, "value": 101}


def test_timeout_guard_uses_run_start() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(max_duration_s=30))
    state: Any = {"run": {"started_at": 1000.0}}
    assert timeout_guard(state, s, now=1029.9) is None
    assert timeout_guard(state, s, now=1030.0)["reason"] == "timeout"  # type: ignore[index]


# --- token_budget -------------------------------------------------------------------

@pytest.mark.parametrize("use_async", [False, True])
async def test_token_budget_exceeded_mid_pass_answers_calls_then_final_answer(
    scripted: list[ScriptedChatModel], use_async: bool
) -> None:
    model = ScriptedChatModel(script=[ai(calls=[("search", {"q": "a"})], total=300),
                                      ai(calls=[("search", {"q": "b"}), ("search", {"q": "c"})],
                                         total=800)],
                              no_tools_reply=ai("best answer so far", total=50))
    scripted.append(model)
    agent = create_loop_agent(model, [search], limits=Limits(token_budget=1000))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.calls == 3
    assert model.request_tools == [["search"], ["search"], []]
    final = model.requests[2]
    assert shape(final) == [("human", None), ("ai", None), ("tool", None), ("ai", None),
                            ("tool", None), ("tool", None), ("human", "loop_warning")]
    assert [m.status for m in final[4:6]] == ["error", "error"]  # type: ignore[attr-defined]
    assert "token budget" in str(final[4].content)
    assert "token budget" in str(final[-1].content)
    assert state["messages"][-1].content == "best answer so far"
    assert state["iterations"][-1]["guard"]["reason"] == "token_budget"
    assert state["usage"]["total_tokens"] == 1150


def test_token_budget_without_final_answer_ends_on_error_tool_messages(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[ai(calls=[("search", {"q": "a"})], total=1200)])
    scripted.append(model)
    agent = create_loop_agent(model, [search],
                              limits=Limits(token_budget=1000, final_answer=False))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.calls == 1
    last = state["messages"][-1]
    assert last.type == "tool" and last.status == "error"


# --- budget pressure ----------------------------------------------------------------

@pytest.mark.parametrize("use_async", [False, True])
async def test_pressure_within_a_pass_is_the_last_message_then_stop(
    scripted: list[ScriptedChatModel], use_async: bool
) -> None:
    model = ScriptedChatModel(script=[
        ai(calls=[("search", {"q": "a"})], total=500),
        ai(calls=[("search", {"q": "b"})], total=400),   # 900 >= 0.8 * 1000: notice queued
        ai("wrapping up: here is what I found", total=90),
    ])
    scripted.append(model)
    agent = create_loop_agent(model, [search], should_continue=keep_going,
                              limits=Limits(token_budget=1000),
                              budget_pressure=BudgetPressure(threshold=0.8))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 3
    assert shape(model.requests[2])[-3:] == [("ai", None), ("tool", None), ("human", "loop_warning")]
    assert model.requests[2][-1].content == DEFAULT_PRESSURE_INSTRUCTION
    assert "loop_warning" not in [m.name for m in model.requests[1]]
    # the notice is persisted in the transcript, exactly where the model saw it
    assert [m.name for m in state["messages"] if m.type == "human"] == [None, "loop_warning"]
    assert state["pending_notices"] == []
    assert len(state["iterations"]) == 1
    assert state["iterations"][0]["guard"] == {
        "guard": "budget_pressure", "reason": "budget_pressure", "threshold": 0.8,
        "limit": 1000, "value": 990}


def test_pressure_at_the_last_call_of_a_pass_makes_the_next_pass_the_final_one(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[
        ai(calls=[("search", {"q": "a"})], total=300),
        ai("first findings", total=400),             # 700 >= 0.6 * 1000 at the pass's end
        ai("final summary", total=150),
        ai("never sent", total=10),
    ])
    scripted.append(model)
    instruction = "Budget nearly spent: finish now."
    agent = create_loop_agent(model, [search], should_continue=keep_going,
                              limits=Limits(token_budget=1000),
                              budget_pressure=BudgetPressure(threshold=0.6,
                                                             instruction=instruction))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 3
    assert shape(model.requests[2])[-3:] == [("ai", None), ("human", "loop_continue"),
                                              ("human", "loop_warning")]
    assert model.requests[2][-1].content == instruction
    assert state["iterations"][0]["guard"] is None
    assert state["iterations"][1]["guard"]["reason"] == "budget_pressure"
    assert state["messages"][-1].content == "final summary"


def test_pressure_pass_that_completes_reports_completed(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[
        ai(calls=[("search", {"q": "a"})], total=900),
        ai("done, all answered", total=50),
    ])
    scripted.append(model)
    agent = create_loop_agent(model, [search], limits=Limits(token_budget=1000),
                              budget_pressure=BudgetPressure())
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.COMPLETED
    assert model.requests[1][-1].name == "loop_warning"
    assert state["iterations"][0]["guard"] is None


def test_pressure_then_budget_exceeded_in_the_final_pass_is_token_budget(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[
        ai("part one", total=850),
        ai(calls=[("search", {"q": "more"})], total=200),   # ignores the notice: 1050 > 1000
    ], no_tools_reply=ai("stopping here", total=30))
    scripted.append(model)
    agent = create_loop_agent(model, [search], should_continue=keep_going,
                              limits=Limits(token_budget=1000), budget_pressure=BudgetPressure())
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.request_tools == [["search"], ["search"], []]
    assert model.requests[1][-1].name == "loop_warning"
    assert [(m.type, m.name if m.type == "human" else None) for m in state["messages"][-4:]] == [
        ("ai", None), ("tool", None), ("human", "loop_warning"), ("ai", None)]
    assert state["messages"][-3].status == "error"
    assert state["messages"][-1].content == "stopping here"


def test_pressure_is_queued_once_and_dropped_for_the_next_run(
    scripted: list[ScriptedChatModel],
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(script=[ai("a", total=900), ai("b", total=50),
                                      ai("second run", total=10), ai("2nd pass", total=10)])
    scripted.append(model)
    agent = create_loop_agent(model, should_continue=lambda s: s["iteration"] < 2,
                              limits=Limits(token_budget=1000), budget_pressure=BudgetPressure(),
                              checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    first = agent.invoke(go(), cfg)
    assert first["stop_reason"] == StopReason.COMPLETED  # the predicate stopped pass 2
    assert [m.name for m in model.requests[1]].count("loop_warning") == 1
    second = agent.invoke(go("next question"), cfg)
    assert second["stop_reason"] == StopReason.COMPLETED
    assert model.requests[2][-1].content == "next question"
    # the thread keeps run 1's delivered notice; run 2 gets no new one
    assert [m.name for m in model.requests[3]].count("loop_warning") == 1
    assert second["pending_notices"] == []


# --- time cap -----------------------------------------------------------------------

class FakeClock:
    """Replaces the ``time`` module of the nodes that read the wall clock."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def time(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    for module in (nodes_limits, nodes_prepare, nodes_records):
        monkeypatch.setattr(module, "time", fake)
    return fake


def test_timeout_between_tool_round_and_model_call(
    scripted: list[ScriptedChatModel], clock: FakeClock
) -> None:
    @tool
    def slow(q: str) -> str:
        """A slow tool."""
        clock.now += 10
        return "slow result"

    model = ScriptedChatModel(default=lambda _m: [("slow", {"q": "x"})],
                              no_tools_reply=ai("out of time, partial answer", total=20))
    scripted.append(model)
    agent = create_loop_agent(model, [slow], limits=Limits(max_duration_s=15))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TIMEOUT
    # call 1 -> slow (t=10) -> call 2 -> slow (t=20) -> cap spent: final answer without tools
    assert model.request_tools == [["slow"], ["slow"], []]
    assert model.requests[2][-1].name == "loop_warning"
    assert "time limit" in str(model.requests[2][-1].content)
    assert state["messages"][-1].content == "out of time, partial answer"
    assert state["iterations"][-1]["guard"]["reason"] == "timeout"


def test_timeout_at_a_pass_end_stops_without_another_call(
    scripted: list[ScriptedChatModel], clock: FakeClock
) -> None:
    def slow_predicate(_state: Any) -> bool:
        clock.now += 20
        return True

    model = ScriptedChatModel(script=["first pass", "second pass", "never"])
    scripted.append(model)
    agent = create_loop_agent(model, should_continue=slow_predicate,
                              limits=Limits(max_duration_s=30))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TIMEOUT
    assert model.calls == 2
    assert state["messages"][-1].content == "second pass"
    assert state["iterations"][-1]["guard"] == {"guard": "limits", "reason": "timeout",
                                                 "limit": 30.0, "value": 40.0}


def test_budget_pressure_demo_wraps_up() -> None:
    import io

    from langgraph.checkpoint.memory import InMemorySaver
    from rich.console import Console

    from langgraph_loop.app.demos import all_scenarios

    (scenario,) = [s for s in all_scenarios() if s.key == "budget-pressure"]
    out = io.StringIO()
    state = scenario.run(Console(file=out, width=200), InMemorySaver())
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert state["usage"]["total_tokens"] < 2000
    final_request_tail = [(m.type, m.name if m.type == "human" else None)
                          for m in state["messages"][-3:]]
    assert final_request_tail == [("tool", None), ("human", "loop_warning"), ("ai", None)]
    assert state["messages"][-1].content.startswith("Final report")
    assert "stop_reason=budget_pressure" in out.getvalue()
