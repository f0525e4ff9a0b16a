"""Property suite: random models, tools, configurations, interrupts and resumes; invariants hold.

Each example builds a loop agent from a random configuration (limits, loop and stall
detection, budget pressure, judge with random verdicts, fresh context, compaction,
approvals decided by a random resolver or a random human, tool filter, hooks and
callbacks that may fail) and drives one or two user turns of a thread with a
scripted model whose behaviour is random too (tool calls, repeats, cycles, parallel
calls, malformed calls, unknown tools, tools that raise or pause, models that raise,
text answers). Runs are streamed and cut short at random points, then resumed.

Checked on every example (``tests/support/fuzz_drive.py``): every request any model
received is provider-valid; the stored thread is provider-valid after every step of
the driver; every run ends with a stop reason (a pending interrupt is answered and
resumed; an error leaves a resumable thread); no tool runs after a stop decision, no
call runs twice, no refused, filtered or undecided gated call runs; each queued
notice is delivered at most once and only in its own run; usage, model calls and
tool calls match the records.

Budget: the ``ci`` hypothesis profile (``tests/conftest.py``) runs 1,000 examples of
the sync test and 300 of the async one; ``HYPOTHESIS_PROFILE=dev`` runs fewer,
``HYPOTHESIS_PROFILE=long`` many more.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import (
    Approval,
    BudgetPressure,
    Calls,
    Compaction,
    Hooks,
    Iterations,
    Judge,
    Limits,
    LoopDetection,
    Repeat,
    StallDetection,
    create_loop_agent,
)
from langgraph_loop import builder as builder_module
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.fuzz import (
    CALLS,
    FuzzModel,
    ModelDown,
    SummarizerModel,
    World,
    make_tools,
    reply_item,
)
from tests.support.fuzz_drive import check_requests, check_run, drive, resolver_for

FAST_RETRY = builder_module.RETRY._replace(initial_interval=0.0, jitter=False)
PRESSURE = "Budget almost spent: finish now."

# --- behaviours --------------------------------------------------------------------------

single = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(["done", "", "All good.", "answer: 3"])),
    st.tuples(st.just("calls"), st.lists(st.sampled_from(sorted(CALLS)), min_size=1,
                                          max_size=4).map(tuple), st.booleans()),
    st.tuples(st.just("malformed"), st.just(()), st.just(True)),
    st.tuples(st.just("raise")),
)


@st.composite
def behaviours(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Replies with repeats (the same reply k times) and cycles (A, B, A, B...)."""
    out: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 5))):
        shape = draw(st.sampled_from(["one", "one", "repeat", "cycle"]))
        first = draw(single)
        if shape == "one":
            out.append(first)
        elif shape == "repeat":
            out += [first] * draw(st.integers(2, 6))
        else:
            out += [first, draw(single)] * draw(st.integers(2, 4))
    return out


judge_replies = st.sampled_from([
    ("verdict", True), ("verdict", False), ("text", "VERDICT: DONE"), ("text", "VERDICT: MORE"),
    ("text", "garbage ###"), ("raise",), ("bad_call",),
])


def judge_item(spec: tuple[Any, ...]) -> Any:
    if spec[0] == "verdict":
        return [("JudgeVerdict", {"answered": spec[1], "reasoning": "checked"})]
    if spec[0] == "text":
        return spec[1]
    if spec[0] == "raise":
        return ModelDown("judge unavailable")
    return AIMessage("", invalid_tool_calls=[{"name": "JudgeVerdict", "args": "{oops",
                                              "id": "j1", "error": "bad", "type":
                                              "invalid_tool_call"}])


# --- configurations ----------------------------------------------------------------------

configs = st.fixed_dictionaries({
    "max_iterations": st.one_of(st.none(), st.integers(1, 4)),
    "max_model_calls": st.one_of(st.none(), st.integers(1, 6)),
    "max_tool_calls": st.one_of(st.none(), st.integers(1, 6)),
    "token_budget": st.one_of(st.none(), st.integers(150, 3000)),
    "final_answer": st.booleans(),
    "max_tool_output_chars": st.sampled_from([100, 1000, None]),
    "detection": st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(1, 3))),
    "stall": st.booleans(),
    "pressure": st.one_of(st.none(), st.floats(0.2, 0.9)),
    "predicate": st.sampled_from([None, "odd", "feedback", "flaky"]),
    "judge": st.one_of(st.none(), st.lists(judge_replies, max_size=4)),
    "next_message": st.sampled_from([None, "text", "none"]),
    "fresh_context": st.booleans(),
    "inject_progress": st.booleans(),
    "tool_filter": st.sampled_from([None, "no_danger", "arithmetic"]),
    "approval": st.sampled_from([None, ("danger",), ("danger", "wipe")]),
    "resolver": st.booleans(),
    "max_auto_rounds": st.integers(0, 2),
    "compaction": st.one_of(st.none(), st.tuples(st.integers(100, 600), st.integers(1, 4))),
    "hooks": st.sampled_from([None, "terminate", "flaky_tool_hook"]),
    "recursion_limit": st.integers(8, 80),
    "runaway": st.booleans(),
    "second_turn": st.booleans(),
})


