"""Per-run overrides through LangGraph's runtime context."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from typing_extensions import is_typeddict

from langgraph_loop import (
    BudgetPressure,
    Iterations,
    Limits,
    LoopDetection,
    StallDetection,
    StopReason,
    create_loop_agent,
)
from langgraph_loop.core.overrides import GROUPS
from langgraph_loop.core.removed import CONTEXT
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext
from langgraph_loop.scripted import ScriptedChatModel

SETTINGS = LoopSettings.build(ScriptedChatModel(), iterations=Iterations(stall=StallDetection()),
                              limits=Limits(budget_pressure=BudgetPressure()))

GOOD: dict[tuple[str, ...], Any] = {
    ("iterations", "max"): 3,
    ("iterations", "max_model_calls"): 4,
    ("iterations", "stall", "consecutive"): 4,
    ("iterations", "stall", "tolerance"): 0.2,
    ("limits", "max_tool_calls"): 2,
    ("limits", "token_budget"): 5000,
    ("limits", "max_duration_s"): 1.5,
    ("limits", "max_tool_output_chars"): 500,
    ("limits", "budget_pressure", "threshold"): 0.5,
    ("loop_detection", "repeat", "warn_after"): 2,
    ("loop_detection", "repeat", "stop_after"): 6,
    ("loop_detection", "cycle", "warn_after"): 2,
    ("loop_detection", "cycle", "stop_after"): 6,
    ("loop_detection", "calls", "window"): 30,
    ("loop_detection", "no_progress", "warn_after"): 1,
    ("loop_detection", "no_progress", "stop_after"): 4,
}


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for part in reversed(path):
        value = {part: value}
    return value


def _paths(declared: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for name, hint in get_type_hints(declared).items():
        out |= _paths(hint, (*prefix, name)) if is_typeddict(hint) else {(*prefix, name)}
    return out


def test_every_override_is_covered_and_the_context_holds_only_the_groups() -> None:
    assert set(GROUPS) == set(LoopContext.__annotations__)
    assert set(GOOD) == _paths(LoopContext)
    assert not set(CONTEXT) & set(LoopContext.__annotations__)  # 0.2's flat names are gone


@pytest.mark.parametrize("path", sorted(GOOD), ids=".".join)
def test_each_override_reaches_the_settings(path: tuple[str, ...]) -> None:
    value = GOOD[path]
    resolved = SETTINGS.for_run(_nest(path, value))
    target: Any = resolved
    for part in path:
        target = getattr(target, part)
    assert target == value
    assert SETTINGS.for_run(None) is SETTINGS  # the graph's own settings are untouched


def test_max_model_calls_override_reaches_the_limit_checks() -> None:
    assert SETTINGS.iterations.max_model_calls == 25
    assert SETTINGS.for_run({"iterations": {"max_model_calls": 4}}).iterations.max_model_calls == 4


def test_a_threshold_given_per_run_switches_its_opt_in_layer_on_as_at_build_time() -> None:
    assert "repeat" not in SETTINGS.loop_detection.layers  # type: ignore[union-attr]
    run = SETTINGS.for_run({"loop_detection": {"repeat": {"stop_after": 6}}}).loop_detection
    assert run is not None and "repeat" in run.layers and run.repeat.stop_after == 6
    assert run.layers == LoopDetection(repeat={"stop_after": 6}).layers  # type: ignore[arg-type]


BAD: list[tuple[dict[str, Any], str]] = [
    ({"iterations": {"max": 0}}, "iterations.max"),
    ({"iterations": {"max_model_calls": -1}}, "iterations.max_model_calls"),
    ({"limits": {"max_tool_calls": 0}}, "limits.max_tool_calls"),
    ({"limits": {"token_budget": 0}}, "limits.token_budget"),
    ({"limits": {"max_duration_s": 0}}, "limits.max_duration_s"),
    ({"limits": {"max_tool_output_chars": 10}}, "limits.max_tool_output_chars"),
    ({"loop_detection": {"repeat": {"warn_after": 0}}}, "warn_after"),
    ({"loop_detection": {"repeat": {"stop_after": 2, "warn_after": 3}}},
     "Repeat: stop_after must be greater than warn_after"),
    ({"loop_detection": {"calls": {"window": 1}}}, "window"),
    ({"loop_detection": {"no_progress": {"stop_after": 1}}}, "stop_after"),
    ({"loop_detection": {"warn_after": 2}},
     "loop_detection.warn_after: unknown field (fields of LoopDetection: layers, no_progress, "),
    ({"loop_detection": {"drift": {"warn_after": 2}}}, "loop_detection.drift: not overridable per run"),
    ({"iterations": {"stall": {"consecutive": 1}}}, "consecutive"),
    ({"iterations": {"stall": {"tolerance": 1.5}}}, "tolerance"),
    ({"limits": {"budget_pressure": {"threshold": 1.0}}}, "threshold"),
    ({"iterations": {"max": True}}, "iterations.max: Input should be a valid integer (got True)"),
    ({"limits": {"max_tool_calls": "2"}}, "limits.max_tool_calls"),
    ({"iterations": {"max_model_calls": 2.5}}, "iterations.max_model_calls"),
    ({"iterations": {"stall": {"tolerance": [0.1]}}}, "iterations.stall.tolerance"),
    ({"limits": {"final_answr": False}},
     "limits.final_answr: unknown field (fields of Limits: max_tool_calls, token_budget, "
     "max_duration_s, final_answer, max_tool_output_chars, max_tool_errors, budget_pressure, "
     "budget_check_in, budget_scope)"),
    ({"iterations": {"maxx": 3}}, "iterations.maxx: unknown field (fields of Iterations: max, "),
    ({"iterations": {"stall": {"consecutiv": 3}}},
     "iterations.stall.consecutiv: unknown field (fields of StallDetection: consecutive, tolerance)"),
    ({"limits": {"final_answer": False}},
     "limits.final_answer: not overridable per run (per-run fields of limits: max_tool_calls, "),
    ({"iterations": {"judge": None}}, "iterations.judge: not overridable per run"),
    ({"limit": {"max_tool_calls": 2}},
     "unknown key 'limit' (per-run override groups: iterations, limits, loop_detection)"),
    ({"limits": 3}, "limits: expected a mapping of Limits fields, got int 3"),
    ({"max_itterations": 3}, "unknown key 'max_itterations'"),
    ({"max_iterations": 3}, "'max_iterations' was removed in 0.4: use {\"iterations\": {\"max\": ...}}"),
]


@pytest.mark.parametrize(("context", "text"), BAD)
def test_bad_override_raises_at_run_start_naming_the_field(
    scripted: list[ScriptedChatModel], context: dict[str, Any], text: str
) -> None:
    model = ScriptedChatModel(script=["never"])
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(stall=StallDetection()),
                              limits=Limits(budget_pressure=BudgetPressure()))
    with pytest.raises(ValueError, match="invalid run context") as info:
        agent.invoke({"messages": [HumanMessage("hi")]}, context=context)
    assert text in str(info.value)
    assert model.calls == 0


def test_override_of_a_disabled_guard_is_an_error() -> None:
    agent = create_loop_agent(ScriptedChatModel(script=["x"]), loop_detection=None)
    with pytest.raises(ValueError, match="loop_detection is disabled"):
        agent.invoke({"messages": [HumanMessage("hi")]},
                     context={"loop_detection": {"repeat": {"warn_after": 2}}})
    with pytest.raises(ValueError, match=r"iterations\.stall is disabled"):
        agent.invoke({"messages": [HumanMessage("hi")]},
                     context={"iterations": {"stall": {"consecutive": 2}}})


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
    ctx = {"limits": {"max_tool_calls": 2}}
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
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True, max=10))
    state = agent.invoke({"messages": [HumanMessage("go")]}, context={"iterations": {"max": 3}})
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS and model.calls == 3
    runaway = pages()
    scripted.append(runaway)
    limited = create_loop_agent(runaway, [fetch])
    state = limited.invoke({"messages": [HumanMessage("go")]}, context={"iterations": {"max_model_calls": 2}})
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert runaway.request_tools == [["fetch"], ["fetch"], []]


def test_budget_and_pressure_overrides(scripted: list[ScriptedChatModel]) -> None:
    def ai(text: str, total: int) -> AIMessage:
        return AIMessage(text, usage_metadata={"input_tokens": total, "output_tokens": 0,
                                               "total_tokens": total})

    model = ScriptedChatModel(script=[ai("one", 300), ai("two", 50), ai("three", 50)])
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True, max=3))
    state = agent.invoke({"messages": [HumanMessage("go")]},
                         context={"limits": {"token_budget": 3000, "budget_pressure": {"threshold": 0.1}}})
    assert state["stop_reason"] == StopReason.BUDGET_PRESSURE
    assert model.calls == 2 and model.requests[1][-1].name == "budget_notice"


def test_stall_and_loop_detection_overrides(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="same answer")
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True,
                                                           stall=StallDetection(consecutive=5)))
    state = agent.invoke({"messages": [HumanMessage("go")]},
                         context={"iterations": {"stall": {"consecutive": 2}}})
    assert state["stop_reason"] == StopReason.STALLED and model.calls == 2
    looping = ScriptedChatModel(default=lambda _m: [("fetch", {"url": "same"})],
                                no_tools_reply="stopped")
    scripted.append(looping)
    detector = create_loop_agent(looping, [fetch], loop_detection=LoopDetection())
    state = detector.invoke({"messages": [HumanMessage("go")]},
                            context={"loop_detection": {"repeat": {"warn_after": 1, "stop_after": 2},
                                                        "no_progress": {"stop_after": 10}}})
    assert state["stop_reason"] == StopReason.LOOP_DETECTED
    assert looping.request_tools == [["fetch"], ["fetch"], []]
