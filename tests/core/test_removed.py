"""Issue 38, item 3: 0.4 drops the 0.2 bridge. Every spelling 0.3 deprecated "until 0.4" now
fails where it is written, with an error naming what to write instead (``core/removed.py``),
and the new spelling behaves as the old one did."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_loop import Iterations, Limits, StopReason, create_loop_agent
from langgraph_loop.core.removed import CONTEXT, KEYWORDS
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.scripted import ScriptedChatModel

# the README's and CHANGELOG's upgrade table, as the errors say it
EXPECTED_KEYWORDS = {
    "max_iterations": "iterations=Iterations(max=...)",
    "should_continue": "iterations=Iterations(should_continue=...)",
    "judge": "iterations=Iterations(judge=...)",
    "next_message": "iterations=Iterations(continuation=...)",
    "prompt_factory": "iterations=Iterations(continuation=lambda state, feedback: ...)",
    "record_feedback": "iterations=Iterations(record_feedback=...)",
    "inject_progress": "iterations=Iterations(inject_progress=...)",
    "fresh_context": "iterations=Iterations(fresh_context=...)",
    "stall_detection": "iterations=Iterations(stall=...)",
    "budget_pressure": "limits=Limits(budget_pressure=...)",
    "tool_filter": "hooks=Hooks(tool_filter=...)",
}


def test_the_table_of_removed_keywords_is_the_one_the_upgrade_notes_show() -> None:
    assert KEYWORDS == EXPECTED_KEYWORDS


@pytest.mark.parametrize("name", sorted(EXPECTED_KEYWORDS))
def test_an_old_keyword_fails_at_build_time_naming_its_replacement(name: str) -> None:
    with pytest.raises(TypeError) as caught:
        create_loop_agent(ScriptedChatModel(script=[]), **{name: None})
    assert str(caught.value) == (f"create_loop_agent({name}=...) was removed in 0.4: "
                                 f"use {EXPECTED_KEYWORDS[name]}")


def test_several_old_keywords_and_a_misspelled_one_are_named_in_one_error() -> None:
    with pytest.raises(TypeError) as caught:
        create_loop_agent(ScriptedChatModel(script=[]), max_iteration=3, max_iterations=3, judge=None)
    assert str(caught.value) == (
        "create_loop_agent(judge=...) was removed in 0.4: use iterations=Iterations(judge=...); "
        "create_loop_agent(max_iterations=...) was removed in 0.4: use iterations=Iterations(max=...); "
        "create_loop_agent: unknown arguments ['max_iteration']")


def test_loop_settings_build_refuses_an_old_keyword_too() -> None:
    with pytest.raises(TypeError, match=r"use hooks=Hooks\(tool_filter=\.\.\.\)"):
        LoopSettings.build(ScriptedChatModel(script=[]), tool_filter=lambda s, t: t)


def test_create_loop_agent_takes_23_parameters_and_no_old_keyword() -> None:
    params = inspect.signature(create_loop_agent).parameters
    named = [p for p in params.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in named] == [
        "model", "tools", "system_prompt", "iterations", "limits", "loop_detection", "approval",
        "compaction", "hooks", "middleware", "response_format", "state_schema", "context_schema",
        "handle_tool_errors", "checkpointer", "store", "interrupt_before", "interrupt_after", "debug",
        "name", "cache", "transformers", "show_notices"]
    assert not set(EXPECTED_KEYWORDS) & set(params)


def test_limits_max_model_calls_is_refused_naming_iterations() -> None:
    with pytest.raises(ValueError) as caught:
        Limits(max_model_calls=2)  # type: ignore[call-arg]
    assert ("Limits(max_model_calls=...) was removed in 0.4: use Iterations(max_model_calls=...)"
            in str(caught.value))
    with pytest.raises(ValueError, match=r"limits: .*use Iterations\(max_model_calls=\.\.\.\)"):
        create_loop_agent(ScriptedChatModel(script=[]), limits={"max_model_calls": 2})


def test_the_model_call_limit_is_iterations_max_model_calls_also_per_run(
        scripted: list[ScriptedChatModel]) -> None:
    def model() -> ScriptedChatModel:
        made = ScriptedChatModel(default=lambda m: [("search", {"q": f"q{len(m)}"})],
                                 no_tools_reply="done")
        scripted.append(made)
        return made

    def search(q: str) -> str:
        """Search."""
        return f"found {q}"

    built = model()
    state = create_loop_agent(built, [search], iterations=Iterations(max_model_calls=2)).invoke(
        {"messages": [HumanMessage("go")]})
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS and built.calls == 3  # + final answer
    per_run = model()
    state = create_loop_agent(per_run, [search], iterations=Iterations(max_model_calls=2)).invoke(
        {"messages": [HumanMessage("go")]}, context={"iterations": {"max_model_calls": 4}})
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS and per_run.calls == 5
    assert state["iterations"][0]["guard"]["limit"] == 4


# --- per-run overrides: the flat names of 0.2 ------------------------------------------------

EXPECTED_CONTEXT = {
    "max_iterations": {"iterations": {"max": 3}},
    "max_model_calls": {"iterations": {"max_model_calls": 4}},
    "consecutive": {"iterations": {"stall": {"consecutive": 4}}},
    "tolerance": {"iterations": {"stall": {"tolerance": 0.2}}},
    "max_tool_calls": {"limits": {"max_tool_calls": 2}},
    "token_budget": {"limits": {"token_budget": 5000}},
    "max_duration_s": {"limits": {"max_duration_s": 1.5}},
    "max_tool_output_chars": {"limits": {"max_tool_output_chars": 500}},
    "threshold": {"limits": {"budget_pressure": {"threshold": 0.5}}},
    "warn_after": {"loop_detection": {"repeat": {"warn_after": 2}}},
    "stop_after": {"loop_detection": {"repeat": {"stop_after": 6}}},
    "window": {"loop_detection": {"calls": {"window": 30}}},
    "no_progress_warn_after": {"loop_detection": {"no_progress": {"warn_after": 1}}},
    "no_progress_stop_after": {"loop_detection": {"no_progress": {"stop_after": 4}}},
}


def _spelled(nested: dict[str, Any]) -> str:
    """``{"limits": {"max_tool_calls": 2}}`` as the error spells it (the value as ``...``)."""
    (key, value), = nested.items()
    inner = _spelled(value) if isinstance(value, dict) else "..."
    return f'{{"{key}": {inner}}}'


def test_every_flat_name_has_a_nested_spelling() -> None:
    assert set(CONTEXT) == set(EXPECTED_CONTEXT)


@pytest.mark.parametrize("name", sorted(EXPECTED_CONTEXT))
def test_a_flat_context_name_is_refused_naming_the_nested_spelling_which_works(name: str) -> None:
    from langgraph_loop import BudgetPressure, StallDetection

    settings = LoopSettings.build(ScriptedChatModel(), iterations=Iterations(stall=StallDetection()),
                                  limits=Limits(budget_pressure=BudgetPressure()))
    nested = EXPECTED_CONTEXT[name]
    leaf: Any = nested
    while isinstance(leaf, dict):
        (leaf,) = leaf.values()
    message = f"invalid run context: {name!r} was removed in 0.4: use {_spelled(nested)}"
    for attempt in (lambda: settings.overrides({name: leaf}), lambda: settings.for_run({name: leaf})):
        with pytest.raises(ValueError) as caught:
            attempt()
        assert str(caught.value) == message
    assert settings.overrides(nested) == nested
    assert settings.for_run(nested) != settings


def test_a_run_with_a_flat_name_fails_before_the_model_is_called(
        scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="more")
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True))
    with pytest.raises(ValueError, match=r"'max_iterations' was removed in 0.4: use "
                                         r'\{"iterations": \{"max": \.\.\.\}\}'):
        agent.invoke({"messages": [HumanMessage("go")]}, context={"max_iterations": 2})
    assert model.calls == 0
    state = agent.invoke({"messages": [HumanMessage("go")]}, context={"iterations": {"max": 2}})
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS and model.calls == 2


def test_a_flat_name_beside_a_user_context_schema_is_refused_naming_the_nested_spelling() -> None:
    from dataclasses import dataclass

    @dataclass
    class Ctx:
        user_id: str

    settings = LoopSettings.build(ScriptedChatModel(), context_schema=Ctx)
    with pytest.raises(ValueError, match=r"'max_tool_calls' was removed in 0.4"):
        settings.overrides({"user_id": "u", "max_tool_calls": 2})