def _flaky(fn: Any, failures: int = 1) -> Any:
    """``fn`` that raises the first ``failures`` times it is called."""
    left = [failures]

    def wrapper(*args: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise RuntimeError("callback down (scripted)")
        return fn(*args)

    return wrapper


def _callbacks(c: dict[str, Any]) -> tuple[dict[str, Any], Hooks | None]:
    predicates = {
        "odd": lambda s: s["iteration"] % 2 == 1,
        "feedback": lambda s: (s["iteration"] < 2, "keep going"),
        "flaky": _flaky(lambda s: s["iteration"] < 2),
    }
    filters = {
        "no_danger": lambda s, tools: [t for t in tools if t.name not in ("danger", "wipe")],
        "arithmetic": lambda s, tools: [t for t in tools if t.name in ("add", "boom")]
        if s.get("iteration", 1) % 2 == 0 else tools,
    }
    hooks = {
        "terminate": Hooks(on_iteration_end=lambda record, s: record["iteration"] >= 2),
        "flaky_tool_hook": Hooks(on_tool_call=_flaky(lambda record: None)),
    }
    messages = {"text": lambda s, feedback: "Continue, please.", "none": lambda s, f: None}
    hook, tool_filter = hooks.get(c["hooks"] or ""), filters.get(c["tool_filter"] or "")
    if tool_filter is not None:
        hook = (hook or Hooks()).model_copy(update={"tool_filter": tool_filter})
    return {"should_continue": predicates.get(c["predicate"] or ""),
            "continuation": messages.get(c["next_message"] or "")}, hook


def build(c: dict[str, Any], script: list[tuple[Any, ...]], world: World,
          rnd: random.Random) -> tuple[Any, list[ScriptedChatModel], set[str]]:
    """The agent for a configuration, the scripted models it uses, the gated tools."""
    runaway = [("calls", ("add", "add2"), False)]
    model = FuzzModel(script=[reply_item(s, world) for s in script], world=world,
                      default=reply_item(runaway[0], world) if c["runaway"] else "final answer")
    models: list[ScriptedChatModel] = [model]
    judge = None
    if c["judge"] is not None:
        judge_model = ScriptedChatModel(script=[judge_item(s) for s in c["judge"]],
                                        default="VERDICT: DONE")
        models.append(judge_model)
        judge = Judge(model=judge_model, criteria=["be correct"])
    compaction = None
    if c["compaction"] is not None:
        summarizer = SummarizerModel(default="Summary of the earlier work.", world=world)
        models.append(summarizer)
        compaction = Compaction(max_tokens=c["compaction"][0], keep_last=c["compaction"][1],
                                summarizer=summarizer)
    gated = set(c["approval"] or ())
    approval = None
    if c["approval"] is not None:
        approval = Approval(tools=c["approval"], max_auto_rounds=c["max_auto_rounds"],
                            resolver=resolver_for(world, rnd, gated) if c["resolver"] else None)
    detection = None
    if c["detection"] is not None:
        warn, extra = c["detection"]
        detection = LoopDetection(repeat=Repeat(warn_after=warn, stop_after=warn + extra),
                                  calls=Calls(window=10))
    loop, hooks = _callbacks(c)
    with _fast_retries():
        agent = create_loop_agent(
            model, make_tools(world), checkpointer=InMemorySaver(),
            iterations=Iterations(
                max=c["max_iterations"], max_model_calls=c["max_model_calls"], judge=judge,
                stall=StallDetection(consecutive=2) if c["stall"] else None,
                fresh_context=c["fresh_context"], inject_progress=c["inject_progress"], **loop),
            limits=Limits(max_tool_calls=c["max_tool_calls"],
                          token_budget=c["token_budget"], final_answer=c["final_answer"],
                          max_tool_output_chars=c["max_tool_output_chars"],
                          budget_pressure=(BudgetPressure(threshold=c["pressure"], instruction=PRESSURE)
                                           if c["pressure"] is not None else None)),
            loop_detection=detection, hooks=hooks,
            approval=approval, compaction=compaction,
        )
    return agent, models, gated


@contextmanager
def _fast_retries() -> Iterator[None]:
    """The model node's retry policy without its back-off sleeps."""
    with mock.patch.object(builder_module, "RETRY", FAST_RETRY):
        yield


def run_example(c: dict[str, Any], script: list[tuple[Any, ...]], seed: int,
                use_async: bool) -> None:
    world, rnd = World(use_async=use_async), random.Random(seed)
    agent, models, gated = build(c, script, world, rnd)
    config: Any = {"configurable": {"thread_id": "fuzz"}, "recursion_limit": c["recursion_limit"]}
    pressure = PRESSURE if c["pressure"] is not None else None
    cap = c["max_tool_calls"]
    for turn, text in enumerate(["Work on the task.", "And now the next one."][
            : 2 if c["second_turn"] else 1], 1):
        values = drive(agent, world, text, config, rnd, gated=gated, pressure_text=pressure,
                       use_async=use_async)
        check_run(world, turn, values, cap=cap, gated=gated)
    check_requests(models)


FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                       HealthCheck.data_too_large])


@FUZZ
@given(c=configs, script=behaviours(), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_across_the_configuration_space(c: dict[str, Any],
                                                         script: list[tuple[Any, ...]],
                                                         seed: int) -> None:
    run_example(c, script, seed, use_async=False)


@settings(FUZZ, max_examples=max(10, settings().max_examples * 3 // 10))
@given(c=configs, script=behaviours(), seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_on_the_async_path(c: dict[str, Any], script: list[tuple[Any, ...]],
                                           seed: int) -> None:
    run_example(c, script, seed, use_async=True)
