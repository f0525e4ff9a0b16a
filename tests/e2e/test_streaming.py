"""Every way of running works: invoke, ainvoke, stream/astream with each stream mode."""

from __future__ import annotations

from langchain_core.messages import AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import Limits, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel, repeat
from tests.helpers import add, thread


def _agent(model: ScriptedChatModel, **kw: object):  # type: ignore[no-untyped-def]
    return create_loop_agent(model, [add], **kw)  # type: ignore[arg-type]


def test_stream_updates_names_each_node_in_order(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 1})], "two"])
    scripted.append(model)
    nodes = [next(iter(part)) for part in _agent(model).stream(
        {"messages": [HumanMessage("1+1")]}, stream_mode="updates")]
    assert nodes == ["prepare", "model", "tools", "model", "router"]


def test_stream_values_ends_with_the_final_state(scripted: list) -> None:
    model = ScriptedChatModel(script=["hello"])
    scripted.append(model)
    states = list(_agent(model).stream({"messages": [HumanMessage("hi")]}, stream_mode="values"))
    assert states[-1]["stop_reason"] == StopReason.COMPLETED
    assert states[-1]["messages"][-1].content == "hello"


def test_stream_messages_yields_model_tokens(scripted: list) -> None:
    model = ScriptedChatModel(script=["the answer is forty two"])
    scripted.append(model)
    chunks = [(msg, meta) for msg, meta in _agent(model).stream(
        {"messages": [HumanMessage("q")]}, stream_mode="messages")
        if isinstance(msg, AIMessageChunk)]
    assert "".join(str(m.content) for m, _ in chunks) == "the answer is forty two"
    assert len(chunks) >= 5
    assert {meta["langgraph_node"] for _, meta in chunks} == {"model"}


def test_stream_custom_reports_tool_calls_and_the_stop(scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]), no_tools_reply="ok")
    scripted.append(model)
    agent = _agent(model, loop_detection=None, limits=Limits(max_model_calls=2))
    events = list(agent.stream({"messages": [HumanMessage("x")]}, stream_mode="custom"))
    kinds = [e["event"] for e in events]
    assert kinds.count("tool_call") == 1
    stop = next(e for e in events if e["event"] == "stop")
    assert stop["reason"] == "max_model_calls"


async def test_astream_with_checkpointer_and_two_runs(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 2, "b": 2})], "four", "bye"])
    scripted.append(model)
    agent = _agent(model, checkpointer=InMemorySaver())
    parts = [p async for p in agent.astream({"messages": [HumanMessage("2+2")]}, thread("a"),
                                            stream_mode=["updates", "custom"])]
    assert ("custom", {"event": "tool_call", "name": "add", "args": {"a": 2, "b": 2},
                       "status": "success", "iteration": 1}) in [
        (mode, {k: v for k, v in data.items() if k != "duration_s"})
        for mode, data in parts if mode == "custom"]
    result = await agent.ainvoke({"messages": [HumanMessage("bye?")]}, thread("a"))
    assert result["messages"][-1].content == "bye"
    assert result["iteration"] == 1
    history = [s async for s in agent.aget_state_history(thread("a"))]
    assert len(history) > 8
