"""End-to-end behaviour of the core loop: exact requests, stop reasons, pairing."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import Iterations, Limits, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel, repeat
from tests import helpers
from tests.helpers import add, assert_valid_thread, boom, remember, thread, types


def test_react_pass_with_parallel_tools_and_a_failing_tool(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2}), ("boom", {}),
                                       ("add", {"a": 3, "b": 4})], "1+2=3 and 3+4=7."])
    scripted.append(model)
    result = create_loop_agent(model, [add, boom]).invoke({"messages": [HumanMessage("sum")]})
    assert types(model.requests[1]) == ["human", "ai+calls", "tool:success", "tool:error",
                                        "tool:success"]
    tool_messages = model.requests[1][2:]
    assert [m.content for m in tool_messages] == [
        "3", "Error: the tool raised RuntimeError: kaput", "7"]
    assert [m.tool_call_id for m in tool_messages] == [
        c["id"] for c in model.requests[1][1].tool_calls]
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["messages"][-1].content == "1+2=3 and 3+4=7."
    record = result["iterations"][0]
    assert record["iteration"] == 1 and record["model_calls"] == 2
    assert [(c["name"], c["status"]) for c in record["tool_calls"]] == [
        ("add", "success"), ("boom", "error"), ("add", "success")]
    assert set(record["tool_calls"][0]) == {"name", "args", "status", "duration_s"}
    ais = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert result["usage"]["total_tokens"] == sum(m.usage_metadata["total_tokens"] for m in ais)
    assert record["usage"] == result["usage"]


def test_unknown_tool_invalid_args_and_malformed_json_become_error_messages(scripted: list) -> None:
    broken = AIMessage("", tool_calls=[
        {"name": "nope", "args": {}, "id": "c1"},
        {"name": "add", "args": {"a": "x"}, "id": "c2"},
    ], invalid_tool_calls=[{"name": "add", "args": '{"a": 1,', "id": "c3", "error": "bad JSON",
                            "type": "invalid_tool_call"}])
    model = ScriptedChatModel(script=[broken, "sorry"])
    scripted.append(model)
    result = create_loop_agent(model, [add]).invoke({"messages": [HumanMessage("go")]})
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["c1", "c2", "c3"]
    assert all(m.status == "error" for m in answers)
    assert answers[0].content == "Error: unknown tool 'nope'. Available tools: add."
    assert answers[1].content.startswith("Error invoking tool 'add' with kwargs")  # ToolNode's text
    assert "not valid JSON (bad JSON)" in answers[2].content
    assert result["stop_reason"] == StopReason.COMPLETED
    assert_valid_thread(result["messages"])


def test_runaway_model_stopped_by_model_call_limit_with_final_answer(scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]),
                              no_tools_reply="Final: 2")
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=None, iterations=Iterations(max_model_calls=3))
    result = agent.invoke({"messages": [HumanMessage("loop")]})
    assert result["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert model.calls == 4
    assert model.request_tools[:3] == [["add"]] * 3 and model.request_tools[3] == []
    last = model.requests[3]
    assert types(last[-3:]) == ["ai+calls", "tool:error", "human:stop_notice"]
    assert "model-call limit" in last[-2].content and "final answer" in last[-1].content
    assert result["messages"][-1].content == "Final: 2"
    assert result["iterations"][-1]["guard"]["reason"] == "max_model_calls"
    assert_valid_thread(result["messages"])


def test_final_answer_that_still_calls_tools_is_not_executed(scripted: list) -> None:
    helpers.EXECUTED.clear()
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]))
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=None, iterations=Iterations(max_model_calls=2))
    result = agent.invoke({"messages": [HumanMessage("loop")]})
    assert helpers.EXECUTED == ["add(1,1)"]
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and final.tool_calls == []
    assert final.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"] == "add"
    assert_valid_thread(result["messages"])


def test_final_answer_off_ends_without_another_model_call(scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]))
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=None,
                              iterations=Iterations(max_model_calls=2), limits=Limits(final_answer=False))
    result = agent.invoke({"messages": [HumanMessage("loop")]})
    assert model.calls == 2
    assert types(result["messages"])[-2:] == ["ai+calls", "tool:error"]
    assert result["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert result["loop_notices"] == []


def test_max_tool_calls_caps_executions_and_stops(scripted: list) -> None:
    helpers.EXECUTED.clear()
    model = ScriptedChatModel(script=[
        [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})],
        [("add", {"a": 3, "b": 3}), ("add", {"a": 4, "b": 4})],
        "wrapped up",
    ])
    scripted.append(model)
    agent = create_loop_agent(model, [add], limits=Limits(max_tool_calls=3))
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert sorted(helpers.EXECUTED) == ["add(1,1)", "add(2,2)", "add(3,3)"]  # parallel calls
    refused = result["messages"][-3]
    assert refused.status == "error" and "tool call limit" in refused.content
    assert result["stop_reason"] == StopReason.MAX_TOOL_CALLS
    assert model.request_tools[-1] == []
    assert result["messages"][-1].content == "wrapped up"
    assert_valid_thread(result["messages"])


def test_token_budget_exceeded_stops_at_once(scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]),
                              no_tools_reply="out of budget")
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=None, limits=Limits(token_budget=300))
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    assert result["messages"][-1].content == "out of budget"
    assert result["usage"]["total_tokens"] <= 300
    assert_valid_thread(result["messages"])


def test_time_cap_stops_between_steps(scripted: list) -> None:
    @tool
    def slow() -> str:
        """Takes a while: longer than the cap (the first model step takes far less, even on a
        loaded machine)."""
        time.sleep(0.6)
        return "done"

    model = ScriptedChatModel(default=repeat([("slow", {})]), no_tools_reply="time is up")
    scripted.append(model)
    agent = create_loop_agent(model, [slow], loop_detection=None,
                              limits=Limits(max_duration_s=0.5))
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == StopReason.TIMEOUT
    assert model.calls == 2 and model.request_tools[1] == []
    assert_valid_thread(result["messages"])


@pytest.mark.parametrize("limit", range(2, 30))  # LangGraph cannot run any node at 1
def test_recursion_limit_never_raises(limit: int, scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]), no_tools_reply="ok")
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=None,
                              iterations=Iterations(max_model_calls=None, max=None))
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": limit})
    assert result["stop_reason"] == StopReason.STEP_LIMIT
    assert_valid_thread(result["messages"])


def test_tool_returning_command_updates_state(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("remember", {"fact": "research"})], "ok"])
    scripted.append(model)
    result = create_loop_agent(model, [remember]).invoke({"messages": [HumanMessage("go")]})
    assert result["mode"] == "research"
    tool_message = result["messages"][2]
    assert tool_message.content == "remembered research"
    assert tool_message.tool_call_id == result["messages"][1].tool_calls[0]["id"]


def test_model_error_is_retried_then_succeeds(scripted: list) -> None:
    model = ScriptedChatModel(script=[ConnectionError("reset by peer"), "fine"])
    scripted.append(model)
    result = create_loop_agent(model).invoke({"messages": [HumanMessage("hi")]})
    assert result["messages"][-1].content == "fine" and model.calls == 2


def test_model_error_propagates_and_thread_stays_resumable(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], ValueError("bad request")])
    scripted.append(model)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="bad request"):
        agent.invoke({"messages": [HumanMessage("go")]}, thread("t"))
    snapshot = agent.get_state(thread("t"))
    assert snapshot.next == ("model",)
    assert_valid_thread(snapshot.values["messages"])
    model.script.append("recovered")
    result = agent.invoke(None, thread("t"))
    assert result["messages"][-1].content == "recovered"
    assert result["stop_reason"] == StopReason.COMPLETED


def test_several_runs_on_one_thread_reset_per_run_counters(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], "three", "second answer"])
    scripted.append(model)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    first = agent.invoke({"messages": [HumanMessage("1+2")]}, thread("t"))
    second = agent.invoke({"messages": [HumanMessage("again")]}, thread("t"))
    assert len(second["messages"]) == len(first["messages"]) + 2
    assert second["iteration"] == 1 and len(second["iterations"]) == 1
    assert second["iterations"][0]["model_calls"] == 1
    assert second["usage"] == second["iterations"][0]["usage"]
    assert types(model.requests[2]) == ["human", "ai+calls", "tool:success", "ai", "human"]


def test_invalid_configuration_is_a_clear_error() -> None:
    model = ScriptedChatModel()
    with pytest.raises(ValueError, match="iterations: max"):
        create_loop_agent(model, iterations={"max": 0})
    with pytest.raises(TypeError, match="unknown arguments"):
        create_loop_agent(model, max_iteration=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="max_tool_calls"):
        Limits(max_tool_calls=0)
    with pytest.raises(ValueError, match="duplicate tool names"):
        create_loop_agent(model, [add, add])


async def test_async_run_matches_sync(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 2})],
                                      "3 and 4"])
    scripted.append(model)
    result = await create_loop_agent(model, [add]).ainvoke({"messages": [HumanMessage("x")]})
    assert types(result["messages"]) == ["human", "ai+calls", "tool:success", "tool:success", "ai"]
    assert [m.content for m in result["messages"][2:4]] == ["3", "4"]
    assert result["stop_reason"] == StopReason.COMPLETED
