"""The process ``test_crash_recovery`` kills: a thread in the middle of a parallel batch.

Usage: ``python -m tests.faults.crash_batch_worker DB WORKDIR``

The model asks for ``work(0..N-1)`` in parallel, then answers ``"All done."``. The ``work``
tool appends ``start i`` and ``done i`` to ``WORKDIR/effects.log``; calls ``i >= FAST``
block until ``WORKDIR/release`` exists, so the parent can SIGKILL this process once the
first ``FAST`` results are saved (SQLite file ``DB``) while the others still run.
The parent builds the same agent in-process (``build``) to continue the thread.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.savers import sync_saver

N = 3
FAST = 2
THREAD: RunnableConfig = {"configurable": {"thread_id": "crash"}}


def effects(workdir: Path) -> list[str]:
    """The effects log as lines."""
    path = workdir / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def build(checkpointer: Any, workdir: Path) -> tuple[Any, ScriptedChatModel]:
    """The agent and its model; decided by the transcript, so any process can continue."""

    def log(line: str) -> None:
        with (workdir / "effects.log").open("a") as out:
            out.write(line + "\n")

    @tool
    def work(i: int) -> str:
        """Do unit of work number i."""
        log(f"start {i}")
        while i >= FAST and not (workdir / "release").exists():
            time.sleep(0.01)
        log(f"done {i}")
        return f"result {i}"

    def reply(messages: list[BaseMessage]) -> Any:
        if any(isinstance(m, AIMessage) for m in messages):
            return "All done."
        return [("work", {"i": i}) for i in range(N)]

    model = ScriptedChatModel(default=reply)
    return create_loop_agent(model, [work], checkpointer=checkpointer), model


def saved_results(db: Path) -> int:
    """How many task results the newest checkpoint of the thread holds (``__return__``
    writes of the per-call tasks; LangGraph's checkpointer API)."""
    if not db.exists():
        return 0
    try:
        with sync_saver("sqlite", str(db)) as saver:
            saved = saver.get_tuple(THREAD)
    except sqlite3.OperationalError:  # the child is creating the tables right now
        return 0
    if saved is None:
        return 0
    return sum(1 for _task, channel, _value in saved.pending_writes or []
               if channel == "__return__")


def main(db: str, workdir: str) -> None:
    with sync_saver("sqlite", db) as saver:
        agent, _ = build(saver, Path(workdir))
        agent.invoke({"messages": [HumanMessage("Do the work.")]}, THREAD)


if __name__ == "__main__":
    main(*sys.argv[1:3])
