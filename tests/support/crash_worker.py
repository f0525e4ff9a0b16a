"""A child process for tests/e2e/test_crash.py: run a thread until the parent kills it, or resume it.

Usage: ``python -m tests.support.crash_worker PHASE BACKEND TARGET MODE WORKDIR``

- PHASE ``start`` runs the task; PHASE ``resume`` continues the stored thread
  (``invoke(None)``) and prints one JSON line with what the finished run holds.
- BACKEND/TARGET: ``sqlite`` + a file path, or ``postgres`` + a connection URI.
- MODE: ``sync`` (``invoke`` on a sync saver) or ``async`` (``ainvoke`` on an async saver).

The story: the model asks for ``work(0..N-1)`` in parallel, then asks for the very
same batch again (the loop detector queues a repeat warning), then answers. The
``work`` tool appends ``start i`` and ``done i`` to ``WORKDIR/effects.log``. In the
second batch, calls ``i >= WORKDIR/fast`` block until ``WORKDIR/release`` exists: the
parent kills this process (SIGKILL) while they block, once the first ones finished.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from langgraph_loop import LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.messages import check_pairing, is_notice, newest_reply
from langgraph_loop.core.state import executed_calls
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.savers import async_saver, sync_saver

WORKDIR = Path(".")  # set by main()
N = 4
THREAD: RunnableConfig = {"configurable": {"thread_id": "crash-1"}}


def log(line: str) -> None:
    """Append one line to the effects log (flushed at once: the parent polls it)."""
    with (WORKDIR / "effects.log").open("a") as out:
        out.write(line + "\n")


def effects(workdir: Path) -> list[str]:
    """The effects log as lines."""
    path = workdir / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


@tool
def work(i: int) -> str:
    """Do unit of work number i."""
    earlier = effects(WORKDIR).count(f"done {i}")
    log(f"start {i}")
    fast = int((WORKDIR / "fast").read_text())
    if earlier and i >= fast:  # the second batch: the slow calls wait for the parent
        while not (WORKDIR / "release").exists():
            time.sleep(0.01)
    if (WORKDIR / "pause").exists():  # spread the calls out (random kill points)
        time.sleep(float((WORKDIR / "pause").read_text()) * (i + 1))
    log(f"done {i}")
    return f"result {i}"


def reply(messages: list[BaseMessage]) -> Any:
    """Decided by the transcript, so any process can continue the thread."""
    batch = [("work", {"i": i}) for i in range(N)]
    n = sum(isinstance(m, AIMessage) for m in messages)
    return [batch, batch, "All done."][min(n, 2)]


def build(checkpointer: Any) -> Any:
    model = ScriptedChatModel(default=reply)
    return create_loop_agent(model, [work], checkpointer=checkpointer,
                             loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)))


def saved_results(backend: str, target: str) -> int:
    """How many task results the newest checkpoint of the thread holds (for the parent)."""
    with sync_saver(backend, target) as saver:
        saved = saver.get_tuple(THREAD)
        if saved is None:
            return 0
        return sum(1 for _task, channel, _value in saved.pending_writes or []
                   if channel == "__return__")


def left_to_run(backend: str, target: str) -> int:
    """After a crash: how many calls a resume must still execute (for the parent).

    The stored thread's unanswered calls minus those with a saved task result, plus
    the calls of the batches the model has not asked for yet.
    """
    with sync_saver(backend, target) as saver:
        values = build(saver).get_state(THREAD).values
    messages = values.get("messages") or []
    pending = newest_reply(messages).pending
    asked = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    saved = saved_results(backend, target) if pending else 0
    return len(pending) - saved + N * (2 - asked)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """What the finished run holds."""
    messages = result["messages"]
    return {
        "stop_reason": result.get("stop_reason"),
        "problems": check_pairing(messages),
        "messages": [m.type + (f":{m.name}" if m.name else "") for m in messages],
        "tool_results": [m.content for m in messages if isinstance(m, ToolMessage)],
        "warnings": [m.content for m in messages
                     if is_notice(m)],
        "records": [len(r["tool_calls"]) for r in result.get("iterations") or []],
        "loop_notices": result.get("loop_notices"),
        "usage": result["usage"]["total_tokens"],
        "usage_of_messages": sum((m.usage_metadata or {}).get("total_tokens", 0)
                                 for m in messages if isinstance(m, AIMessage)),
    }


REQUEST = {"messages": [HumanMessage("Do the work.")]}
"""The run's input. A resume sends None, as a user continuing a thread does; if the kill came
before any checkpoint was written (``durability="async"`` writes them while the next step runs),
there is no thread to continue and it sends the input again, as that user would."""


def run_sync(phase: str, backend: str, target: str) -> dict[str, Any]:
    with sync_saver(backend, target) as saver:
        agent = build(saver)
        saved = phase != "start" and agent.get_state(THREAD).created_at is not None
        result = agent.invoke(None if saved else REQUEST, THREAD)
        out = report(result)
        out["run_tool_calls"] = executed_calls(agent.get_state(THREAD).values)
        return out


async def run_async(phase: str, backend: str, target: str) -> dict[str, Any]:
    async with async_saver(backend, target) as saver:
        agent = build(saver)
        saved = phase != "start" and (await agent.aget_state(THREAD)).created_at is not None
        result = await agent.ainvoke(None if saved else REQUEST, THREAD)
        out = report(result)
        state = await agent.aget_state(THREAD)
        out["run_tool_calls"] = executed_calls(state.values)
        return out


def main(phase: str, backend: str, target: str, mode: str, workdir: str) -> None:
    global WORKDIR  # noqa: PLW0603 - one process, one story
    WORKDIR = Path(workdir)
    if mode == "sync":
        out = run_sync(phase, backend, target)
    else:
        out = asyncio.run(run_async(phase, backend, target))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
