"""Concurrency: 50 threads driven at once on one compiled graph, on PostgreSQL.

Every thread runs the same story with its own tag: a call, the same call again (a
loop warning is queued, naming the thread's arguments), a parallel batch of two
calls (run as per-call tasks: a checkpointer is present), then an answer. The runs
share one compiled graph, one model object and one connection pool, driven by 50 OS
threads (``invoke``) or 50 asyncio tasks (``ainvoke``). Afterwards each thread's
stored state holds exactly its own messages, warning, tool results and counters, and
every request the model received mixes no two threads.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_loop import LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.messages import LOOP_NOTICE
from langgraph_loop.core.state import executed_calls
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.postgres import fresh_database

THREADS = 50
POOL = {"min_size": 4, "max_size": 16, "timeout": 120,
        "kwargs": {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}}
RAN: dict[int, list[int]] = defaultdict(list)
LOCK = threading.Lock()


@tool
def mark(thread: int, step: int) -> str:
    """Record one unit of work of a thread."""
    with LOCK:
        RAN[thread].append(step)
    return f"T{thread} step {step} done"


def tag_of(messages: list[BaseMessage]) -> int:
    first = next(m for m in messages if isinstance(m, HumanMessage))
    match = re.fullmatch(r"Task for T(\d+)\.", str(first.content))
    assert match, first.content
    return int(match.group(1))


def reply(messages: list[BaseMessage]) -> Any:
    """Each thread's story, decided by its own transcript."""
    i = tag_of(messages)
    n = sum(isinstance(m, AIMessage) for m in messages)
    story: list[Any] = [
        [("mark", {"thread": i, "step": 0})],
        [("mark", {"thread": i, "step": 0})],
        [("mark", {"thread": i, "step": 1}), ("mark", {"thread": i, "step": 2})],
        f"Done with T{i}.",
    ]
    return story[n]


def build(checkpointer: Any) -> tuple[Any, ScriptedChatModel]:
    RAN.clear()
    model = ScriptedChatModel(default=reply)
    agent = create_loop_agent(model, [mark], checkpointer=checkpointer,
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)))
    return agent, model


def _cfg(i: int) -> RunnableConfig:
    return {"configurable": {"thread_id": f"thread-{i}"}}


def _task(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"Task for T{i}.")]}


def check_thread(i: int, result: dict[str, Any], stored: dict[str, Any]) -> None:
    """Thread ``i`` holds its own story and nothing of any other thread."""
    for values in (result, stored):
        messages = values["messages"]
        assert values["stop_reason"] == "completed"
        assert [m.type + (f":{m.name}" if m.name else "") for m in messages] == [
            "human", "ai", "tool:mark", "ai", "tool:mark", f"human:{LOOP_NOTICE}", "ai", "tool:mark",
            "tool:mark", "ai"]
        others = {int(t) for m in messages for t in re.findall(r"T(\d+)", str(m.content))}
        assert others == {i}
        tool_results = [m.content for m in messages if isinstance(m, ToolMessage)]
        assert tool_results == [f"T{i} step 0 done"] * 2 + [f"T{i} step 1 done", f"T{i} step 2 done"]
        (warning,) = [m for m in messages if m.type == "human" and m.name == LOOP_NOTICE]
        assert f'"thread":{i}' in str(warning.content).replace(" ", "")
        assert values["loop_notices"] == []
        (record,) = values["iterations"]
        assert [c["args"]["thread"] for c in record["tool_calls"]] == [i] * 4
        assert record["model_calls"] == 4
        usage = sum(m.usage_metadata["total_tokens"] for m in messages if isinstance(m, AIMessage))
        assert values["usage"]["total_tokens"] == usage
    assert executed_calls(stored) == 4
    assert sorted(RAN[i]) == [0, 0, 1, 2]


def check_requests(model: ScriptedChatModel) -> None:
    """No request mixed two threads; each thread made exactly its four calls."""
    per_thread: dict[int, int] = defaultdict(int)
    for request in model.requests:
        tags = {int(t) for m in request for t in re.findall(r"T(\d+)", str(m.content))}
        assert len(tags) == 1, tags
        per_thread[tags.pop()] += 1
    assert per_thread == dict.fromkeys(range(THREADS), 4)


def test_fifty_threads_at_once_sync(pg_server: str, scripted: list[ScriptedChatModel]) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with ConnectionPool(fresh_database(pg_server), **POOL) as pool:  # type: ignore[arg-type]
        saver = PostgresSaver(pool)  # type: ignore[arg-type]
        saver.setup()
        agent, model = build(saver)
        scripted.append(model)
        barrier = threading.Barrier(THREADS)

        def run(i: int) -> dict[str, Any]:
            barrier.wait()  # all 50 start together
            return agent.invoke(_task(i), _cfg(i))  # type: ignore[no-any-return]

        with ThreadPoolExecutor(max_workers=THREADS) as workers:
            results = list(workers.map(run, range(THREADS)))
        for i, result in enumerate(results):
            check_thread(i, result, agent.get_state(_cfg(i)).values)
    check_requests(model)


@pytest.mark.asyncio
async def test_fifty_threads_at_once_async(pg_server: str,
                                           scripted: list[ScriptedChatModel]) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncConnectionPool(fresh_database(pg_server), open=False,
                                   **POOL) as pool:  # type: ignore[arg-type]
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        agent, model = build(saver)
        scripted.append(model)
        results = await asyncio.gather(*(agent.ainvoke(_task(i), _cfg(i)) for i in range(THREADS)))
        for i, result in enumerate(results):
            check_thread(i, result, (await agent.aget_state(_cfg(i))).values)
    check_requests(model)
