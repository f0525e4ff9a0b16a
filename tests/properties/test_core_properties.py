"""Property test: random scripted behaviours and limits never break the invariants.

Every request is provider-valid, the stored thread is provider-valid, every run ends
with a stop reason, the tool-call cap holds, and counters match the records.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_loop import Iterations, Limits, LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.messages import check_pairing
from langgraph_loop.engine.limits import NO_ANSWER_KIND
from langgraph_loop.scripted import ScriptedChatModel, repeat
from tests import helpers
from tests.helpers import add, boom

_ids = iter(range(10**9))


def _call(kind: str, a: int) -> dict[str, Any]:
    name = {"add": "add", "boom": "boom", "unknown": "nope", "badargs": "add"}[kind]
    args: dict[str, Any] = {"a": a, "b": 1} if kind == "add" else {}
    if kind == "badargs":
        args = {"a": "not a number"}
    return {"name": name, "args": args, "id": f"p{next(_ids)}", "type": "tool_call"}


@st.composite
def replies(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "calls", "calls", "malformed"]))
    if kind == "text":
        return draw(st.sampled_from(["done", "all good", ""]))
    if kind == "malformed":
        return AIMessage("", invalid_tool_calls=[{"name": "add", "args": "{", "id":
                         f"p{next(_ids)}", "error": "bad", "type": "invalid_tool_call"}])
    kinds = draw(st.lists(st.sampled_from(["add", "add", "boom", "unknown", "badargs"]),
                          min_size=1, max_size=3))
    a = draw(st.integers(0, 2))
    return AIMessage("", tool_calls=[_call(k, a) for k in kinds])


configs = st.fixed_dictionaries({
    "max_model_calls": st.one_of(st.none(), st.integers(1, 6)),
    "max_tool_calls": st.one_of(st.none(), st.integers(1, 5)),
    "token_budget": st.one_of(st.none(), st.integers(30, 600)),
    "final_answer": st.booleans(),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(replies(), max_size=8), limits=configs,
       detection=st.booleans(), recursion=st.integers(2, 60),
       runaway=st.booleans())
def test_invariants_hold_for_random_behaviour(script: list[Any], limits: dict[str, Any],
                                              detection: bool, recursion: int,
                                              runaway: bool) -> None:
    helpers.EXECUTED.clear()
    default = repeat([("add", {"a": 9, "b": 9})]) if runaway else "final"
    model = ScriptedChatModel(script=list(script), default=default)
    per_iteration = limits.pop("max_model_calls")
    agent = create_loop_agent(
        model, [add, boom], limits=Limits(**limits),
        loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)) if detection else None,
        iterations=Iterations(max=None if runaway else 3, max_model_calls=per_iteration),
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": recursion})
    for request in model.requests:
        assert not check_pairing(request), check_pairing(request)
    assert not check_pairing(result["messages"])
    assert result["stop_reason"] is not None
    assert result["loop_notices"] == []
    if limits["max_tool_calls"] is not None:
        assert len(helpers.EXECUTED) <= limits["max_tool_calls"]
    ais = [m for m in result["messages"] if isinstance(m, AIMessage)]
    # The loop writes one reply itself only when no final answer fits, and only as the last message.
    written = [m for m in ais if m.additional_kwargs.get("langgraph_loop", {}).get("kind") == NO_ANSWER_KIND]
    assert written in ([], result["messages"][-1:])
    assert len(ais) - len(written) == model.calls
    assert result["usage"]["total_tokens"] == sum(m.usage_metadata["total_tokens"] for m in ais)
    assert len(result["iterations"]) == result["iteration"]
    assert sum(r["model_calls"] for r in result["iterations"]) == model.calls
