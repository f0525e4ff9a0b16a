"""Faults in the 0.3 surfaces (issue 40): a person's answers at a pause, hostile tool output,
an abandoned stream; each through every front door it concerns, beside ``create_agent``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import Approval, Limits, StopReason, create_loop_agent
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.scripted import ScriptedChatModel

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
                        middleware=[TokenBudgetMiddleware(max_tokens=3000, check_in=True)])


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
        with pytest.raises(ValueError, match=r"tokens\n.*less than or equal to 1000000000000"):
            agent.invoke(Command(resume={"action": "extend", "tokens": 10**30}), config)
        after = agent.get_state(config)
        assert after.values == before.values and len(after.interrupts) == 1
        assert len(model.requests) == asked
        done = agent.invoke(Command(resume={"action": "extend", "tokens": 10**12}), config)
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
                  else {"action": "extend", "tokens": 10_000})
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
