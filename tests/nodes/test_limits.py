"""Budgets and the time cap: token_budget, budget-pressure wrap-up, timeout."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from langgraph_loop import (
    BudgetPressure,
    Iterations,
    Limits,
    StopReason,
    TokenBudgetMiddleware,
    create_loop_agent,
)
from langgraph_loop.core import state as nodes_records
from langgraph_loop.core.messages import is_notice, is_redirect
from langgraph_loop.core.prompts import BUDGET_PRESSURE as DEFAULT_PRESSURE_INSTRUCTION
from langgraph_loop.engine import limits as nodes_limits
from langgraph_loop.engine.decision import decide, limit_stop
from langgraph_loop.engine.limits import (
    budget_pressure_guard,
    pressure_seen,
    run_budget,
    timeout_guard,
)
from langgraph_loop.nodes import prepare as nodes_prepare
from langgraph_loop.nodes.view import policy_of, run_view
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens, asked_numbers, edit, reject


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

def check_limits(state: Any, settings: Any) -> Any:
    """The limit a text reply hits in the graph's state ``state`` (``decide``'s first check)."""
    return limit_stop(AIMessage("done"), [], run_view(state, settings), policy_of(settings))


def pressure_due(state: Any, settings: Any) -> bool:
    """Does ``decide`` queue the budget-pressure notice on a text reply in ``state``?"""
    decision = decide(AIMessage("done"), [], run_view(state, settings), policy_of(settings))
    return decision is not None and decision.pressure

def test_pressure_due_once_per_run_at_threshold() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(
        token_budget=1000, budget_pressure=BudgetPressure(threshold=0.5)))
    assert not pressure_due({"usage": {"total_tokens": 499}, "run": {}}, s)
    assert pressure_due({"usage": {"total_tokens": 500}, "run": {}}, s)
    assert not pressure_due({"usage": {"total_tokens": 900}, "run": {"pressure_queued": True}}, s)
    no_budget = LoopSettings.build(ScriptedChatModel(), limits=Limits(budget_pressure=BudgetPressure()))
    assert not pressure_due({"usage": {"total_tokens": 10**9}, "run": {}}, no_budget)


def test_pressure_seen_only_after_delivery() -> None:
    queued = {"run": {"pressure_queued": True},
              "loop_notices": [{"run": "r", "key": "budget_pressure", "text": "t",
                                   "source": "budget_pressure"}]}
    assert not pressure_seen(queued)  # type: ignore[arg-type]
    assert pressure_seen({"run": {"pressure_queued": True}, "loop_notices": []})
    assert not pressure_seen({"run": {"pressure_queued": False}, "loop_notices": []})


def test_budget_pressure_guard_needs_budget_and_config() -> None:
    from langgraph_loop.core.settings import LoopSettings
    state: Any = {"run": {"pressure_queued": True}, "usage": {"total_tokens": 850}}
    on = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000,
                                                               budget_pressure=BudgetPressure()))
    assert budget_pressure_guard(state, on) == {
        "guard": "budget_pressure", "reason": "budget_pressure", "threshold": 0.8,
        "limit": 1000, "value": 850}
    off = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000))
    assert budget_pressure_guard(state, off) is None


def test_token_budget_is_exceeded_strictly() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    assert check_limits({"usage": {"total_tokens": 100}}, s) is None
    guard = check_limits({"usage": {"total_tokens": 101}}, s)
    assert guard == {"guard": "limits", "reason": "token_budget", "limit": 100, "value": 101}


def test_timeout_guard_uses_run_start() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(max_duration_s=30))
    state: Any = {"run": {"started_at": 1000.0}}
    assert timeout_guard(state, s, now=1029.9) is None
    assert timeout_guard(state, s, now=1030.0)["reason"] == "timeout"  # type: ignore[index]


# --- token_budget -------------------------------------------------------------------

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
        ai(calls=[("search", {"q": "b"})], total=400),   # 900 >= 0.2 * 4000: notice queued
        ai("wrapping up: here is what I found", total=90),
    ])
    scripted.append(model)
    agent = create_loop_agent(model, [search], iterations=Iterations(should_continue=keep_going),
                              limits=Limits(token_budget=4000, budget_pressure=BudgetPressure(threshold=0.2)))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 3
    assert shape(model.requests[2])[-3:] == [("ai", None), ("tool", None), ("human", "budget_notice")]
    assert model.requests[2][-1].content == DEFAULT_PRESSURE_INSTRUCTION
    assert "budget_notice" not in [m.name for m in model.requests[1]]
    # the notice is persisted in the transcript, exactly where the model saw it
    assert [m.name for m in state["messages"] if m.type == "human"] == [None, "budget_notice"]
    assert state["loop_notices"] == []
    assert len(state["iterations"]) == 1
    assert state["iterations"][0]["guard"] == {
        "guard": "budget_pressure", "reason": "budget_pressure", "threshold": 0.2,
        "limit": 4000, "value": 990}


def test_pressure_at_the_last_call_of_a_pass_makes_the_next_pass_the_final_one(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[
        ai(calls=[("search", {"q": "a"})], total=300),
        ai("first findings", total=400),             # 700 >= 0.175 * 4000 at the pass's end
        ai("final summary", total=150),
        ai("never sent", total=10),
    ])
    scripted.append(model)
    instruction = "Budget nearly spent: finish now."
    agent = create_loop_agent(model, [search], iterations=Iterations(should_continue=keep_going),
                              limits=Limits(token_budget=4000, budget_pressure=BudgetPressure(threshold=0.175,
                                                             instruction=instruction)))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 3
    assert shape(model.requests[2])[-3:] == [("ai", None), ("human", "loop_continue"),
                                              ("human", "budget_notice")]
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
    agent = create_loop_agent(model, [search],
                              limits=Limits(token_budget=4000, budget_pressure=BudgetPressure(threshold=0.2)))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.COMPLETED
    assert model.requests[1][-1].name == "budget_notice"
    assert state["iterations"][0]["guard"] is None


def test_pressure_then_budget_exceeded_in_the_final_pass_is_token_budget(
    scripted: list[ScriptedChatModel],
) -> None:
    """The model ignores the notice and overshoots: its call is answered with an error and
    no final answer fits any more (the record says so)."""
    model = ScriptedChatModel(script=[
        ai("part one", total=850),
        ai(calls=[("search", {"q": "more"})], total=3300),   # ignores the notice: 4150 > 4000
    ], no_tools_reply=ai("stopping here", total=30))
    scripted.append(model)
    agent = create_loop_agent(model, [search], iterations=Iterations(should_continue=keep_going),
                              limits=Limits(token_budget=4000, budget_pressure=BudgetPressure(threshold=0.2)))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.request_tools == [["search"], ["search"]]
    assert model.requests[1][-1].name == "budget_notice"
    assert [(m.type, m.name if m.type == "human" else None) for m in state["messages"][-4:]] == [
        ("human", "budget_notice"), ("ai", None), ("tool", None), ("ai", None)]
    assert state["messages"][-2].status == "error"
    assert state["messages"][-1].content.startswith("(No answer: the run stopped (token_budget)")
    assert state["iterations"][-1]["guard"]["final_answer"].startswith("skipped")


def test_pressure_is_queued_once_and_dropped_for_the_next_run(
    scripted: list[ScriptedChatModel],
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(script=[ai("a", total=900), ai("b", total=50),
                                      ai("second run", total=10), ai("2nd pass", total=10)])
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: s["iteration"] < 2),
                              limits=Limits(token_budget=5000,
                                            budget_pressure=BudgetPressure(threshold=0.18)),
                              checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    first = agent.invoke(go(), cfg)
    assert first["stop_reason"] == StopReason.COMPLETED  # the predicate stopped pass 2
    assert [m.name for m in model.requests[1]].count("budget_notice") == 1
    second = agent.invoke(go("next question"), cfg)
    assert second["stop_reason"] == StopReason.COMPLETED
    assert model.requests[2][-1].content == "next question"
    # the thread keeps run 1's delivered notice; run 2 gets no new one
    assert [m.name for m in model.requests[3]].count("budget_notice") == 1
    assert second["loop_notices"] == []


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
    assert model.requests[2][-1].name == "stop_notice"
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
    agent = create_loop_agent(model, iterations=Iterations(should_continue=slow_predicate),
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
    assert final_request_tail == [("tool", None), ("human", "budget_notice"), ("ai", None)]
    assert state["messages"][-1].content.startswith("Final report")
    assert "stop_reason=budget_pressure" in out.getvalue()


# --- token_budget is a hard cap (the scripted model's own accounting) ----------------

LONG_ANSWER = "word " * 400  # ~505 output tokens unless max_tokens cuts it


def _numbered_calls(messages: list[BaseMessage]) -> Any:
    """A runaway that searches for something new each time (no loop to detect)."""
    return [("search", {"q": f"q{len(messages)}"})]


def _same_call(_messages: list[BaseMessage]) -> Any:
    return [("search", {"q": "same"})]


def _wrap_up_on_notice(messages: list[BaseMessage]) -> Any:
    if is_notice(messages[-1]):
        return "Wrapping up with what I found."
    return _numbered_calls(messages)


def _stall_text(messages: list[BaseMessage]) -> Any:
    return "the same answer again"


STOP_PATHS: dict[str, tuple[Any, dict[str, Any], int]] = {
    # name: (model default, create_loop_agent options, token budget)
    "token_budget": (_numbered_calls, {"loop_detection": None}, 600),
    "loop_detected": (_same_call, {"loop_detection": {"repeat": {"warn_after": 2, "stop_after": 3}}}, 800),
    "max_model_calls": (_numbered_calls, {"iterations": {"max_model_calls": 3}}, 400),
    "max_tool_calls": (_numbered_calls, {"limits": {"max_tool_calls": 2}}, 400),
    "budget_pressure": (_wrap_up_on_notice, {"limits": {"budget_pressure": {"threshold": 0.1}},
                                             "iterations": {"should_continue": keep_going}}, 800),
    "stalled": (_stall_text, {"iterations": {"stall": {"consecutive": 2},
                                             "should_continue": keep_going}}, 600),
    "step_limit": (_numbered_calls, {"loop_detection": None}, 600),
}


@pytest.mark.parametrize("path", sorted(STOP_PATHS))
def test_agent_tokens_never_exceed_the_budget_on_any_stop_path(path: str) -> None:
    """Every stop, the tools-free final answer included, stays within ``token_budget``:
    the final call is bounded by ``max_tokens`` (here it would use ~505 tokens unbound)."""
    default, options, budget = STOP_PATHS[path]
    model = ScriptedChatModel(default=default, no_tools_reply=LONG_ANSWER)
    limits = {**options.pop("limits", {}), "token_budget": budget}
    agent = create_loop_agent(model, [search], limits=limits, **options)
    config: Any = {"recursion_limit": 9} if path == "step_limit" else {}
    state = agent.invoke(go(), config)
    assert state["stop_reason"] == path
    reported = sum((m.usage_metadata or {}).get("total_tokens", 0) for m in state["messages"]
                   if m.type == "ai")
    assert state["usage"]["total_tokens"] == reported <= budget
    if model.request_tools[-1] == []:  # the final answer call was made, and cut to fit
        final = state["messages"][-1]
        assert final.usage_metadata["output_tokens"] < 505
        assert len(str(final.content)) < len(LONG_ANSWER)


def test_timeout_final_answer_fits_the_budget(clock: FakeClock) -> None:
    @tool
    def slow(q: str) -> str:
        """A slow tool."""
        clock.now += 10
        return "slow result"

    model = ScriptedChatModel(default=lambda m: [("slow", {"q": f"q{len(m)}"})],
                              no_tools_reply=LONG_ANSWER)
    agent = create_loop_agent(model, [slow], limits=Limits(max_duration_s=15, token_budget=400))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TIMEOUT and model.request_tools[-1] == []
    assert state["usage"]["total_tokens"] <= 400


@pytest.mark.parametrize("use_async", [False, True])
async def test_the_loop_stops_before_a_round_that_leaves_no_room_for_the_final_answer(
        use_async: bool) -> None:
    model = ScriptedChatModel(default=_numbered_calls, no_tools_reply="Best answer so far.")
    agent = create_loop_agent(model, [search], loop_detection=None,
                              limits=Limits(token_budget=600))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    tools_per_call = model.request_tools
    assert tools_per_call[-1] == [] and all(t == ["search"] for t in tools_per_call[:-1])
    # the stop came before a call, not after an overshoot: every round was answered by
    # the tool, and the final request ends with the stop notice after the last result
    final = model.requests[-1]
    assert shape(final)[-2:] == [("tool", None), ("human", "stop_notice")]
    assert final[-2].status == "success"  # type: ignore[attr-defined]
    assert "token budget" in str(final[-1].content)
    assert state["messages"][-1].content == "Best answer so far."
    guard = state["iterations"][-1]["guard"]
    assert guard["reason"] == "token_budget" and "final_answer" not in guard
    assert state["usage"]["total_tokens"] <= 600


def test_no_room_for_the_final_answer_ends_without_it_and_says_so(
    scripted: list[ScriptedChatModel],
) -> None:
    """One reply overshoots the budget (a regular call is not bounded): its calls get error
    ToolMessages and there is no final call: the loop's own last message says why (issue 43.12)."""
    model = ScriptedChatModel(script=[ai(calls=[("search", {"q": "a"})], total=100),
                                      ai(calls=[("search", {"q": "b"})], total=950)],
                              no_tools_reply="never sent")
    scripted.append(model)
    agent = create_loop_agent(model, [search], limits=Limits(token_budget=1000))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.request_tools == [["search"], ["search"]]
    last, said = state["messages"][-2:]
    assert last.type == "tool" and last.status == "error" and "token budget" in last.content
    assert said.type == "ai" and not said.tool_calls and said.content == (
        "(No answer: the run stopped (token_budget) with about 0 tokens of its token budget left, "
        "fewer than the 50 an answer needs, so the model was not asked for one. A larger "
        "token_budget leaves room for it.)")
    guard = state["iterations"][-1]["guard"]
    assert guard["final_answer"].startswith("skipped: the token budget leaves about 0 tokens")
    assert state["loop_notices"] == []


