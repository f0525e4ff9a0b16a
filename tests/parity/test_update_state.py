"""``update_state`` continues a thread as under ``create_agent``: LangGraph's own ``update_state``
takes the graph's conditional edges after an update, made as a named node or as the one LangGraph
infers, sync and async; the loop only checks the messages first (an edit keeps the pairing rules,
a removed reply takes its results with it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import create_loop_agent
from langgraph_loop.core import prompts
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import assert_valid_thread

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


def _calls(query: str, n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "search", "args": {"query": query}, "id": f"c{n}",
                                      "type": "tool_call"}])


def _seen(requests: list[list[BaseMessage]]) -> list[list[tuple[str, Any]]]:
    """What the model received, call by call: each message's type, text, calls and answered id."""
    return [[(m.type, m.content, [(c["id"], c["args"]) for c in getattr(m, "tool_calls", [])],
              getattr(m, "tool_call_id", None)) for m in request] for request in requests]


def _side_by_side(script: list[Any], pause: dict[str, Any], edit: Any) -> dict[str, Any]:
    """Both agents: a run paused as ``pause`` says, ``edit(agent)``, ``invoke(None)``; each
    model's requests and the thread after."""
    seen: dict[str, Any] = {}
    for name in ("create_agent", "loop"):
        model = ScriptedChatModel(script=list(script))
        agent = (create_agent(model, [search], checkpointer=InMemorySaver()) if name == "create_agent"
                 else create_loop_agent(model, [search], checkpointer=InMemorySaver()))
        agent.invoke({"messages": [HumanMessage("How do retries work?")]}, CONFIG, **pause)
        edit(agent)
        agent.invoke(None, CONFIG)
        seen[name] = _seen(model.requests)
        seen[name, "thread"] = agent.get_state(CONFIG).values["messages"]
    return seen


@pytest.mark.parametrize("as_node", [None, "model"])
@pytest.mark.parametrize("pause", ["interrupt_before", "interrupt_after"])
def test_an_edited_call_then_invoke_none_sends_the_model_what_create_agent_sends(
        as_node: str | None, pause: str) -> None:
    """Paused before the tools or after the model, the call rewritten (same message id), the
    thread continued with ``invoke(None)``: the edited call runs, and the model then gets
    exactly the messages ``create_agent``'s model gets."""
    def edit(agent: Any) -> None:
        agent.update_state(CONFIG, {"messages": [_edited_call(agent)]}, as_node=as_node)

    point = {pause: ["tools" if pause == "interrupt_before" else "model"]}
    seen = _side_by_side([_calls("retries", 1), "Three attempts."], point, edit)
    assert seen["loop"] == seen["create_agent"]
    assert seen["loop"][-1] == [
        ("human", "How do retries work?", [], None), ("ai", "", [("c1", {"query": "RETRY policy"})], None),
        ("tool", "results for RETRY policy", [], "c1")]


def test_a_reply_removed_before_its_calls_ran_leaves_nothing_unanswered() -> None:
    """Paused before the tools, the reply removed: nothing runs, and the next turn's request
    holds neither the call nor an answer to it, as under ``create_agent``."""
    def edit(agent: Any) -> None:
        reply = agent.get_state(CONFIG).values["messages"][-1]
        agent.update_state(CONFIG, {"messages": [RemoveMessage(id=str(reply.id))]})
        agent.invoke({"messages": [HumanMessage("Just answer.")]}, CONFIG)

    seen = _side_by_side([_calls("retries", 1), "Three attempts."], {"interrupt_before": ["tools"]},
                         edit)
    assert seen["loop"] == seen["create_agent"] == [
        [("human", "How do retries work?", [], None)],
        [("human", "How do retries work?", [], None), ("human", "Just answer.", [], None)]]
    assert_valid_thread(seen["loop", "thread"])


def test_a_removed_reply_takes_its_results_so_the_model_gets_no_orphan() -> None:
    """The first of two rounds removed while the second waits for the tools: its tool result goes
    with it. ``create_agent`` keeps the result and sends the model a tool message answering no
    call (a provider rejects that request); the loop sends the same thread without it."""
    def edit(agent: Any) -> None:
        agent.invoke(None, CONFIG, interrupt_before=["tools"])  # the second round's call
        first = agent.get_state(CONFIG).values["messages"][1]
        agent.update_state(CONFIG, {"messages": [RemoveMessage(id=str(first.id))]})

    seen = _side_by_side([_calls("retries", 1), _calls("backoff", 2), "Three attempts."],
                         {"interrupt_before": ["tools"]}, edit)
    human = ("human", "How do retries work?", [], None)
    second = [("ai", "", [("c2", {"query": "backoff"})], None), ("tool", "results for backoff", [], "c2")]
    assert seen["loop"][-1] == [human, *second]
    assert seen["create_agent"][-1] == [human, ("tool", "results for retries", [], "c1"), *second]
    assert seen["loop"][:-1] == seen["create_agent"][:-1]
    assert_valid_thread(seen["loop", "thread"])


def test_a_call_written_as_the_tools_is_answered_before_the_model_is_called() -> None:
    """An update made as ``tools`` is followed by the model, not by the tools: a call it leaves
    open would never run. ``create_agent`` sends the model that call without a result (a
    provider rejects the request); the loop answers it as not executed first."""
    def edit(agent: Any) -> None:
        agent.update_state(CONFIG, {"messages": [_edited_call(agent)]}, as_node="tools")

    seen = _side_by_side([_calls("retries", 1), "Three attempts."], {"interrupt_before": ["tools"]},
                         edit)
    human = ("human", "How do retries work?", [], None)
    edited = ("ai", "", [("c1", {"query": "RETRY policy"})], None)
    assert seen["create_agent"][-1] == [human, edited]
    assert seen["loop"][-1] == [human, edited, ("tool", prompts.CANCELLED, [], "c1")]
    assert seen["loop"][:-1] == seen["create_agent"][:-1]
    assert_valid_thread(seen["loop", "thread"])
