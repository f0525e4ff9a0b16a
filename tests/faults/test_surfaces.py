"""Faults in the 0.3 surfaces (issue 40): a person's answers at a pause, hostile tool output,
an abandoned stream; each through every front door it concerns, beside ``create_agent``."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import Approval, Limits, StopReason, create_loop_agent
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import assert_valid, text_of
from tests.helpers import add_tokens

PAGE = "result text " * 60


@tool
def research(query: str) -> str:
    """Search the web (a long page)."""
    return f"{query}: {PAGE}"


def researcher(rounds: int = 8) -> ScriptedChatModel:
    """Researches until ``rounds`` results are in, then answers."""
    def script(messages: list[BaseMessage]) -> Any:
        done = sum(m.type == "tool" for m in messages)
        return [("research", {"query": f"q{done}"})] if done < rounds else "All found."
    return ScriptedChatModel(default=script, no_tools_reply="What I found so far.")


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def go() -> dict[str, Any]:
    return {"messages": [HumanMessage("research this")]}


def _graph_at_the_budget(model: ScriptedChatModel, saver: Any) -> Any:
    return create_loop_agent(model, [research], checkpointer=saver,
                             limits=Limits(token_budget=3000, budget_check_in=True))


def _agent_at_the_budget(model: ScriptedChatModel, saver: Any) -> Any:
    return create_agent(model, [research], checkpointer=saver,
                        middleware=[TokenBudgetMiddleware(token_budget=3000, budget_check_in=True)])


# --- 3. a huge extension at the budget ---------------------------------------------------------

@pytest.mark.parametrize("door", [_graph_at_the_budget, _agent_at_the_budget])
def test_a_huge_extension_is_a_value_error_naming_tokens_and_the_pause_stays_open(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: Any) -> None:
    model = researcher()
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "b.db")) as saver:
        agent, config = door(model, saver), thread()
        assert agent.invoke(go(), config)["__interrupt__"]
        before, asked = agent.get_state(config), len(model.requests)
        with pytest.raises(ValueError, match=r"tokens' must be at most 1,000,000,000,000"):
            agent.invoke(Command(resume=add_tokens(10**30)), config)
        after = agent.get_state(config)
        assert after.values == before.values and len(after.interrupts) == 1
        assert len(model.requests) == asked
        done = agent.invoke(Command(resume=add_tokens(10**12)), config)
    assert "__interrupt__" not in done and done["messages"][-1].content == "All found."


# --- 4. Command(resume=None) at a pause ---------------------------------------------------------

def _gated(model: ScriptedChatModel, saver: Any) -> Any:
    return create_loop_agent(model, [research], checkpointer=saver,
                             approval=Approval(tools=["research"]))


@pytest.mark.parametrize("door", [_gated, _graph_at_the_budget])
def test_an_empty_resume_is_a_value_error_saying_what_to_send(
        scripted: list[ScriptedChatModel], tmp_path: Path, door: Any) -> None:
    model = researcher(rounds=1 if door is _gated else 8)
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "r.db")) as saver:
        agent, config = door(model, saver), thread()
        paused = agent.invoke(go(), config)
        assert paused["__interrupt__"]
        before = agent.get_state(config)
        with pytest.raises(ValueError, match=r"carries no answer .*nothing was resumed or written"):
            agent.invoke(Command(resume=None), config)
        after = agent.get_state(config)
        assert after.values == before.values and after.next == before.next
        answer = ({"decisions": [{"type": "approve"}]} if door is _gated
                  else add_tokens(10_000))
        done = agent.invoke(Command(resume=answer), config)
    assert done["stop_reason"] == StopReason.COMPLETED


def test_create_agent_fails_on_an_empty_resume_inside_langgraph(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    """What ``create_agent`` does with the same answer (a LangGraph error, no advice): the
    graph's own error above is the clear one."""
    model = researcher(rounds=1)
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        agent = create_agent(model, [research], checkpointer=saver, middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"research": True})])
        config = thread()
        assert agent.invoke(go(), config)["__interrupt__"]
        with pytest.raises(UnboundLocalError, match="resume_is_map"):
            agent.invoke(Command(resume=None), config)


# --- 13. a tool output with a long run of digits before a time unit ------------------------------

TIMINGS = iter(range(10**6))


@tool
def benchmark() -> str:
    """Time the build (its output: a new 30,000-digit number of milliseconds every time)."""
    return "took " + str(next(TIMINGS)).rjust(30_000, "9") + " ms"


def _timing(messages: list[BaseMessage]) -> Any:
    return [("benchmark", {})] if sum(m.type == "tool" for m in messages) < 6 else "It is slow."


@pytest.mark.parametrize("door", ["graph", "middleware"])
def test_a_huge_number_before_a_time_unit_is_a_result_like_any_other(
        scripted: list[ScriptedChatModel], door: str) -> None:
    model = ScriptedChatModel(default=_timing, no_tools_reply="It is slow; I stopped timing it.")
    scripted.append(model)
    agent = (create_loop_agent(model, [benchmark]) if door == "graph" else
             create_agent(model, [benchmark], middleware=[LoopDetectionMiddleware()]))
    result = agent.invoke(go())
    # the same result but for its timing, three times over: the loop is stopped as for any
    # output that differs only in its timings
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["messages"][-1].content == "It is slow; I stopped timing it."
    assert sum(m.type == "tool" and m.status == "success" for m in result["messages"]) == 3


