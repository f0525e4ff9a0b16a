"""``update_state`` continues a thread as under ``create_agent``: the nodes that take the edge
after them themselves (``model``, ``prepare``, ``router``: a ``Command`` instead of a conditional
edge) take it after an update made as them too, named or inferred, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel

CONFIG = {"configurable": {"thread_id": "edit"}}


@tool
def search(query: str) -> str:
    """Search the docs."""
    return f"results for {query}"


def _agents() -> dict[str, Any]:
    script = [AIMessage("", tool_calls=[{"name": "search", "args": {"query": "retries"},
                                         "id": "c1", "type": "tool_call"}]),
              "Retries: three attempts."]
    return {"create_agent": create_agent(ScriptedChatModel(script=list(script)), [search],
                                         checkpointer=InMemorySaver()),
            "loop": create_loop_agent(ScriptedChatModel(script=list(script)), [search],
                                      checkpointer=InMemorySaver())}


def _edited_call(agent: Any) -> AIMessage:
    reply = agent.get_state(CONFIG).values["messages"][-1]
    return reply.model_copy(update={"tool_calls": [{**reply.tool_calls[0],
                                                    "args": {"query": "RETRY policy"}}]})


@pytest.mark.parametrize("as_node", [None, "model"])
def test_an_edited_call_before_the_tools_runs_as_edited(as_node: str | None) -> None:
    """The canonical edit: pause before the tools, rewrite the call, go on."""
    seen: dict[str, Any] = {}
    for name, agent in _agents().items():
        agent.invoke({"messages": [HumanMessage("How do retries work?")]}, CONFIG,
                     interrupt_before=["tools"])
        assert agent.get_state(CONFIG).next == ("tools",)
        agent.update_state(CONFIG, {"messages": [_edited_call(agent)]}, as_node=as_node)
        seen[name, "next"] = agent.get_state(CONFIG).next
        result = agent.invoke(None, CONFIG)
        seen[name, "messages"] = [(m.type, m.content) for m in result["messages"]]
    assert seen["loop", "next"] == seen["create_agent", "next"] == ("tools",)
    assert seen["loop", "messages"] == seen["create_agent", "messages"]
    assert ("tool", "results for RETRY policy") in seen["loop", "messages"]


def test_a_reply_replaced_by_an_answer_ends_the_run() -> None:
    """As ``model``, a reply without calls ends the run (through the router here)."""
    for name, agent in _agents().items():
        agent.invoke({"messages": [HumanMessage("How do retries work?")]}, CONFIG,
                     interrupt_before=["tools"])
        reply = agent.get_state(CONFIG).values["messages"][-1]
        answer = AIMessage("Three attempts.", id=reply.id)
        agent.update_state(CONFIG, {"messages": [answer]}, as_node="model")
        assert agent.get_state(CONFIG).next == (() if name == "create_agent" else ("router",))
        result = agent.invoke(None, CONFIG)
        assert [m.content for m in result["messages"]] == ["How do retries work?", "Three attempts."]
        if name == "loop":
            assert result["stop_reason"] == "completed"


def test_an_async_update_takes_the_edge_too() -> None:
    agent = _agents()["loop"]

    async def edit() -> Any:
        await agent.ainvoke({"messages": [HumanMessage("How do retries work?")]}, CONFIG,
                            interrupt_before=["tools"])
        edited = _edited_call(agent)
        await agent.aupdate_state(CONFIG, {"messages": [edited]})
        assert (await agent.aget_state(CONFIG)).next == ("tools",)
        return await agent.ainvoke(None, CONFIG)

    result = asyncio.run(edit())
    assert result["messages"][2].content == "results for RETRY policy"
    assert result["stop_reason"] == "completed"


def test_two_edits_in_a_row_still_run_the_edited_call() -> None:
    """The second update is inferred from the first (the checkpoint an update wrote)."""
    seen: dict[str, Any] = {}
    for name, agent in _agents().items():
        agent.invoke({"messages": [HumanMessage("How do retries work?")]}, CONFIG,
                     interrupt_before=["tools"])
        agent.update_state(CONFIG, {"messages": [_edited_call(agent)]})
        agent.update_state(CONFIG, {"messages": [_edited_call(agent)]})
        seen[name, "next"] = agent.get_state(CONFIG).next
        seen[name] = [(m.type, m.content) for m in agent.invoke(None, CONFIG)["messages"]]
    assert seen["loop", "next"] == seen["create_agent", "next"] == ("tools",)
    assert seen["loop"] == seen["create_agent"]