# --- checking in with a person at the budget (Limits.budget_check_in) -----------------------

PAGE = "result text " * 60


@tool
def research(query: str) -> str:
    """Search the web (a long page)."""
    return f"{query}: {PAGE}"


def researcher(rounds: int = 100, final: str = "What I found so far.") -> ScriptedChatModel:
    """Researches until ``rounds`` results are in (answers a person's "wrap up" at once)."""
    def script(messages: list[BaseMessage]) -> Any:
        if "wrap up" in str(messages[-1].content):
            return "Summary of the first results."
        done = sum(m.type == "tool" for m in messages)
        return [("research", {"query": f"q{done}"})] if done < rounds else "All found."
    return ScriptedChatModel(default=script, no_tools_reply=final)


def shape_of(request: list[BaseMessage]) -> list[tuple[str, str]]:
    """A request as (type or tag, text); tool calls by name and arguments."""
    out = []
    for m in request:
        kind = "notice" if is_notice(m) else "redirect" if is_redirect(m) else m.type
        calls = getattr(m, "tool_calls", None)
        out.append((kind, repr([(c["name"], c["args"]) for c in calls]) if calls else str(m.content)))
    return out


def checking(model: ScriptedChatModel, saver: Any, budget: int = 3000) -> Any:
    return create_loop_agent(model, [research], checkpointer=saver,
                             limits=Limits(token_budget=budget, budget_check_in=True))


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def test_budget_check_in_is_validated() -> None:
    with pytest.raises(ValueError, match="budget_check_in needs a token_budget"):
        Limits(budget_check_in=True)
    with pytest.raises(ValueError, match="budget_check_in"):
        Limits(token_budget=100, budget_check_in="yes")  # type: ignore[arg-type]


