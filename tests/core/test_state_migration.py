"""Threads written by 0.2.0 keep working under 0.4, which reads none of 0.2's per-run keys.

``tests/data/thread_0_2.sqlite`` was written by langgraph-loop 0.2.0 with
``SqliteSaver``: thread ``paused`` looked up ``a`` (one tool round) and then asked for the
gated ``delete_file``, pausing at the approval interrupt after two model calls of its
first iteration; thread ``done`` finished a two-iteration run (a predicate asked for one
more). The test copies the file and continues both threads with this version. A new run on
a stored thread is translated once by ``core/upgrade.py``; a run 0.2 left paused resumes
without its ``pass_info`` (the iteration's counters restart at the resume).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import Approval, StopReason, create_loop_agent
from langgraph_loop.core.messages import check_pairing
from langgraph_loop.scripted import ScriptedChatModel

STORED = Path(__file__).resolve().parents[1] / "data" / "thread_0_2.sqlite"
RAN: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    RAN.append(f"delete_file({path})")
    return f"deleted {path}"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append(f"lookup({key})")
    return f"value of {key}"


def _saver(tmp_path: Path) -> SqliteSaver:
    copy = tmp_path / "threads.sqlite"
    shutil.copy(STORED, copy)
    return SqliteSaver(sqlite3.connect(copy, check_same_thread=False))


def test_a_thread_paused_by_0_2_resumes_and_its_iteration_counts_restart(tmp_path: Path) -> None:
    RAN.clear()
    model = ScriptedChatModel(script=["deleted it"])
    agent = create_loop_agent(model, [delete_file, lookup], checkpointer=_saver(tmp_path),
                              approval=Approval(tools=["delete_file"]))
    config = {"configurable": {"thread_id": "paused"}}
    stored = agent.get_state(config)
    assert stored.next == ("approval",) and "pass_info" not in stored.values  # 0.4 reads none
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert RAN == ["delete_file(/tmp/x)"]
    assert result["stop_reason"] == StopReason.COMPLETED
    # the iteration that 0.2 started goes on; 0.2's count of its two model calls is not read
    assert [r["model_calls"] for r in result["iterations"]] == [1]
    assert [c["name"] for c in result["iterations"][0]["tool_calls"]] == ["lookup", "delete_file"]
    assert result["messages"][-1].content == "deleted it"
    assert not check_pairing(result["messages"])


def test_a_thread_finished_by_0_2_takes_a_new_run(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[[("lookup", {"key": "c"})], "c is 3"])
    agent = create_loop_agent(model, [lookup], checkpointer=_saver(tmp_path))
    config = {"configurable": {"thread_id": "done"}}
    assert agent.get_state(config).values["iteration"] == 2
    result = agent.invoke({"messages": [HumanMessage("and c?")]}, config)
    assert result["stop_reason"] == StopReason.COMPLETED and result["iteration"] == 1
    assert [r["model_calls"] for r in result["iterations"]] == [2]
    assert [m.content for m in model.requests[0][:2]] == ["look up b", ""]  # the old transcript
    assert result["messages"][-1].content == "c is 3"
    assert not check_pairing(result["messages"])
