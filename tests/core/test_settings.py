"""Per-run overrides through LangGraph's runtime context."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_loop import (
    BudgetPressure,
    Limits,
    LoopDetection,
    StallDetection,
    StopReason,
    create_loop_agent,
)
from langgraph_loop.core.settings import LoopSettings, RunOverrides
from langgraph_loop.scripted import ScriptedChatModel

SETTINGS = LoopSettings.build(ScriptedChatModel(), stall_detection=StallDetection(),
                              budget_pressure=BudgetPressure())

GOOD: dict[str, tuple[str | None, Any]] = {
    "max_iterations": (None, 3),
    "max_model_calls": ("limits", 4),
    "max_tool_calls": ("limits", 2),
    "token_budget": ("limits", 5000),
    "max_duration_s": ("limits", 1.5),
    "max_tool_output_chars": ("limits", 500),
    "warn_after": ("loop_detection", 2),
    "stop_after": ("loop_detection", 6),
    "window": ("loop_detection", 30),
    "no_progress_warn_after": ("loop_detection", 1),
    "no_progress_stop_after": ("loop_detection", 4),
    "consecutive": ("stall_detection", 4),
    "tolerance": ("stall_detection", 0.2),
    "threshold": ("budget_pressure", 0.5),
}


def test_every_override_name_is_covered() -> None:
    assert set(GOOD) == set(RunOverrides.model_fields)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_each_override_reaches_the_settings(name: str) -> None:
    group, value = GOOD[name]
    resolved = SETTINGS.for_run({name: value})
    target = resolved if group is None else getattr(resolved, group)
    assert getattr(target, name) == value
    assert SETTINGS.for_run(None) is SETTINGS  # the graph's own settings are untouched


BAD: list[tuple[dict[str, Any], str]] = [
    ({"max_iterations": 0}, "max_iterations"),
    ({"max_model_calls": -1}, "max_model_calls"),
    ({"max_tool_calls": 0}, "max_tool_calls"),
    ({"token_budget": 0}, "token_budget"),
    ({"max_duration_s": 0}, "max_duration_s"),
    ({"max_tool_output_chars": 10}, "max_tool_output_chars"),
    ({"warn_after": 0}, "warn_after"),
    ({"stop_after": 2, "warn_after": 3}, "stop_after"),
    ({"window": 1}, "window"),
    ({"no_progress_stop_after": 1}, "no_progress_stop_after"),
    ({"consecutive": 1}, "consecutive"),
    ({"tolerance": 1.5}, "tolerance"),
    ({"threshold": 1.0}, "threshold"),
    ({"max_iterations": True}, "max_iterations"),
    ({"max_tool_calls": "2"}, "max_tool_calls"),
    ({"max_model_calls": 2.5}, "max_model_calls"),
    ({"max_itterations": 3}, "max_itterations"),
    ({"tolerance": [0.1]}, "tolerance"),
]


@pytest.mark.parametrize(("context", "field"), BAD)
def test_bad_override_raises_at_run_start_naming_the_field(
    scripted: list[ScriptedChatModel], context: dict[str, Any], field: str
) -> None:
    model = ScriptedChatModel(script=["never"])
    scripted.append(model)
    agent = create_loop_agent(model, stall_detection=StallDetection(),
                              budget_pressure=BudgetPressure())
    with pytest.raises(ValueError, match=field):
        agent.invoke({"messages": [HumanMessage("hi")]}, context=context)
    assert model.calls == 0


def test_override_of_a_disabled_guard_is_an_error() -> None:
    agent = create_loop_agent(ScriptedChatModel(script=["x"]), loop_detection=None)
    with pytest.raises(ValueError, match="loop_detection is disabled"):
        agent.invoke({"messages": [HumanMessage("hi")]}, context={"warn_after": 2})
    with pytest.raises(ValueError, match="stall_detection is disabled"):
        agent.invoke({"messages": [HumanMessage("hi")]}, context={"consecutive": 2})


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return f"page {url}"


def pages() -> ScriptedChatModel:
    counter = iter(range(1, 1000))
    return ScriptedChatModel(default=lambda _m: [("fetch", {"url": f"u{next(counter)}"})],
                             no_tools_reply="summary")


@pytest.mark.parametrize("use_async", [False, True])
async def test_max_tool_calls_override_changes_the_run(
    scripted: list[ScriptedChatModel], use_async: bool
) -> None:
    model = pages()
    scripted.append(model)
    agent = create_loop_agent(model, [fetch], limits=Limits(max_tool_calls=10))
    inp = {"messages": [HumanMessage("read everything")]}
    ctx = {"max_tool_calls": 2}
    state = await agent.ainvoke(inp, context=ctx) if use_async else agent.invoke(inp, context=ctx)
    assert state["stop_reason"] == StopReason.MAX_TOOL_CALLS
    assert [len(c["tool_calls"]) for c in state["iterations"]] == [2]
    assert model.request_tools[-1] == []
    other = pages()
    scripted.append(other)
    again = create_loop_agent(other, [fetch], limits=Limits(max_tool_calls=10)).invoke(inp)
    assert sum(len(r["tool_calls"]) for r in again["iterations"]) == 10


def test_max_iterations_and_max_model_calls_overrides(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="more")
    scripted.append(model)
    agent = create_loop_agent(model, should_continue=lambda s: True, max_iterations=10)
    state = agent.invoke({"messages": [HumanMessage("go")]}, context={"max_iterations": 3})
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS and model.calls == 3
    runaway = pages()
    scripted.append(runaway)
    limited = create_loop_agent(runaway, [fetch])
    state = limited.invoke({"messages": [HumanMessage("go")]}, context={"max_model_calls": 2})
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert runaway.request_tools == [["fetch"], ["fetch"], []]


def test_budget_and_pressure_overrides(scripted: list[ScriptedChatModel]) -> None:
    def ai(text: str, total: int) -> AIMessage:
        return AIMessage(text, usage_metadata={"input_tokens": total, "output_tokens": 0,
                                               "total_tokens": total})

    model = ScriptedChatModel(script=[ai("one", 300), ai("two", 50), ai("three", 50)])
    scripted.append(model)
    agent = create_loop_agent(model, should_continue=lambda s: True, max_iterations=3)
    state = agent.invoke({"messages": [HumanMessage("go")]},
                         context={"token_budget": 3000, "threshold": 0.1})
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 2 and model.requests[1][-1].name == "loop_warning"


def test_stall_and_loop_detection_overrides(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="same answer")
    scripted.append(model)
    agent = create_loop_agent(model, should_continue=lambda s: True,
                              stall_detection=StallDetection(consecutive=5))
    state = agent.invoke({"messages": [HumanMessage("go")]}, context={"consecutive": 2})
    assert state["stop_reason"] == StopReason.STALLED and model.calls == 2
    looping = ScriptedChatModel(default=lambda _m: [("fetch", {"url": "same"})],
                                no_tools_reply="stopped")
    scripted.append(looping)
    detector = create_loop_agent(looping, [fetch], loop_detection=LoopDetection())
    state = detector.invoke({"messages": [HumanMessage("go")]},
                            context={"warn_after": 1, "stop_after": 2,
                                     "no_progress_stop_after": 10})
    assert state["stop_reason"] == StopReason.LOOP_DETECTED
    assert looping.request_tools == [["fetch"], ["fetch"], []]