# --- 1. approvals with loop detection: one result per call, no question about a refused call -------

SHELL: Counter[str] = Counter()


@tool
def bash(cmd: str) -> str:
    """Run a shell command."""
    SHELL[cmd] += 1
    return "build.log  src" if cmd == "ls" else f"Sat 12:0{SHELL[cmd] // 3}"  # moves at the 3rd date


def _ls_then_date(parallel: bool = False) -> ScriptedChatModel:
    """ls, date, ls, date, ... (ls always lists the same files; date moves once, at its third
    run: something changed before the fourth ls, so it is refused, and nothing since, so asking
    for it again stops); ``parallel``: both in every reply."""
    turns = iter([[("bash", {"cmd": "ls"}), ("bash", {"cmd": "date"})]] * 10 if parallel else
                 [[("bash", {"cmd": "ls"})], [("bash", {"cmd": "date"})]] * 10)
    return ScriptedChatModel(default=lambda messages: next(turns, "done"),
                             no_tools_reply="The build has not changed.")


def _reviewed(agent: Any, decide: Any) -> tuple[list[list[str]], list[BaseMessage]]:
    """Run a thread to its end, answering each approval with ``decide(call)``; the calls each
    question was about (each checked unanswered when asked), and the stored messages."""
    config = thread()
    out = agent.invoke(go(), config)
    asked: list[list[str]] = []
    while "__interrupt__" in out:
        messages = agent.get_state(config).values["messages"]
        reply = next(m for m in reversed(messages) if isinstance(m, AIMessage))
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        requests = out["__interrupt__"][0].value["action_requests"]
        calls = [c for c in reply.tool_calls if c["id"] not in answered]
        assert [r["args"] for r in requests] == [c["args"] for c in calls]  # only open calls
        asked.append([c["args"]["cmd"] for c in calls])
        out = agent.invoke(Command(resume={"decisions": [decide(c) for c in calls]}), config)
    return asked, agent.get_state(config).values["messages"]


def _one_result_each(messages: list[BaseMessage]) -> None:
    results = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert results == Counter(calls), "every call keeps exactly one result"
    assert_valid(messages)


def approve(call: Any) -> dict[str, Any]:
    return {"type": "approve"}


def test_a_refused_call_is_not_asked_about_and_the_doors_agree(
        scripted: list[ScriptedChatModel]) -> None:
    seen: dict[str, Any] = {}
    for door in ("create_agent", "middleware", "graph"):
        SHELL.clear()
        model = _ls_then_date()
        scripted.append(model)
        if door == "graph":
            agent = create_loop_agent(model, [bash], checkpointer=InMemorySaver(),
                                      approval=Approval(tools=["bash"]))
        else:
            agent = create_agent(model, [bash], checkpointer=InMemorySaver(), middleware=[
                *([LoopDetectionMiddleware()] if door == "middleware" else []),
                HumanInTheLoopMiddleware(interrupt_on={"bash": True})])
        asked, messages = _reviewed(agent, approve)
        _one_result_each(messages)
        seen[door] = (asked, dict(SHELL), [text_of(m.content) for m in messages
                                           if isinstance(m, ToolMessage)])
    # without the detector every call is asked about and runs
    assert seen["create_agent"][1] == {"ls": 10, "date": 10}
    # with it: the fourth ls is refused (not run, nobody asked), the fifth stops the run
    asked, runs, results = seen["middleware"]
    assert runs == {"ls": 3, "date": 4}
    assert asked == [["ls"], ["date"]] * 3 + [["date"]]
    assert results[6].startswith('Error: not run: bash({"cmd":"ls"})')
    assert seen["middleware"] == seen["graph"]


def test_a_refused_call_beside_another_keeps_one_result_whatever_the_person_decides(
        scripted: list[ScriptedChatModel]) -> None:
    """A refused call in a reply with a call that runs is answered when the tools run, so the
    person's answer about it (asked with the reply's other calls) is its one result."""
    for refused in ("approve", "reject"):
        SHELL.clear()
        model = _ls_then_date(parallel=True)
        scripted.append(model)
        agent = create_agent(model, [bash], checkpointer=InMemorySaver(), middleware=[
            LoopDetectionMiddleware(), HumanInTheLoopMiddleware(interrupt_on={"bash": True})])

        def decide(call: Any, refused: str = refused) -> dict[str, Any]:
            fourth = call["args"]["cmd"] == "ls" and SHELL["ls"] == 3
            return {"type": "reject", "message": "no"} if fourth and refused == "reject" else approve(call)

        _, messages = _reviewed(agent, decide)
        _one_result_each(messages)
        assert SHELL["ls"] == 3
        ls_results = [text_of(m.content) for m in messages if isinstance(m, ToolMessage)
                      and m.tool_call_id in {c["id"] for a in messages if isinstance(a, AIMessage)
                                             for c in a.tool_calls if c["args"]["cmd"] == "ls"}]
        assert ls_results[:3] == ["build.log  src"] * 3
        fourth = ("User rejected the tool call for `bash` with reason: no" if refused == "reject"
                  else 'Error: not run: bash({"cmd":"ls"})')
        assert ls_results[3].startswith(fourth)
