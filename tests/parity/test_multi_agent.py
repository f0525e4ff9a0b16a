"""Loop agents inside LangGraph's multi-agent packages (issue 20, item 7): two loop agents in a
``langgraph-swarm`` hand off and back; ``langgraph-supervisor`` runs loop agents as workers.
Each scenario runs once with ``create_agent`` agents (the reference) and once with loop agents,
and the parent graph's messages must be the same."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_supervisor import create_supervisor
from langgraph_swarm import create_handoff_tool, create_swarm

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.parity.compare import call, calls, normalise_messages, same

Builder = Callable[..., Any]
THREAD = {"configurable": {"thread_id": "team"}}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def run_swarm(build: Builder) -> tuple[dict[str, Any], list[list[Any]], list[list[Any]]]:
    """alice hands off to bob, bob hands back to alice, alice answers."""
    alice_model = ScriptedChatModel(script=[calls(call("transfer_to_bob", {}, "a1")),
                                            "Alice again: all done."])
    bob_model = ScriptedChatModel(script=[calls(call("transfer_to_alice", {}, "b1"))])
    alice = build(alice_model, [create_handoff_tool(agent_name="bob")], name="alice")
    bob = build(bob_model, [create_handoff_tool(agent_name="alice")], name="bob")
    swarm = create_swarm([alice, bob], default_active_agent="alice").compile(checkpointer=InMemorySaver())
    result = swarm.invoke({"messages": [HumanMessage("Plan a trip.")]}, THREAD)
    return (result, [normalise_messages(r) for r in alice_model.requests],
            [normalise_messages(r) for r in bob_model.requests])


def test_swarm_handoff_and_back() -> None:
    reference = run_swarm(create_agent)
    result, alice_saw, bob_saw = run_swarm(create_loop_agent)
    same("swarm messages", normalise_messages(result["messages"]),
         normalise_messages(reference[0]["messages"]))
    same("what alice and bob saw", (alice_saw, bob_saw), reference[1:])
    assert result["active_agent"] == "alice"
    final = result["messages"][-1]
    assert isinstance(final, AIMessage)
    assert (final.name, final.content) == ("alice", "Alice again: all done.")
    transfers = [m.content for m in result["messages"] if m.type == "tool"]
    assert transfers == ["Successfully transferred to bob", "Successfully transferred to alice"]


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


def run_supervisor(build: Builder) -> tuple[dict[str, Any], list[list[Any]]]:
    """The supervisor sends the question to the researcher (a worker agent with a tool), then
    answers from the researcher's report."""
    researcher_model = ScriptedChatModel(script=[calls(call("search", {"query": "flights"}, "r1")),
                                                 "Research: three flights found."])
    researcher = build(researcher_model, [search], name="researcher")
    supervisor_model = ScriptedChatModel(script=[calls(call("transfer_to_researcher", {}, "s1")),
                                                 "Supervisor: book the cheapest of three flights."])
    workflow = create_supervisor([researcher], model=supervisor_model, prompt="You manage a researcher.")
    result = workflow.compile().invoke({"messages": [HumanMessage("Find flights.")]})
    return result, [normalise_messages(r) for r in researcher_model.requests]


def _stable(value: Any) -> Any:
    if isinstance(value, str):
        return UUID.sub("<uuid>", value)
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_stable(v) for v in value)
    return value


def without_uuids(messages: list[Any]) -> list[dict[str, Any]]:
    """Normalised messages with the random call ids of the supervisor's handoff-back pair
    replaced by a placeholder."""
    return _stable(normalise_messages(messages))


def test_supervisor_with_loop_workers() -> None:
    reference = run_supervisor(create_agent)
    result, researcher_saw = run_supervisor(create_loop_agent)
    same("supervisor messages", without_uuids(result["messages"]), without_uuids(reference[0]["messages"]))
    same("what the researcher saw", researcher_saw, reference[1])
    assert result["messages"][-1].content == "Supervisor: book the cheapest of three flights."
    reports = [m for m in result["messages"]  # the supervisor's handoff back is named too, with a call
               if isinstance(m, AIMessage) and m.name == "researcher" and not m.tool_calls]
    assert [m.content for m in reports] == ["Research: three flights found."]
