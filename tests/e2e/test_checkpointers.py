"""End to end on every checkpointer: in-memory, SQLite and PostgreSQL, sync and async.

The same scenario runs on each saver: three runs on one thread (tools, a loop
warning, a loop stop), then state, history, a reopened connection (for the savers
that persist), and time travel from an earlier checkpoint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import LoopDetection, Repeat, StopReason, create_loop_agent
from langgraph_loop.core.messages import check_pairing
from langgraph_loop.scripted import ScriptedChatModel

BACKENDS = ["memory", "sqlite", "postgres"]
CONFIG: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return {"Paris": "18°C", "Rome": "24°C"}.get(city, "unknown")


def script() -> list[Any]:
    """Run 1: a tool round; run 2: three identical calls (warning), then an answer;
    run 3: a runaway that the loop detector stops, then a tools-free answer."""
    paris = [("get_weather", {"city": "Paris"})]
    rome = [("get_weather", {"city": "Rome"})]
    return [paris, "Paris: 18°C.", rome, rome, rome, "Rome: 24°C.",
            paris, paris, paris, paris]


def new_model(scripted: list[ScriptedChatModel]) -> ScriptedChatModel:
    model = ScriptedChatModel(script=script(), no_tools_reply="Stopped: Paris is 18°C.")
    scripted.append(model)
    return model


def build(model: ScriptedChatModel, saver: BaseCheckpointSaver[Any]) -> Any:
    return create_loop_agent(model, [get_weather], checkpointer=saver,
                             loop_detection=LoopDetection(repeat=Repeat(warn_after=3, stop_after=4)))


@contextmanager
def sync_saver(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A sync checkpointer of ``kind``; a second ``with`` reopens the same storage."""
    if kind == "memory":
        yield request.getfixturevalue("memory_saver")
    elif kind == "sqlite":
        conn = sqlite3.connect(str(tmp_path / "threads.sqlite"), check_same_thread=False)
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver

            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(request.getfixturevalue("pg_db")) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def async_saver(kind: str, tmp_path: Path,
                      request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """An async checkpointer of ``kind``; a second ``async with`` reopens the storage."""
    if kind == "memory":
        yield request.getfixturevalue("memory_saver")
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "threads.sqlite")) as saver:
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        uri = request.getfixturevalue("pg_db")
        async with AsyncPostgresSaver.from_conn_string(uri) as saver:
            await saver.setup()
            yield saver


@pytest.fixture
def memory_saver() -> InMemorySaver:
    """One in-memory saver per test (``reopen`` gets the same object)."""
    return InMemorySaver()


def ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def check_runs(first: dict[str, Any], second: dict[str, Any], third: dict[str, Any],
               model: ScriptedChatModel) -> None:
    """What the three runs on one thread must have produced."""
    assert (first["stop_reason"], second["stop_reason"], third["stop_reason"]) == (
        StopReason.COMPLETED, StopReason.COMPLETED, StopReason.LOOP_DETECTED)
    assert [m.type for m in first["messages"]] == ["human", "ai", "tool", "ai"]
    # run 2 saw the whole of run 1, then got a warning after its third identical call
    assert [m.type for m in model.requests[2]] == ["human", "ai", "tool", "ai", "human"]
    warned = model.requests[5]
    assert [(m.type, m.name) for m in warned[-2:]] == [("tool", "get_weather"),
                                                      ("human", "loop_notice")]
    assert str(warned[-1].content).startswith('Loop warning: get_weather({"city":"Rome"})')
    # per-run keys start again; the transcript is kept
    assert second["iteration"] == 1
    assert len(second["messages"]) == 4 + 1 + 6 + 1 + 1
    run2_tokens = sum(m.usage_metadata["total_tokens"] for m in second["messages"][4:]
                      if m.type == "ai")
    assert second["usage"]["total_tokens"] == run2_tokens
    assert third["messages"][-1].content == "Stopped: Paris is 18°C."
    assert model.request_tools[-1] == []
    assert check_pairing(third["messages"]) == []


