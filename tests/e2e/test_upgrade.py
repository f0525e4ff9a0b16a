"""Issue 38, item 3: a thread 0.2 or 0.3 stored is read once, by one translator
(``core/upgrade.py``), when a run starts on it; no step reads their shapes after that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph_loop import Limits, StopReason, create_loop_agent, is_notice
from langgraph_loop.core.upgrade import translated
from langgraph_loop.scripted import ScriptedChatModel

OLD_NOTICE = "Loop warning: you called search with the same arguments 3 times."


def search(q: str) -> str:
    """Search."""
    return f"found {q}"


def _agent(model: ScriptedChatModel, saver: SqliteSaver) -> Any:
    return create_loop_agent(model, [search], checkpointer=saver, limits=Limits(max_tool_calls=3))


def _stored_as_0_3(path: Path, config: dict[str, Any]) -> list[str]:
    """A thread as 0.2/0.3 left it in SQLite: a finished run whose transcript holds 0.2's
    notice (a ``HumanMessage`` named ``loop_warning``, without 0.4's marks) and whose ``run``
    holds 0.2's and 0.3's per-run keys (a tool-call count, a review, flat overrides)."""
    with SqliteSaver.from_conn_string(str(path)) as saver:
        agent = _agent(ScriptedChatModel(script=[[("search", {"q": "owls"})], "Owls hunt at night."]),
                       saver)
        agent.invoke({"messages": [HumanMessage("Tell me about owls.", id="q1")]}, config)
        messages = agent.get_state(config).values["messages"]
        old = [*messages[:-1], HumanMessage(OLD_NOTICE, name="loop_warning", id="old-notice"),
               messages[-1]]
        run = {**agent.get_state(config).values["run"], "tool_calls": 9,
               "review": {"message_id": "x", "decisions": {}}, "overrides": {"max_tool_calls": 1}}
        agent.update_state(config, {"messages": [m for m in old if m.id == "old-notice"], "run": run})
        stored = agent.get_state(config).values["messages"]
    assert any(m.name == "loop_warning" and not is_notice(m) for m in stored)  # 0.4 does not read it
    return [str(m.id) for m in stored]


def test_a_run_on_a_thread_0_3_stored_reads_it_once_in_0_4_s_shape(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "owls"}}
    path = tmp_path / "old.db"
    ids = _stored_as_0_3(path, config)
    model = ScriptedChatModel(script=[[("search", {"q": "owl diet"})], [("search", {"q": "voles"})],
                                      "Mostly voles."])
    with SqliteSaver.from_conn_string(str(path)) as saver:  # a new process: 0.4
        state = _agent(model, saver).invoke({"messages": [HumanMessage("What do they eat?")]}, config)
    # the new run counts its own tool calls (not the 9 stored in run) and runs both
    assert state["stop_reason"] == StopReason.COMPLETED
    assert [len(r["tool_calls"]) for r in state["iterations"]] == [2]
    assert state["messages"][-1].content == "Mostly voles."
    # 0.2's notice is now a notice as 0.4 marks it: same id, same place, same text
    (notice,) = [m for m in state["messages"] if m.id == "old-notice"]
    assert is_notice(notice) and notice.content == OLD_NOTICE and notice.name == "loop_notice"
    assert [str(m.id) for m in state["messages"]][:len(ids)] == ids
    # the model saw the thread with the notice in its place, once
    first = model.requests[0]
    assert [m.id for m in first].count("old-notice") == 1
    with SqliteSaver.from_conn_string(str(path)) as saver:  # stored translated: read once
        again = _agent(ScriptedChatModel(script=["Voles."]), saver)
        kept = again.get_state(config).values["messages"]
        assert is_notice(next(m for m in kept if m.id == "old-notice")) and translated(kept) == []
        later = again.invoke({"messages": [HumanMessage("And owlets?")]}, config)
    assert later["stop_reason"] == StopReason.COMPLETED
    assert sum(m.id == "old-notice" for m in later["messages"]) == 1


def test_no_step_reads_0_2_s_notice_name() -> None:
    # before the translator runs, 0.2's name alone is not a notice: the hot path knows 0.4 only
    assert not is_notice(HumanMessage(OLD_NOTICE, name="loop_warning"))
    assert is_notice(HumanMessage(OLD_NOTICE, name="loop_notice"))
