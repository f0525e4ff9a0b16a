"""Iteration records: counts, call records, usage (cached/reasoning), durations, guards."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_loop import Iterations, Limits, StopReason, create_loop_agent
from langgraph_loop.core.state import add_usage, build_record, usage_of
from langgraph_loop.core.state import new_iteration as new_pass
from langgraph_loop.scripted import ScriptedChatModel


@tool
def search(q: str) -> str:
    """Search."""
    if q == "bad":
        raise ValueError("bad query")
    return f"found {q}"


def ai(text: str = "", calls: list[tuple[str, dict[str, Any]]] | None = None, *,
       inp: int, out: int, cached: int | None = None, reasoning: int | None = None) -> AIMessage:
    usage: dict[str, Any] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    if cached is not None:
        usage["input_token_details"] = {"cache_read": cached}
    if reasoning is not None:
        usage["output_token_details"] = {"reasoning": reasoning}
    tool_calls = [{"name": n, "args": a, "id": f"id-{inp}-{i}", "type": "tool_call"}
                  for i, (n, a) in enumerate(calls or [])]
    return AIMessage(text, tool_calls=tool_calls, usage_metadata=usage)  # type: ignore[arg-type]


def test_usage_of_reads_cached_and_reasoning_tokens() -> None:
    assert usage_of(ai(inp=10, out=5)) == {"input_tokens": 10, "output_tokens": 5,
                                           "total_tokens": 15}
    assert usage_of(ai(inp=10, out=5, cached=0, reasoning=3)) == {
        "input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "cached_tokens": 0,
        "reasoning_tokens": 3}
    assert usage_of(AIMessage("no usage")) is None


def test_add_usage_keeps_optional_keys_only_when_reported() -> None:
    a = add_usage(None, {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2})
    assert "cached_tokens" not in a
    b = add_usage(a, {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "cached_tokens": 4})
    assert b == {"input_tokens": 2, "output_tokens": 2, "total_tokens": 4, "cached_tokens": 4}


def test_work_hash_ignores_the_order_of_parallel_calls() -> None:
    p = new_pass("m", now=0.0)
    one = [{"name": "s", "args": {"q": "a"}, "status": "success", "duration_s": 0.0},
           {"name": "s", "args": {"q": "b"}, "status": "success", "duration_s": 0.0}]
    a = build_record(iteration=1, info=p, calls=one, now=1.0)  # type: ignore[arg-type]
    b = build_record(iteration=1, info=p, calls=one[::-1], now=1.0)  # type: ignore[arg-type]
    assert a["work_hash"] == b["work_hash"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_records_of_a_two_pass_run(scripted: list[ScriptedChatModel], use_async: bool) -> None:
    model = ScriptedChatModel(script=[
        ai(calls=[("search", {"q": "owls"}), ("search", {"q": "bad"})], inp=100, out=20, cached=60),
        ai("owls are birds", inp=150, out=30, cached=100, reasoning=12),
        ai("owls hunt at night", inp=200, out=40, reasoning=8),
    ])
    scripted.append(model)
    agent = create_loop_agent(model, [search],
                              iterations=Iterations(should_continue=lambda s: (s["iteration"] < 2,
                                                                            "say more"), max=2))
    inp = {"messages": [HumanMessage("tell me about owls")]}
    state = await agent.ainvoke(inp) if use_async else agent.invoke(inp)
    assert state["stop_reason"] == StopReason.MAX_ITERATIONS
    first, second = state["iterations"]
    assert {k: first[k] for k in ("iteration", "model_calls", "feedback", "verdict", "guard")} == {
        "iteration": 1, "model_calls": 2, "feedback": "owls are birds", "verdict": None,
        "guard": None}
    assert [(c["name"], c["args"], c["status"]) for c in first["tool_calls"]] == [
        ("search", {"q": "owls"}, "success"), ("search", {"q": "bad"}, "error")]
    assert all(sorted(c) == ["args", "duration_s", "name", "status"] for c in first["tool_calls"])
    assert first["usage"] == {"input_tokens": 250, "output_tokens": 50, "total_tokens": 300,
                              "cached_tokens": 160, "reasoning_tokens": 12}
    assert second["usage"] == {"input_tokens": 200, "output_tokens": 40, "total_tokens": 240,
                               "reasoning_tokens": 8}
    assert second["guard"] == {"guard": "max_iterations", "reason": "max_iterations",
                               "limit": 2, "value": 2}
    assert state["usage"] == {"input_tokens": 450, "output_tokens": 90, "total_tokens": 540,
                              "cached_tokens": 160, "reasoning_tokens": 20}
    assert all(r["duration_s"] >= 0 for r in state["iterations"])
    # the continuation message carries the predicate's feedback
    assert model.requests[2][-1].name == "loop_continue"
    assert "Feedback on your last answer: say more" in str(model.requests[2][-1].content)


def test_record_of_a_limit_stop_names_the_guard(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=lambda _m: [("search", {"q": "x"})],
                              no_tools_reply=ai("final", inp=5, out=5))
    scripted.append(model)
    agent = create_loop_agent(model, [search], limits=Limits(max_tool_calls=2),
                              loop_detection=None)
    state = agent.invoke({"messages": [HumanMessage("go")]})
    assert state["stop_reason"] == StopReason.MAX_TOOL_CALLS
    (record,) = state["iterations"]
    assert record["guard"] == {"guard": "limits", "reason": "max_tool_calls", "limit": 2,
                               "value": 2}
    assert record["model_calls"] == 3  # two tool rounds and the final answer call
    assert [c["status"] for c in record["tool_calls"]] == ["success", "success"]
