"""Issue 29, item 4: every spelling of 0.2 that moved still works until 0.4, with a
``DeprecationWarning`` naming the new one, and behaves exactly as its new spelling."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool

from langgraph_loop import (
    BudgetPressure,
    Hooks,
    Iterations,
    Judge,
    Limits,
    StallDetection,
    StopReason,
    create_loop_agent,
    is_notice,
)
from langgraph_loop.core.settings import FLAT, MOVED, LoopSettings
from langgraph_loop.scripted import ScriptedChatModel


@tool
def search(q: str) -> str:
    """Search."""
    return f"found {q}"


@tool
def write(text: str) -> str:
    """Write."""
    return "written"


def _by_iteration(state: Any, tools: list[BaseTool]) -> list[BaseTool]:
    return [t for t in tools if t.name == ("search" if state["iteration"] == 1 else "write")]


def _priced(text: str, total: int) -> AIMessage:
    return AIMessage(text, usage_metadata={"input_tokens": total, "output_tokens": 0,
                                           "total_tokens": total})


def _script() -> list[Any]:
    return [[("search", {"q": "owls"})], "first answer", "second answer", "third answer",
            "fourth answer"]


def _judge() -> Judge:
    return Judge(model=ScriptedChatModel(default='{"answered": false, "reasoning": "more"}'))


UNTIL_3 = {"should_continue": lambda s: s["iteration"] < 3}

# old keyword -> (old keywords, the same in the new spelling, new spelling named in the warning)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "max_iterations": ({"max_iterations": 2, **UNTIL_3},
                       {"iterations": Iterations(max=2, **UNTIL_3)}, r"iterations=Iterations\(max="),
    "should_continue": (UNTIL_3, {"iterations": UNTIL_3}, r"Iterations\(should_continue="),
    "judge": ({"judge": _judge(), "max_iterations": 2},
              {"iterations": {"judge": _judge(), "max": 2}}, r"Iterations\(judge="),
    "next_message": ({"next_message": lambda s, f: f"Go on ({f}).", **UNTIL_3},
                     {"iterations": {"continuation": lambda s, f: f"Go on ({f}).", **UNTIL_3}},
                     r"Iterations\(continuation="),
    "next_message=None result": (
        {"next_message": lambda s, f: None, **UNTIL_3},
        {"iterations": {"continuation": lambda s, f: None, **UNTIL_3}}, "continuation"),
    "prompt_factory": ({"prompt_factory": lambda s: f"Iteration {s['iteration'] + 1}.", **UNTIL_3},
                       {"iterations": {"continuation": lambda s, f: f"Iteration {s['iteration'] + 1}.",
                                       **UNTIL_3}}, r"Iterations\(continuation="),
    "record_feedback": ({"record_feedback": lambda s, f: "noted", **UNTIL_3},
                        {"iterations": {"record_feedback": lambda s, f: "noted", **UNTIL_3}},
                        r"Iterations\(record_feedback="),
    "inject_progress": ({"inject_progress": False, **UNTIL_3},
                        {"iterations": {"inject_progress": False, **UNTIL_3}},
                        r"Iterations\(inject_progress="),
    "fresh_context": ({"fresh_context": True, **UNTIL_3},
                      {"iterations": {"fresh_context": True, **UNTIL_3}}, r"Iterations\(fresh_context="),
    "stall_detection": ({"stall_detection": StallDetection(consecutive=2),
                         "should_continue": lambda s: True},
                        {"iterations": Iterations(stall=StallDetection(consecutive=2),
                                                  should_continue=lambda s: True)},
                        r"Iterations\(stall="),
    "budget_pressure": ({"budget_pressure": {"threshold": 0.1}, "limits": Limits(token_budget=3000),
                         **UNTIL_3},
                        {"limits": Limits(token_budget=3000, budget_pressure=BudgetPressure(threshold=0.1)),
                         "iterations": UNTIL_3}, r"limits=Limits\(budget_pressure="),
    "tool_filter": ({"tool_filter": _by_iteration, **UNTIL_3},
                    {"hooks": Hooks(tool_filter=_by_iteration), "iterations": UNTIL_3},
                    r"hooks=Hooks\(tool_filter="),
}


def _model(case: str) -> ScriptedChatModel:
    if case == "budget_pressure":
        return ScriptedChatModel(script=[_priced("one", 300), _priced("two", 50), _priced("three", 50)])
    if case == "stall_detection":
        return ScriptedChatModel(default="the same answer")
    return ScriptedChatModel(script=_script())


def _observed(case: str, options: dict[str, Any], scripted: list[ScriptedChatModel]) -> Any:
    model = _model(case)
    scripted.append(model)
    state = create_loop_agent(model, [search, write], **options).invoke(
        {"messages": [HumanMessage("Tell me about owls.")]})

    def shown(messages: list[BaseMessage]) -> list[Any]:
        return [(m.type, m.name, m.content) for m in messages]

    return (state["stop_reason"], state["iteration"], state["progress"], model.request_tools,
            [shown(r) for r in model.requests], shown(state["messages"]))


def test_every_moved_keyword_is_covered() -> None:
    assert set(MOVED) <= set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_old_keyword_warns_and_behaves_as_its_new_spelling(
        scripted: list[ScriptedChatModel], case: str) -> None:
    old, new, named = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        expected = _observed(case, new, scripted)  # the new spelling warns about nothing
    with pytest.warns(DeprecationWarning, match=named) as caught:
        got = _observed(case, old, scripted)
    assert got == expected
    assert all(w.filename == __file__ for w in caught)  # the warning points at the caller


def test_a_raising_old_continuation_is_still_named_by_its_old_name() -> None:
    # tests/e2e/test_bad_input.py resumes such a thread; here: the names
    for name in ("next_message", "prompt_factory"):
        with pytest.warns(DeprecationWarning):
            agent = create_loop_agent(ScriptedChatModel(default="x"), **{name: lambda *a: 1 / 0},
                                      should_continue=lambda s: True)
        with pytest.raises(RuntimeError, match=f"{name} raised ZeroDivisionError"):
            agent.invoke({"messages": [HumanMessage("go")]})


def test_prompt_factory_wins_over_next_message_as_in_0_2(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=["one", "two"])
    scripted.append(model)
    with pytest.warns(DeprecationWarning):
        agent = create_loop_agent(model, prompt_factory=lambda s: "from the factory",
                                  next_message=lambda s, f: "from next_message", max_iterations=2,
                                  should_continue=lambda s: True)
    agent.invoke({"messages": [HumanMessage("go")]})
    assert model.requests[1][-1].content.endswith("from the factory")


def test_limits_max_model_calls_warns_and_is_the_per_iteration_limit(
        scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=lambda m: [("search", {"q": f"q{len(m)}"})], no_tools_reply="done")
    scripted.append(model)
    with pytest.warns(DeprecationWarning, match=r"Iterations\(max_model_calls=") as caught:
        limits = Limits(max_model_calls=2)
    assert caught[0].filename == __file__
    state = create_loop_agent(model, [search], limits=limits).invoke(
        {"messages": [HumanMessage("go")]})
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS and model.calls == 3
    with pytest.warns(DeprecationWarning):
        settings = LoopSettings.build(model, limits={"max_model_calls": None})
    assert settings.iterations.max_model_calls is None and settings.limits.max_model_calls is None


@pytest.mark.parametrize(("options", "text"), [
    ({"max_iterations": 3, "iterations": {"max": 2}}, "max_iterations given twice"),
    ({"judge": _judge(), "iterations": Iterations(judge=_judge())}, "judge given twice"),
    ({"tool_filter": _by_iteration, "hooks": Hooks(tool_filter=_by_iteration)}, "tool_filter given twice"),
    ({"budget_pressure": BudgetPressure(), "limits": {"budget_pressure": {}}}, "budget_pressure given twice"),
    ({"limits": {"max_model_calls": 3}, "iterations": {"max_model_calls": 4}}, "max_model_calls given twice"),
])
def test_a_field_given_in_both_spellings_is_an_error(options: dict[str, Any], text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match=text):
            create_loop_agent(ScriptedChatModel(script=[]), **options)


def test_a_misspelled_keyword_is_still_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"unknown arguments \['max_iteration'\]"):
        create_loop_agent(ScriptedChatModel(script=[]), max_iteration=3)


def test_old_keywords_keep_their_old_error_texts() -> None:
    for options, text in [({"max_iterations": 0}, "max_iterations must be an int >= 1"),
                          ({"tool_filter": "add"}, "tool_filter must be callable"),
                          ({"fresh_context": "no"}, "fresh_context must be True or False"),
                          ({"judge": "gpt-4o"}, "judge: expected a Judge")]:
        with pytest.raises(ValueError, match=text), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            create_loop_agent(ScriptedChatModel(script=[]), **options)


# --- per-run overrides: the flat names of 0.2 ------------------------------------------------

SETTINGS = LoopSettings.build(ScriptedChatModel(), iterations=Iterations(stall=StallDetection()),
                              limits=Limits(budget_pressure=BudgetPressure()))
VALUES = {"max_iterations": 3, "max_model_calls": 4, "max_tool_calls": 2, "token_budget": 5000,
          "max_duration_s": 1.5, "max_tool_output_chars": 500, "warn_after": 2, "stop_after": 6,
          "window": 30, "no_progress_warn_after": 1, "no_progress_stop_after": 4, "consecutive": 4,
          "tolerance": 0.2, "threshold": 0.5}


@pytest.mark.parametrize("name", sorted(FLAT))
def test_a_flat_override_warns_and_lands_in_its_group(name: str) -> None:
    nested: Any = VALUES[name]
    for part in reversed(FLAT[name]):
        nested = {part: nested}
    with pytest.warns(DeprecationWarning, match=f"{name} -> {'.'.join(FLAT[name])}"):
        assert SETTINGS.overrides({name: VALUES[name]}) == {name: VALUES[name]}
    assert SETTINGS.for_run({name: VALUES[name]}) == SETTINGS.for_run(nested)


def test_a_flat_override_runs_as_before(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default="more")
    scripted.append(model)
    agent = create_loop_agent(model, iterations=Iterations(should_continue=lambda s: True))
    with pytest.warns(DeprecationWarning, match="max_iterations -> iterations.max"):
        state = agent.invoke({"messages": [HumanMessage("go")]}, context={"max_iterations": 2})
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS and model.calls == 2


def test_a_field_given_flat_and_nested_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"limits\.max_tool_calls given twice"):
        SETTINGS.for_run({"max_tool_calls": 2, "limits": {"max_tool_calls": 3}})


# --- notices: 0.2 named every one loop_warning ---------------------------------------------

def test_a_notice_stored_by_0_2_is_still_a_notice() -> None:
    stored = HumanMessage("Loop warning: search repeated.", name="loop_warning",
                          additional_kwargs={"langgraph_loop": {"kind": "notice", "sources": ["loop"]}})
    assert is_notice(stored) and is_notice(HumanMessage("x", name="loop_warning"))
    assert not is_notice(HumanMessage("loop_warning"))


def test_create_loop_agent_takes_23_parameters_and_the_old_keywords_apart() -> None:
    params = inspect.signature(create_loop_agent).parameters
    named = [p for p in params.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert [p.name for p in named] == [
        "model", "tools", "system_prompt", "iterations", "limits", "loop_detection", "approval",
        "compaction", "hooks", "middleware", "response_format", "state_schema", "context_schema",
        "handle_tool_errors", "checkpointer", "store", "interrupt_before", "interrupt_after", "debug",
        "name", "cache", "transformers", "show_notices"]
    assert [p.name for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD] == ["deprecated"]
