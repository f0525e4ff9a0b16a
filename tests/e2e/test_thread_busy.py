"""Two runs at once on one thread (issue 31.7): within a process the second is refused with
``ThreadBusyError`` before it runs or writes anything, the first finishes, and the stored
history stays provider-valid (two SQLite runs once interleaved an unanswered call into it);
the thread then takes the next run. Threads, and async tasks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langgraph_loop import create_loop_agent
from langgraph_loop.core.history import ThreadBusyError
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread, thread


class Gate:
    """The first model call waits until the test lets it go."""

    def __init__(self) -> None:
        self.entered, self.go = threading.Event(), threading.Event()

    def call(self, messages: list[BaseMessage]) -> Any:
        self.entered.set()
        assert self.go.wait(10)
        return [("add", {"a": 1, "b": 2})]


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as s:
        yield s


def test_a_second_run_on_a_busy_thread_is_refused_and_the_thread_stays_valid(
        saver: SqliteSaver) -> None:
    gate = Gate()
    model = ScriptedChatModel(script=[gate.call, "3", "Hello."])
    agent = create_loop_agent(model, [add], checkpointer=saver)
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(
        agent.invoke({"messages": [HumanMessage("1+2?")]}, thread("busy"))))
    first.start()
    assert gate.entered.wait(10)
    with pytest.raises(ThreadBusyError, match="thread 'busy' already has a run in progress"):
        agent.invoke({"messages": [HumanMessage("and 2+2?")]}, thread("busy"))
    other = create_loop_agent(ScriptedChatModel(script=["fine"]), [add], checkpointer=saver)
    assert other.invoke({"messages": [HumanMessage("hi")]}, thread("idle"))["messages"][-1].content == "fine"
    gate.go.set()
    first.join(10)
    assert results[0]["messages"][-1].content == "3"
    stored = agent.get_state(thread("busy")).values["messages"]
    assert "and 2+2?" not in [m.content for m in stored]  # nothing of the refused run
    assert_valid_thread(stored)
    state = agent.invoke({"messages": [HumanMessage("and now?")]}, thread("busy"))
    assert state["messages"][-1].content == "Hello."  # the thread takes the next run


async def test_the_same_for_two_async_runs(tmp_path: Path) -> None:
    gate = asyncio.Event()

    class Slow(ScriptedChatModel):
        async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            await gate.wait()
            return await super()._agenerate(messages, *args, **kwargs)

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        agent = create_loop_agent(Slow(script=["3", "Hello."]), [add], checkpointer=saver)
        first = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("1+2?")]},
                                                  thread("abusy")))
        await asyncio.sleep(0.2)
        with pytest.raises(ThreadBusyError):
            await agent.ainvoke({"messages": [HumanMessage("again")]}, thread("abusy"))
        gate.set()
        assert (await first)["messages"][-1].content == "3"
        assert (await agent.ainvoke({"messages": [HumanMessage("now")]}, thread("abusy"))
                )["messages"][-1].content == "Hello."
        assert_valid_thread((await agent.aget_state(thread("abusy"))).values["messages"])


def test_a_stream_left_unfinished_and_dropped_frees_the_thread(saver: SqliteSaver) -> None:
    agent = create_loop_agent(ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], "3", "ok"]),
                              [add], checkpointer=saver)
    for _ in agent.stream({"messages": [HumanMessage("1+2?")]}, thread("drop")):
        break  # the generator is dropped here
    assert agent.invoke(None, thread("drop"))["messages"][-1].content == "3"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_stream_left_with_break_does_not_block_the_next_message(mode: str) -> None:
    """Issue 40.12: the reader leaves the stream after its first chunk and sends the next message
    at once. A sync generator is closed right there; an async one by the event loop a turn or two
    later, and the next message waits for that close instead of being refused."""
    script = [[("add", {"a": 1, "b": 2})], "3", "Hello again."]
    model = ScriptedChatModel(script=script)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    first = {"messages": [HumanMessage("1+2?")]}
    if mode == "sync":
        for _ in agent.stream(first, thread("left")):
            break
    else:
        async for _ in agent.astream(first, thread("left")):
            break
    state = await agent.ainvoke({"messages": [HumanMessage("hello?")]}, thread("left"))
    stored = (await agent.aget_state(thread("left"))).values["messages"]
    assert state["messages"][-1].content == "3"  # the model's next reply, to the new message
    assert [m.content for m in stored if m.type == "human"] == ["1+2?", "hello?"]
    assert_valid_thread(stored)
    assert len(model.requests) == 2
