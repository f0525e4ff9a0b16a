"""A run the graph cannot work on is refused before anything runs or is written.

A typo in the input key, an input without a user message, and ``Command(resume=...)``
on a thread that is not paused raise ``ValueError`` naming the problem; the model is
never called and the thread's checkpoints are unchanged.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _checkpoints(saver: InMemorySaver, thread: str) -> int:
    return len(list(saver.list(_cfg(thread))))


@pytest.mark.parametrize("bad", [{"message": [HumanMessage("x")]},
                                 {"messages": [HumanMessage("x")], "stop_reason": None}])
def test_unknown_input_keys_are_named_and_nothing_runs(bad: dict[str, Any]) -> None:
    model = ScriptedChatModel(script=["invented answer"])
    saver = InMemorySaver()
    agent = create_loop_agent(model, system_prompt="Be brief.", checkpointer=saver)
    unknown = sorted(set(bad) - {"messages"})
    with pytest.raises(ValueError, match="unknown key") as err:
        agent.invoke(bad, _cfg("typo"))
    assert f"unknown key(s) {unknown}" in str(err.value) and "'messages'" in str(err.value)
    assert model.requests == [] and _checkpoints(saver, "typo") == 0


@pytest.mark.parametrize("empty", [{}, {"messages": []}, {"todos": []}])
def test_a_run_without_a_user_message_is_refused(empty: dict[str, Any]) -> None:
    model = ScriptedChatModel(script=["invented answer"])
    saver = InMemorySaver()
    agent = create_loop_agent(model, system_prompt="Be brief.", checkpointer=saver)
    with pytest.raises(ValueError, match="nothing to work on"):
        agent.invoke(empty, _cfg("empty"))
    with pytest.raises(ValueError, match="nothing to work on"):
        create_loop_agent(model).invoke(empty)  # no checkpointer, no thread
    assert model.requests == [] and _checkpoints(saver, "empty") == 0


def test_resuming_a_thread_that_never_ran_says_how_to_start_it() -> None:
    model = ScriptedChatModel(script=["invented answer"])
    saver = InMemorySaver()
    agent = create_loop_agent(model, system_prompt="Be brief.", checkpointer=saver)
    with pytest.raises(ValueError, match="not paused at an interrupt") as err:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), _cfg("new"))
    assert "never run" in str(err.value) and "invoke({'messages'" in str(err.value)
    assert model.requests == [] and _checkpoints(saver, "new") == 0
    assert agent.get_state(_cfg("new")).values == {}


async def test_resuming_a_finished_thread_writes_nothing() -> None:
    model = ScriptedChatModel(script=["Paris."])
    saver = InMemorySaver()
    agent = create_loop_agent(model, checkpointer=saver)
    done = await agent.ainvoke({"messages": [HumanMessage("Capital of France?")]}, _cfg("done"))
    assert done["stop_reason"] == "completed"
    before, count = agent.get_state(_cfg("done")), _checkpoints(saver, "done")
    for call in (agent.invoke, agent.ainvoke):
        with pytest.raises(ValueError, match="finished its last run") as err:
            result = call(Command(resume={"decisions": []}), _cfg("done"))
            if not isinstance(result, dict):
                await result
        assert "send a new message" in str(err.value)
    after = agent.get_state(_cfg("done"))
    assert _checkpoints(saver, "done") == count and after.values == before.values
    assert after.config == before.config and model.calls == 1


def test_a_subgraph_takes_its_parents_extra_keys_but_never_calls_the_model_empty() -> None:
    class Parent(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]
        notes: Annotated[list[str], operator.add]

    model = ScriptedChatModel(script=["from the subgraph", "never"])
    agent = create_loop_agent(model)
    parent = StateGraph(Parent)
    parent.add_node("agent", agent)
    parent.add_edge(START, "agent")
    app = parent.compile(checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("hi")], "notes": ["kept"]}, _cfg("p1"))
    assert out["messages"][-1].content == "from the subgraph" and out["notes"] == ["kept"]
    with pytest.raises(ValueError, match="request has no user message"):
        app.invoke({"messages": [], "notes": []}, _cfg("p2"))
    assert model.calls == 1