def test_the_graph_asks_what_the_middleware_asks(scripted: list[ScriptedChatModel],
                                                 tmp_path: Path) -> None:
    graph_model, agent_model = researcher(), researcher()
    scripted += [graph_model, agent_model]
    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:
        graph = checking(graph_model, saver).invoke(go(), thread())
        agent = create_agent(agent_model, [research], checkpointer=saver, middleware=[
            TokenBudgetMiddleware(token_budget=3000, budget_check_in=True)]).invoke(go(), thread())
    (graph_asks,), (agent_asks,) = graph["__interrupt__"], agent["__interrupt__"]
    assert graph_asks.value == agent_asks.value
    assert graph_asks.value["action_requests"][0]["name"] == "Token budget reached: add more?"
    assert asked_numbers(graph_asks.value)[1] == 3000
    assert [shape_of(r) for r in graph_model.requests] == [shape_of(r) for r in agent_model.requests]
    assert graph["stop_reason"] is None  # paused


def test_an_extension_goes_on_in_a_new_graph_and_no_call_is_made_twice(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second, straight = researcher(12), researcher(12), researcher(12)
    scripted += [first, second, straight]
    with SqliteSaver.from_conn_string(str(tmp_path / "e.db")) as saver:
        config = thread()
        assert checking(first, saver).invoke(go(), config)["__interrupt__"]
        done = checking(second, saver).invoke(
            Command(resume=add_tokens("20000")), config)  # Agent Chat UI sends an edit as text
    create_loop_agent(straight, [research]).invoke(go())
    assert done["stop_reason"] == StopReason.COMPLETED
    assert done["messages"][-1].content == "All found."
    assert [shape_of(r) for r in first.requests + second.requests] == [
        shape_of(r) for r in straight.requests]
    assert done["usage"]["total_tokens"] <= 23_000


async def test_a_stop_ends_with_a_bounded_final_answer_async(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = researcher(), researcher(final="What I found so far. " * 500)
    scripted += [first, second]
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        config = thread()
        paused = await checking(first, saver).ainvoke(go(), config)
        spent = asked_numbers(paused["__interrupt__"][0].value)[0]
        done = await checking(second, saver).ainvoke(Command(resume=reject("Enough.")), config)
    assert done["stop_reason"] == StopReason.TOKEN_BUDGET
    guard = done["iterations"][-1]["guard"]
    assert guard["human"] == {"action": "stop", "message": "Enough."} and guard["value"] == spent
    assert str(second.requests[0][-1].content).endswith("They said: Enough.")
    assert len(second.requests) == 1 and second.request_tools == [[]]
    assert shape_of(second.requests[0])[-1][0] == "notice"
    assert done["usage"]["total_tokens"] <= 3000  # the answer was cut to the room left
    assert done["messages"][-1].tool_calls == []


def test_a_redirect_with_tokens_reaches_the_model_after_the_tool_results(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = researcher(), researcher()
    scripted += [first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "d.db")) as saver:
        config = thread()
        checking(first, saver).invoke(go(), config)
        done = checking(second, saver).invoke(
            Command(resume=add_tokens(2000, "Please wrap up now.")), config)
    assert done["stop_reason"] == StopReason.COMPLETED
    assert done["messages"][-1].content == "Summary of the first results."
    (sent,) = second.requests
    assert [k for k, _ in shape_of(sent)][-3:] == ["ai", "tool", "redirect"]
    assert [k for k, _ in shape_of(done["messages"])][-3:] == ["tool", "redirect", "ai"]
    assert done["iteration"] == 1  # the same run, the same pass


def test_a_redirect_with_too_few_tokens_asks_again_showing_the_persons_message(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    """Issue 43.12/43.3: while the budget still does not allow a call, the paused thread shows
    the person's redirect (written to the thread before the call is weighed again); approving
    then sends it once."""
    first, second, third = researcher(), researcher(), researcher()
    scripted += [first, second, third]
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        config = thread()
        checking(first, saver).invoke(go(), config)
        checking(second, saver).invoke(Command(resume=add_tokens(1, "Please wrap up now.")), config)
        paused = checking(second, saver).get_state(config)
        assert paused.interrupts  # asked again
        assert [m.content for m in paused.values["messages"] if is_redirect(m)] == ["Please wrap up now."]
        assert second.requests == []  # still no call
        done = checking(third, saver).invoke(Command(resume={"decisions": [{"type": "approve"}]}),
                                             config)
    (sent,) = third.requests
    assert [k for k, _ in shape_of(sent)][-3:] == ["ai", "tool", "redirect"]
    assert [m.content for m in done["messages"] if is_redirect(m)] == ["Please wrap up now."]


def test_a_wrong_answer_leaves_the_graph_paused_for_a_valid_one(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    first, second = researcher(8), researcher(8)
    scripted += [first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
        config = thread()
        checking(first, saver).invoke(go(), config)
        graph = checking(second, saver)
        before = graph.get_state(config)
        for wrong in ({"action": "extend", "tokens": -1}, {"action": "redirect"},
                      {"action": "stop", "tokens": 5}, "more", {"decisions": []},
                      add_tokens("lots"), add_tokens(0), edit("Token budget reached: add more?")):
            with pytest.raises(ValueError, match="token budget"):
                graph.invoke(Command(resume=wrong), config)
            after = graph.get_state(config)
            assert after.next == before.next and after.values == before.values
            assert len(after.interrupts) == 1
        assert second.requests == []
        done = graph.invoke(Command(resume=add_tokens("10000")), config)  # a UI sends text
    assert done["stop_reason"] == StopReason.COMPLETED and done["messages"][-1].content == "All found."


def test_check_in_without_a_checkpointer_stops_at_the_budget(
        scripted: list[ScriptedChatModel]) -> None:
    model = researcher()
    scripted.append(model)
    state = create_loop_agent(model, [research], limits=Limits(
        token_budget=3000, budget_check_in=True)).invoke(go())
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET and model.request_tools[-1] == []


def test_run_budget_adds_what_a_person_granted() -> None:
    from langgraph_loop.core.settings import LoopSettings
    s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=1000))
    over: Any = {"usage": {"total_tokens": 1200}, "run": {}}
    assert check_limits(over, s)["reason"] == "token_budget"  # type: ignore[index]
    assert check_limits({**over, "run": {"budget_extra": 500}}, s) is None
    assert run_budget({"run": {"budget_extra": 500}}, s) == 1500


def test_check_in_applies_answers_in_order_until_the_call_fits_or_a_stop() -> None:
    from langgraph_loop.engine.limits import check_in
    asked: list[Any] = []

    def person(*answers: Any) -> Any:
        replies = iter(answers)
        return lambda question: asked.append(question) or next(replies)

    def fits_at(tokens: int) -> Any:
        return lambda extra: None if extra >= tokens else {
            "guard": "limits", "reason": "token_budget", "limit": 100 + extra, "value": 90,
            "estimate": 50}

    done = check_in(fits_at(300), person(add_tokens(100), add_tokens(1, "Be brief.")))
    # a redirect ends the check-in at once: it is written to the thread before the call is
    # weighed again (with the tokens granted so far)
    assert done.extra == 101 and done.added is not None and done.added.content == "Be brief."
    assert done.stop is None
    # each question shows what the answers so far changed
    assert [asked_numbers(q)[1:] for q in asked] == [(100, 50), (200, 50)]
    assert check_in(fits_at(300), person(add_tokens("199")), extra=101).extra == 300
    stopped = check_in(fits_at(300), person(add_tokens(10), reject()))
    assert stopped.extra == 10 and stopped.stop is not None
    assert stopped.stop["human"] == {"action": "stop"} and stopped.stop["limit"] == 110
    assert check_in(fits_at(0), person()).stop is None  # fits: nobody is asked


@pytest.mark.parametrize("wrong", [None, 5, "more", {"action": "extend"},
                                   {"action": "extend", "tokens": True},
                                   {"action": "extend", "tokens": "500"},
                                   {"action": "extend", "tokens": 5, "message": "x"},
                                   {"action": "redirect", "message": ""},
                                   {"action": "stop", "tokens": 1}, {"action": "stop", "why": 1}])
def test_a_wrong_budget_answer_is_refused(wrong: Any) -> None:
    from langgraph_loop.engine.limits import parse_budget_answer
    with pytest.raises(ValueError, match=r"token budget: .* is not an answer 0.4 takes \(0.3's "
                                         r"answer shapes were removed\): answer with LangChain's "
                                         r"human-in-the-loop decisions, \{'decisions'"):
        parse_budget_answer(wrong)


@pytest.mark.parametrize("tokens", [5000, "5000", " 5,000 ", "5_000"])
def test_the_check_in_takes_tokens_as_a_number_or_its_text(tokens: Any) -> None:
    from langgraph_loop.engine.limits import parse_budget_answer
    assert parse_budget_answer(add_tokens(tokens)).tokens == 5000


def test_a_budget_too_small_for_the_first_call_ends_on_an_assistant_message_saying_why() -> None:
    """Issue 43.12: the README's ``messages[-1]`` is an answer, not the user's own question."""
    model = ScriptedChatModel(script=[], no_tools_reply="never sent")
    state = create_loop_agent(model, limits=Limits(token_budget=20)).invoke(
        {"messages": [HumanMessage("What is the capital of France? Please explain.")]})
    assert state["stop_reason"] == StopReason.TOKEN_BUDGET and model.calls == 0
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert state["messages"][-1].content.startswith(
        "(No answer: the run stopped (token_budget) with about 0 tokens of its token budget left")


def test_the_loops_own_no_answer_reply_is_tagged_and_spends_nothing_on_a_thread_budget() -> None:
    """The reply the loop writes when no answer fits is no model's: tagged, zero usage, so a
    thread-scoped budget does not count it as spend on the next message."""
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_loop.engine.limits import NO_ANSWER_KIND, spent_tokens
    model = ScriptedChatModel(script=[], no_tools_reply="never sent")
    agent = create_loop_agent(model, limits=Limits(token_budget=20, budget_scope="thread"),
                              checkpointer=InMemorySaver())
    state = agent.invoke({"messages": [HumanMessage("What is the capital of France? Please explain.")]},
                         {"configurable": {"thread_id": "t"}})
    reply = state["messages"][-1]
    assert reply.additional_kwargs["langgraph_loop"]["kind"] == NO_ANSWER_KIND
    assert spent_tokens(state["messages"]) == 0 and state["usage"]["total_tokens"] == 0


def test_a_run_after_a_no_answer_stop_still_counts_the_threads_tool_output() -> None:
    """Found by the fault fuzz test: the loop's own no-answer reply (zero usage) was taken as
    the newest model report, so the next run's estimate left out the 1,000-character result
    before it and a 357-token call went out under a 300-token run budget."""
    from langgraph.checkpoint.memory import InMemorySaver

    @tool
    def fetch() -> str:
        """Fetch the report."""
        return "x" * 1000

    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[
        {"name": "fetch", "args": {}, "id": "c1", "type": "tool_call"}])], default="final answer")
    agent = create_loop_agent(model, [fetch], checkpointer=InMemorySaver(),
                              limits=Limits(token_budget=300))
    config: Any = {"configurable": {"thread_id": "t"}}
    first = agent.invoke({"messages": [HumanMessage("Work on it.")]}, config)
    assert first["stop_reason"] == StopReason.TOKEN_BUDGET and model.calls == 1
    second = agent.invoke({"messages": [HumanMessage("Work on it.")]}, config)
    assert second["stop_reason"] == StopReason.TOKEN_BUDGET
    assert model.calls == 1, "the request holding the 1,000-character result does not fit 300 tokens"
    assert second["usage"]["total_tokens"] == 0
    assert second["messages"][-1].content.startswith("(No answer: the run stopped (token_budget)")
