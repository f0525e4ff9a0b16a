"""Edits of a stored thread (issue 40, items 8-11): ``update_state`` and ``bulk_update_state``
keep the thread provider-valid and continue it as ``create_agent`` does, sync and async."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command, StateUpdate

from langgraph_loop import StopReason, create_loop_agent
from langgraph_loop.core.history import ThreadBusyError
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread, thread


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as s:
        yield s


SCRIPTED: list[ScriptedChatModel] = []


@pytest.fixture(autouse=True)
def _checked_requests(scripted: list[ScriptedChatModel]) -> Iterator[None]:
    """Every model of a test is checked after it: each request it got was provider-valid."""
    yield
    scripted += SCRIPTED
    SCRIPTED.clear()


def _summing(script: list[Any]) -> ScriptedChatModel:
    SCRIPTED.append(ScriptedChatModel(script=script))
    return SCRIPTED[-1]


def _round(agent: Any, tid: str) -> list[BaseMessage]:
    """One run that makes one ``add`` call; the stored messages."""
    return agent.invoke({"messages": [HumanMessage("1+2?")]}, thread(tid))["messages"]


def _update(agent: Any, tid: str, values: dict[str, Any], how: str, as_node: str | None = None) -> None:
    """``update_state`` (its values, or a ``Command`` carrying them) or ``bulk_update_state``
    with one update."""
    if how == "update_state":
        agent.update_state(thread(tid), values, as_node=as_node)
    elif how == "command":
        agent.update_state(thread(tid), Command(update=values), as_node=as_node)
    else:
        agent.bulk_update_state(thread(tid), [[StateUpdate(values, as_node)]])


HOWS = ["update_state", "command", "bulk_update_state"]


# --- 8. removing one tool result ----------------------------------------------------------------

@pytest.mark.parametrize("how", HOWS)
def test_removing_a_tool_result_alone_is_refused_naming_the_call(saver: SqliteSaver, how: str) -> None:
    model = _summing([[("add", {"a": 1, "b": 2})], "3", "Hello again."])
    agent = create_loop_agent(model, [add], checkpointer=saver)
    messages = _round(agent, "rm-result")
    result = next(m for m in messages if isinstance(m, ToolMessage))
    with pytest.raises(ValueError, match=rf"removing tool message {result.id!r} leaves call "
                                         rf"{result.tool_call_id!r} of AIMessage .* without a result"):
        _update(agent, "rm-result", {"messages": [RemoveMessage(id=str(result.id))]}, how)
    stored = agent.get_state(thread("rm-result")).values["messages"]
    assert stored == messages  # nothing written
    # the fixes the error names both work: replace the result, or remove the reply with it
    _update(agent, "rm-result", {"messages": [ToolMessage("4", id=result.id,
                                                          tool_call_id=result.tool_call_id)]}, how)
    assert_valid_thread(agent.get_state(thread("rm-result")).values["messages"])
    reply = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    _update(agent, "rm-result", {"messages": [RemoveMessage(id=str(reply.id))]}, how)
    agent.invoke({"messages": [HumanMessage("hi")]}, thread("rm-result"))
    assert [m.type for m in model.requests[-1]] == ["human", "ai", "human"]


def test_removing_a_tool_result_through_invoke_is_refused_too(saver: SqliteSaver) -> None:
    model = _summing([[("add", {"a": 1, "b": 2})], "3", "Hello again."])
    agent = create_loop_agent(model, [add], checkpointer=saver)
    result = next(m for m in _round(agent, "rm-in") if isinstance(m, ToolMessage))
    with pytest.raises(ValueError, match="without a result"):
        agent.invoke({"messages": [RemoveMessage(id=str(result.id)), HumanMessage("hi")]},
                     thread("rm-in"))
    assert len(model.requests) == 2


# --- 9. a call injected as the model on a finished thread ----------------------------------------

def _injected() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "add", "args": {"a": 20, "b": 22}, "id": "injected",
                                      "type": "tool_call"}])


@pytest.mark.parametrize("how", HOWS)
def test_a_call_injected_as_the_model_on_a_finished_thread_runs_as_under_create_agent(
        saver: SqliteSaver, how: str) -> None:
    seen: dict[str, Any] = {}
    for name in ("create_agent", "loop"):
        model = _summing(["Hi.", "It is 42."])
        agent = (create_agent(model, [add], checkpointer=saver) if name == "create_agent"
                 else create_loop_agent(model, [add], checkpointer=saver))
        tid = f"inject-{how}-{name}"
        agent.invoke({"messages": [HumanMessage("hi")]}, thread(tid))
        _update(agent, tid, {"messages": [_injected()]}, how, as_node="model")
        seen[name, "next"] = agent.get_state(thread(tid)).next
        result = agent.invoke(None, thread(tid))
        seen[name] = [(m.type, m.content) for m in result["messages"]]
        seen[name, "request"] = [(m.type, m.content) for m in model.requests[-1]]
        if name == "loop":
            assert result["stop_reason"] == StopReason.COMPLETED
            assert_valid_thread(result["messages"])
    assert seen["loop", "next"] == seen["create_agent", "next"] == ("tools",)
    assert seen["loop"] == seen["create_agent"]
    assert seen["loop"][-2:] == [("tool", "42"), ("ai", "It is 42.")]
    assert seen["loop", "request"] == seen["create_agent", "request"]


# --- 10. bulk_update_state checks what update_state checks ----------------------------------------

def test_bulk_update_state_refuses_an_unknown_removal(saver: SqliteSaver) -> None:
    agent = create_loop_agent(_summing(["3"]), [add], checkpointer=saver)
    before = _round(agent, "bulk-unknown")
    with pytest.raises(ValueError, match=r"doesn't exist \('no-such-id'\)"):
        agent.bulk_update_state(thread("bulk-unknown"),
                                [[StateUpdate({"messages": [RemoveMessage(id="no-such-id")]})]])
    assert agent.get_state(thread("bulk-unknown")).values["messages"] == before


def test_bulk_update_state_removing_a_reply_takes_its_results_and_checks_each_step(
        saver: SqliteSaver) -> None:
    model = _summing([[("add", {"a": 1, "b": 2})], "3", "Hello again."])
    agent = create_loop_agent(model, [add], checkpointer=saver)
    messages = _round(agent, "bulk-rm")
    reply = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    note = HumanMessage("(the sum was dropped)", id="note")
    # two supersteps: the second is checked on the thread the first leaves (its id exists then)
    agent.bulk_update_state(thread("bulk-rm"), [
        [StateUpdate({"messages": [RemoveMessage(id=str(reply.id)), note]})],
        [StateUpdate({"messages": [RemoveMessage(id="note")]})]])
    stored = agent.get_state(thread("bulk-rm")).values["messages"]
    assert not any(isinstance(m, ToolMessage) for m in stored)
    assert_valid_thread(stored)
    agent.invoke({"messages": [HumanMessage("hi")]}, thread("bulk-rm"))
    assert [m.type for m in model.requests[-1]] == ["human", "ai", "human"]


# --- 11. an edit while a run is in progress --------------------------------------------------------

class Gate:
    """The tool waits until the test lets it go (the run is between a call and its result)."""

    def __init__(self) -> None:
        self.entered, self.go = threading.Event(), threading.Event()


@pytest.mark.parametrize("how", HOWS)
def test_an_edit_while_a_run_is_in_progress_is_refused(saver: SqliteSaver, how: str) -> None:
    gate = Gate()

    def slow_add(a: int, b: int) -> int:
        """Add two numbers (slowly)."""
        gate.entered.set()
        assert gate.go.wait(10)
        return a + b

    model = _summing([[("slow_add", {"a": 1, "b": 2})], "3"])
    agent = create_loop_agent(model, [slow_add], checkpointer=saver)
    results: list[Any] = []
    run = threading.Thread(target=lambda: results.append(_round(agent, "busy-edit")))
    run.start()
    try:
        assert gate.entered.wait(10)
        with pytest.raises(ThreadBusyError, match=r"'busy-edit' has a run in progress .* nothing "
                                                  r"was written"):
            _update(agent, "busy-edit", {"messages": [HumanMessage("also: 2+2?")]}, how)
    finally:
        gate.go.set()
        run.join(10)
    stored = agent.get_state(thread("busy-edit")).values["messages"]
    assert "also: 2+2?" not in [m.content for m in stored]
    assert_valid_thread(stored)
    assert results[0][-1].content == "3"
    # once the run has ended, the edit is taken
    _update(agent, "busy-edit", {"messages": [HumanMessage("also: 2+2?")]}, how)


async def test_an_async_edit_while_an_async_run_is_in_progress_is_refused(tmp_path: Path) -> None:
    go = asyncio.Event()

    async def slow_add(a: int, b: int) -> int:
        """Add two numbers (slowly)."""
        await go.wait()
        return a + b

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        model = _summing([[("slow_add", {"a": 1, "b": 2})], "3"])
        agent = create_loop_agent(model, [slow_add], checkpointer=saver)
        first = asyncio.create_task(agent.ainvoke({"messages": [HumanMessage("1+2?")]},
                                                  thread("abusy-edit")))
        await asyncio.sleep(0.2)
        with pytest.raises(ThreadBusyError):
            await agent.aupdate_state(thread("abusy-edit"), {"messages": [HumanMessage("2+2?")]})
        go.set()
        assert (await first)["messages"][-1].content == "3"
        assert_valid_thread((await agent.aget_state(thread("abusy-edit"))).values["messages"])


# --- 2. the detector judges an edited thread as it reads -------------------------------------------

RUNS: dict[str, int] = {}


def status(job: str) -> str:
    """The status of a job."""
    RUNS[job] = RUNS.get(job, 0) + 1
    return f"{job}: pending"


def _polling(messages: list[BaseMessage]) -> Any:
    return [("status", {"job": "build"})] if sum(m.type == "tool" for m in messages) < 8 else "gave up"


def _polling_agent(door: str, saver: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(default=_polling, no_tools_reply="The build is still pending.")
    SCRIPTED.append(model)
    if door == "graph":
        return create_loop_agent(model, [status], checkpointer=saver), model
    return create_agent(model, [status], checkpointer=saver,
                        middleware=[LoopDetectionMiddleware()]), model


def _texts(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, repr([(c["name"], c["args"]) for c in m.tool_calls])
             if isinstance(m, AIMessage) and m.tool_calls else str(m.content)) for m in messages]


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_an_edited_last_call_is_judged_as_the_thread_reads_whichever_agent_resumes(
        saver: SqliteSaver, door: str) -> None:
    """The third status call is rewritten (same message id) before it runs: the agent that made
    the edit decides as a new agent resuming the thread does, on build, build, deploy, build..."""
    seen: dict[str, Any] = {}
    for resumer in ("same", "new"):
        RUNS.clear()
        agent, model = _polling_agent(door, saver)
        tid = f"edit-{door}-{resumer}"
        agent.invoke({"messages": [HumanMessage("is the build done?")]}, thread(tid),
                     interrupt_before=["tools"])
        for _ in range(2):
            agent.invoke(None, thread(tid), interrupt_before=["tools"])
        last = agent.get_state(thread(tid)).values["messages"][-1]
        edited = last.model_copy(update={"tool_calls": [{**last.tool_calls[0], "args": {"job": "deploy"}}]})
        agent.update_state(thread(tid), {"messages": [edited]})
        asked = len(model.requests)
        if resumer == "new":
            agent, model = _polling_agent(door, saver)
            asked = 0
        result = agent.invoke(None, thread(tid))
        seen[resumer] = (dict(RUNS), result["stop_reason"], [_texts(r) for r in model.requests[asked:]])
    assert seen["same"] == seen["new"]
    runs, stop, _ = seen["new"]
    assert stop == StopReason.LOOP_DETECTED and runs == {"build": 3, "deploy": 1}
