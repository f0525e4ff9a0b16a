"""Hooks (order, sync/async, terminate, failures and resume) and custom stream events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import (
    BudgetPressure,
    Hooks,
    Iterations,
    Limits,
    LoopDetection,
    Repeat,
    StopReason,
    create_loop_agent,
)
from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.scripted import ScriptedChatModel, repeat


@tool
def search(q: str) -> str:
    """Search."""
    return f"found {q}"


def two_passes() -> ScriptedChatModel:
    return ScriptedChatModel(script=[[("search", {"q": "a"}), ("search", {"q": "b"})],
                                     "pass one done", [("search", {"q": "c"})], "pass two done"])


def go() -> dict[str, Any]:
    return {"messages": [HumanMessage("work")]}


def recording_hooks(log: list[Any], *, asynchronous: bool) -> Hooks:
    def start(state: Any) -> None:
        log.append(("start", state["iteration"], len(state["messages"])))

    def tool_call(record: Any) -> None:
        log.append(("tool", record["iteration"], record["args"]["q"], sorted(record)))

    def end(record: Any, state: Any) -> None:
        log.append(("end", record["iteration"], state["iteration"]))

    if not asynchronous:
        return Hooks(on_iteration_start=start, on_tool_call=tool_call, on_iteration_end=end)

    async def astart(state: Any) -> None:
        start(state)

    async def atool(record: Any) -> None:
        tool_call(record)

    async def aend(record: Any, state: Any) -> None:
        end(record, state)

    return Hooks(on_iteration_start=astart, on_tool_call=atool, on_iteration_end=aend)


KEYS = ["args", "duration_s", "iteration", "name", "status"]
EXPECTED = [("start", 1, 1), ("tool", 1, "a", KEYS), ("tool", 1, "b", KEYS), ("end", 1, 1),
            ("start", 2, 6), ("tool", 2, "c", KEYS), ("end", 2, 2)]


@pytest.mark.parametrize(("use_async", "async_hooks"),
                         [(False, False), (False, True), (True, False), (True, True)])
async def test_hook_order_sync_and_async(
    scripted: list[ScriptedChatModel], use_async: bool, async_hooks: bool
) -> None:
    model = two_passes()
    scripted.append(model)
    log: list[Any] = []
    agent = create_loop_agent(model, [search],
                              iterations=Iterations(should_continue=lambda s: s["iteration"] < 2),
                              hooks=recording_hooks(log, asynchronous=async_hooks))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.COMPLETED
    # pass 2's start hook sees the whole transcript up to its continuation message
    assert log == EXPECTED


def test_on_iteration_end_true_terminates(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="still going")
    scripted.append(model)
    seen: list[dict[str, Any]] = []

    def end(record: dict[str, Any], _state: Any) -> bool:
        seen.append(record)
        return record["iteration"] == 2

    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True),
                              hooks=Hooks(on_iteration_end=end))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.TERMINATED
    assert model.calls == 2
    assert state["iterations"][-1]["guard"] == {"guard": "hooks", "reason": "terminated"}
    assert [r["guard"] for r in seen] == [None, None]  # the hook sees the record before it decides


def test_on_iteration_end_true_does_not_override_a_stop(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=["answer"])
    scripted.append(model)
    agent = create_loop_agent(model, hooks=Hooks(on_iteration_end=lambda r, s: True))
    assert agent.invoke(go())["stop_reason"] == StopReason.COMPLETED


def test_on_tool_call_sees_refused_calls(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[("search", {"q": "a"}), ("nope", {"q": "b"})], "ok"])
    scripted.append(model)
    records: list[dict[str, Any]] = []
    agent = create_loop_agent(model, [search], hooks=Hooks(on_tool_call=records.append))
    agent.invoke(go())
    assert [(r["name"], r["status"]) for r in records] == [("search", "success"), ("nope", "refused")]
    assert all(sorted(r) == KEYS for r in records)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("which", ["on_iteration_start", "on_tool_call", "on_iteration_end"])
async def test_raising_hook_propagates_and_thread_resumes(
    scripted: list[ScriptedChatModel], which: str, use_async: bool
) -> None:
    model = two_passes()
    scripted.append(model)
    broken = {"on": True}
    calls: list[str] = []

    def hook(*args: Any) -> None:
        calls.append(which)
        if broken["on"] and (which != "on_iteration_start" or args[0]["iteration"] == 2):
            raise KeyError("boom")

    agent = create_loop_agent(model, [search],
                              iterations=Iterations(should_continue=lambda s: s["iteration"] < 2),
                              hooks=Hooks(**{which: hook}), checkpointer=InMemorySaver())
    cfg: Any = {"configurable": {"thread_id": f"t-{which}"}}
    with pytest.raises(CallbackError, match=f"hooks.{which} raised KeyError") as info:
        if use_async:
            await agent.ainvoke(go(), cfg)
        else:
            agent.invoke(go(), cfg)
    assert isinstance(info.value.__cause__, KeyError)
    broken["on"] = False
    state = await agent.ainvoke(None, cfg) if use_async else agent.invoke(None, cfg)
    assert state["stop_reason"] == StopReason.COMPLETED
    assert [r["iteration"] for r in state["iterations"]] == [1, 2]
    assert [m.content for m in state["messages"] if m.type == "ai" and m.content] == [
        "pass one done", "pass two done"]
    assert model.calls == 4  # no model call was repeated by the resume


def events_of(agent: Any, inp: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [e for e in agent.stream(inp, stream_mode="custom", **kwargs)]


def test_custom_stream_events_mirror_the_hooks(scripted: list[ScriptedChatModel]) -> None:
    model = two_passes()
    scripted.append(model)
    agent = create_loop_agent(model, [search],
                              iterations=Iterations(should_continue=lambda s: s["iteration"] < 2))
    events = events_of(agent, go())
    assert [e["event"] for e in events] == [
        "iteration_start", "tool_call", "tool_call", "iteration_end",
        "iteration_start", "tool_call", "iteration_end", "stop"]
    assert json.loads(json.dumps(events)) == events  # JSON-friendly payloads
    assert events[1] == {"event": "tool_call", "name": "search", "args": {"q": "a"},
                         "status": "success", "duration_s": events[1]["duration_s"],
                         "iteration": 1}
    assert events[3]["record"]["iteration"] == 1
    assert events[-1] == {"event": "stop", "reason": "completed", "iteration": 2, "guard": None}


def test_loop_warning_budget_pressure_and_stop_events(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=repeat([("search", {"q": "same"})]),
                              no_tools_reply="giving up")
    scripted.append(model)
    agent = create_loop_agent(model, [search],
                              limits=Limits(token_budget=10**6,
                                            budget_pressure=BudgetPressure(threshold=0.00001)),
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)))
    events = events_of(agent, go())
    names = [e["event"] for e in events]
    assert names.count("stop") == 1 and names[-1] == "stop"
    assert names.count("budget_pressure") == 1
    assert names.count("loop_warning") == 1
    stop = events[-1]
    assert (stop["reason"], stop["guard"]["guard"]) == ("loop_detected", "loop_detector")
    pressure = events[names.index("budget_pressure")]
    assert pressure["limit"] == 10**6 and pressure["usage"]["total_tokens"] > 0
