"""The builder's retry rule and edges (``graph/builder.py``), once their doctests."""

from __future__ import annotations

from langchain_core.exceptions import ModelAuthenticationError, ModelRateLimitError
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_loop import Iterations, Limits, create_loop_agent
from langgraph_loop.builder import Routes, retryable
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.scripted import ScriptedChatModel


def test_retryable_as_the_exception_says() -> None:
    assert retryable(ModelAuthenticationError()) is False
    assert retryable(ModelRateLimitError()) is True


def test_after_model_goes_to_tools_router_or_detector() -> None:
    routes = Routes(LoopSettings.build(ScriptedChatModel()))
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1")
    assert routes.after_model({"messages": [ai], "run": {"id": "r"}}) == "tools"
    assert routes.after_model({"messages": [AIMessage("done")], "run": {"id": "r"}}) == "router"
    decided = {"messages": [ai], "run": {"id": "r", "decision": {"blocks": {}}}}
    assert routes.after_model(decided) == "loop_detector"  # type: ignore[arg-type]


def test_should_continue_runs_a_second_iteration_within_the_limits() -> None:
    agent = create_loop_agent(ScriptedChatModel(script=["draft", "final"]),
                              iterations=Iterations(max=3, should_continue=lambda s: s["iteration"] < 2),
                              limits=Limits(token_budget=50_000))
    result = agent.invoke({"messages": [HumanMessage("Write it.")]})
    assert (result["stop_reason"], result["iteration"]) == ("completed", 2)
