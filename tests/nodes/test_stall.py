"""Stall detection: flat token totals, repeated answers, repeated work; growing work never."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_loop import Iterations, StallDetection, StopReason, create_loop_agent
from langgraph_loop.nodes.stall import flat_tokens, stall_guard
from langgraph_loop.nodes.stall import new_work_by_iteration as new_work_by_pass
from langgraph_loop.scripted import ScriptedChatModel


def rec(i: int, total: int, answer: str | None = None, work: str | None = None) -> dict[str, Any]:
    return {"iteration": i, "usage": {"total_tokens": total}, "answer_hash": answer,
            "work_hash": work}


def call(i: int, q: str, result: str = "r", status: str = "success") -> dict[str, Any]:
    return {"name": "search", "args": {"q": q}, "status": status, "duration_s": 0.0,
            "iteration": i, "result_hash": result}


CFG = StallDetection(consecutive=3, tolerance=0.10)

# --- pure rules ---------------------------------------------------------------------


@pytest.mark.parametrize(("totals", "flat"), [
    ([1000, 1100, 1050], True),      # spread 100 <= 10% of 1000
    ([1000, 1101, 1050], False),     # spread 101 > 100
    ([1000, 1090, 1180], False),     # a chain of 9% steps is growth, not a stall
    ([0, 0, 0], False),              # unreported usage is never flat
    ([500], False),
])
def test_flat_tokens(totals: list[int], flat: bool) -> None:
    assert flat_tokens(totals, tolerance=0.10) is flat


def test_token_stall_needs_consecutive_iterations() -> None:
    assert stall_guard([rec(1, 1000), rec(2, 1010)], CFG, new_work={}) is None
    guard = stall_guard([rec(1, 5000), rec(2, 1000), rec(3, 1010), rec(4, 990)], CFG, new_work={})
    assert guard == {"guard": "stall_detection", "reason": "stalled", "layer": "tokens",
                     "iterations": [2, 3, 4], "totals": [1000, 1010, 990],
                     "detail": "the last 3 iterations used nearly the same tokens ([1000, 1010, 990], "
                               "tolerance 10%) without new work"}


def test_repeated_answer_is_a_stall_whatever_the_tokens() -> None:
    records = [rec(1, 1000, "h"), rec(2, 1500, "h"), rec(3, 2300, "h")]
    assert stall_guard(records, CFG, new_work={})["layer"] == "answer"  # type: ignore[index]
    records[1]["answer_hash"] = "other"
    assert stall_guard(records, CFG, new_work={}) is None


def test_repeated_work_is_a_stall_whatever_the_tokens() -> None:
    records = [rec(1, 1000, "a", "w"), rec(2, 1500, "b", "w"), rec(3, 2300, "c", "w")]
    assert stall_guard(records, CFG, new_work={})["layer"] == "work"  # type: ignore[index]


def test_growing_work_is_never_a_stall() -> None:
    records = [rec(1, 1000, "h"), rec(2, 1000, "h"), rec(3, 1000, "h")]
    assert stall_guard(records, CFG, new_work={2: True}) is None
    assert stall_guard(records, CFG, new_work={3: True}) is None
    # the first pass of the window is the baseline: its own new work does not count
    assert stall_guard(records, CFG, new_work={1: True, 2: False, 3: False}) is not None


def test_new_work_by_pass_compares_name_args_and_result() -> None:
    log = [call(1, "a"), call(1, "b"),
           call(2, "a"),                      # same call, same result: old work
           call(3, "a", result="changed"),    # same call, new result: new work
           call(4, "z", status="refused"),    # not run: no work
           call(5, "c", status="error")]      # ran and failed: new work
    assert new_work_by_pass(log) == {1: True, 2: False, 3: True, 4: False, 5: True}


def test_stall_detection_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="consecutive"):
        StallDetection(consecutive=1)
    with pytest.raises(ValueError, match="tolerance"):
        StallDetection(tolerance=1.0)


# --- end to end ---------------------------------------------------------------------

def ai(text: str = "", calls: list[tuple[str, dict[str, Any]]] | None = None,
       total: int = 1000) -> AIMessage:
    tool_calls = [{"name": n, "args": a, "id": f"c{id(a)}-{i}", "type": "tool_call"}
                  for i, (n, a) in enumerate(calls or [])]
    return AIMessage(text, tool_calls=tool_calls,
                     usage_metadata={"input_tokens": total - 50, "output_tokens": 50,
                                     "total_tokens": total})


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def keep_going(_state: Any) -> bool:
    return True


def go() -> dict[str, Any]:
    return {"messages": [HumanMessage("find the answer")]}


@pytest.mark.parametrize("use_async", [False, True])
async def test_repeated_answer_stops_with_stalled(
    scripted: list[ScriptedChatModel], use_async: bool
) -> None:
    model = ScriptedChatModel(script=["I am not sure yet.", "I am  not sure yet.",
                                      "i am not sure YET.", "never sent"])
    scripted.append(model)
    agent = create_loop_agent(model,
                              iterations=Iterations(should_continue=keep_going, stall=StallDetection()))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.STALLED
    assert model.calls == 3
    assert [m.name for m in model.requests[2] if m.type == "human"] == [
        None, "loop_continue", "loop_continue"]
    guard = state["iterations"][-1]["guard"]
    assert (guard["layer"], guard["iterations"]) == ("answer", [1, 2, 3])
    assert [r["guard"] for r in state["iterations"][:2]] == [None, None]


def test_same_work_with_new_wording_stops_with_stalled(scripted: list[ScriptedChatModel]) -> None:
    script: list[Any] = []
    for i, text in enumerate(["Checked it.", "Looked again, same.", "Still the same value."]):
        script += [ai(calls=[("lookup", {"key": "k"})], total=1000 + 400 * i), ai(text)]
    model = ScriptedChatModel(script=[*script, "never sent"])
    scripted.append(model)
    agent = create_loop_agent(model, [lookup],
                              iterations=Iterations(should_continue=keep_going, stall=StallDetection()),
                              loop_detection=None)
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.STALLED
    assert model.calls == 6
    assert state["iterations"][-1]["guard"]["layer"] == "work"


def test_flat_tokens_without_new_work_stop(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[ai("draft one", total=1000), ai("draft two", total=1050),
                                      ai("draft three", total=980), ai("never sent")])
    scripted.append(model)
    agent = create_loop_agent(model,
                              iterations=Iterations(should_continue=keep_going, stall=StallDetection()))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.STALLED
    assert state["iterations"][-1]["guard"]["totals"] == [1000, 1050, 980]
    assert model.calls == 3


def test_growing_work_with_flat_tokens_runs_on(scripted: list[ScriptedChatModel]) -> None:
    script: list[Any] = []
    for i in range(4):
        script += [ai(calls=[("lookup", {"key": f"k{i}"})], total=500), ai("noted", total=500)]
    model = ScriptedChatModel(script=script)
    scripted.append(model)
    agent = create_loop_agent(model, [lookup], iterations=Iterations(
        should_continue=keep_going, max=4, stall=StallDetection()))
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS
    assert model.calls == 8
    assert state["iterations"][-1]["guard"]["guard"] == "max_iterations"


def test_stall_is_off_by_default_and_never_overrides_completed(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=["same"] * 4)
    scripted.append(model)
    off = create_loop_agent(model, iterations=Iterations(should_continue=keep_going, max=4))
    assert off.invoke(go())["stop_reason"] == StopReason.MAX_ITERATIONS
    judge_like = ScriptedChatModel(script=["same"] * 3)
    scripted.append(judge_like)
    agent = create_loop_agent(judge_like, iterations=Iterations(
        should_continue=lambda s: s["iteration"] < 3, stall=StallDetection()))
    assert agent.invoke(go())["stop_reason"] == StopReason.COMPLETED