def check_history(history: list[Any], final: dict[str, Any]) -> None:
    """Newest first; the three run ends are checkpoints with their stop reasons."""
    assert history[0].values["messages"] == final["messages"]
    assert history[0].next == ()
    ends = [s for s in history if not s.next]
    assert [s.values["stop_reason"] for s in ends] == [
        StopReason.LOOP_DETECTED, StopReason.COMPLETED, StopReason.COMPLETED]
    assert [len(s.values["messages"]) for s in ends] == [len(final["messages"]), 13, 4]
    steps = [s.metadata["step"] for s in history]
    assert steps == sorted(steps, reverse=True)


@pytest.mark.parametrize("kind", BACKENDS)
def test_threads_sync(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
                      scripted: list[ScriptedChatModel]) -> None:
    model = new_model(scripted)
    with sync_saver(kind, tmp_path, request) as saver:
        agent = build(model, saver)
        first = agent.invoke(ask("Weather in Paris?"), CONFIG)
        second = agent.invoke(ask("And Rome?"), CONFIG)
        third = agent.invoke(ask("Keep checking Paris."), CONFIG)
        check_runs(first, second, third, model)
        check_history(list(agent.get_state_history(CONFIG)), third)
    with sync_saver(kind, tmp_path, request) as reopened:
        again = build(ScriptedChatModel(), reopened)
        state = again.get_state(CONFIG)
        assert state.values["messages"] == third["messages"]
        assert state.values["stop_reason"] == StopReason.LOOP_DETECTED
        assert again.get_state({"configurable": {"thread_id": "other"}}).values == {}


@pytest.mark.parametrize("kind", BACKENDS)
async def test_threads_async(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
                             scripted: list[ScriptedChatModel]) -> None:
    model = new_model(scripted)
    async with async_saver(kind, tmp_path, request) as saver:
        agent = build(model, saver)
        first = await agent.ainvoke(ask("Weather in Paris?"), CONFIG)
        second = await agent.ainvoke(ask("And Rome?"), CONFIG)
        third = await agent.ainvoke(ask("Keep checking Paris."), CONFIG)
        check_runs(first, second, third, model)
        check_history([s async for s in agent.aget_state_history(CONFIG)], third)
    async with async_saver(kind, tmp_path, request) as reopened:
        state = await build(ScriptedChatModel(), reopened).aget_state(CONFIG)
        assert state.values["messages"] == third["messages"]


@pytest.mark.parametrize("kind", BACKENDS)
def test_replay_and_fork_from_an_earlier_checkpoint(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest,
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[[("get_weather", {"city": "Paris"})], "Paris: 18°C.",
                                      "Rome it is: 24°C."])
    scripted.append(model)
    with sync_saver(kind, tmp_path, request) as saver:
        agent = build(model, saver)
        agent.invoke(ask("Weather in Paris?"), CONFIG)
        history = list(agent.get_state_history(CONFIG))
        before_answer = next(s for s in history if s.next == ("model",)
                             and [m.type for m in s.values["messages"]][-1] == "tool")
        # fork: rewrite the tool result at that checkpoint, then continue from the fork
        tool_message = before_answer.values["messages"][-1]
        edited = tool_message.model_copy(update={"content": "Moved to Rome: 24°C."})
        fork = agent.update_state(before_answer.config, {"messages": [edited]})
        state = agent.invoke(None, fork)
        assert state["messages"][-1].content == "Rome it is: 24°C."
        assert model.requests[-1][-1].content == "Moved to Rome: 24°C."
        assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
        assert state["stop_reason"] == StopReason.COMPLETED
        # the original branch is still in the history
        contents = {s.values["messages"][-1].content for s in agent.get_state_history(CONFIG)
                    if s.values.get("messages")}
        assert {"Paris: 18°C.", "Rome it is: 24°C."} <= contents
