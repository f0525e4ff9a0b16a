"""Issue 21, input histories: a run's input is checked against the pairing rules before
anything is written; what can be repaired without losing information is repaired the same
way every time, everything else is a ``ValueError`` naming the message and the rule, with
the thread unchanged (same messages, no new checkpoint) and usable by the next good run.

Every thread here first holds one good turn, so "unchanged" compares against real content.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import assert_rejected, assert_valid, kinds, stored, texts, thread

RAN: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add({a},{b})")
    return a + b


def _agent(model: ScriptedChatModel) -> Any:
    return create_loop_agent(model, [add], checkpointer=InMemorySaver())


def _with_one_turn(scripted: list[ScriptedChatModel], tid: str, *script: str
                   ) -> tuple[Any, ScriptedChatModel]:
    """An agent whose thread ``tid`` holds one finished turn (``hi`` -> ``hello``)."""
    model = ScriptedChatModel(script=["hello", *script])
    scripted.append(model)
    agent = _agent(model)
    agent.invoke({"messages": [HumanMessage("hi")]}, thread(tid))
    return agent, model


def _call(call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": call_id,
                                      "type": "tool_call"}])


def test_unanswered_call_in_the_middle_of_the_history_is_answered_as_not_executed(
        scripted: list[ScriptedChatModel]) -> None:
    """Repair. A call in the middle of an imported history that has no ToolMessage gets an
    error ToolMessage right after its AIMessage saying it was not executed; the call is not
    run now (it belonged to an old turn). This is what the loop already does for the last
    AIMessage of a thread, and what LangChain's deep agents (``PatchToolCallsMiddleware``)
    do for any dangling call: it adds information, it loses none."""
    RAN.clear()
    model = ScriptedChatModel(script=["three"])
    scripted.append(model)
    agent = _agent(model)
    history = [HumanMessage("1+2?"), _call("c1"), HumanMessage("never mind"),
               AIMessage("OK."), HumanMessage("what was 1+2 again?")]
    result = agent.invoke({"messages": history}, thread("mid"))
    (request,) = model.requests
    assert kinds(request) == ["human", "ai+calls", "tool:error", "human", "ai", "human"]
    answer = request[2]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "c1"
    assert "not executed" in str(answer.content)
    assert RAN == []
    assert result["stop_reason"] == "completed"
    assert kinds(result["messages"]) == [*kinds(request), "ai"]
    assert_valid(result["messages"])


def test_orphan_tool_message_in_the_history_is_a_value_error_naming_it(
        scripted: list[ScriptedChatModel]) -> None:
    """Error. A ToolMessage that answers no call cannot be repaired without losing it (its
    content would have to be dropped or re-labelled): ``ValueError`` naming the message (its
    position and ``tool_call_id``), nothing written. Providers reject it the same way
    (OpenAI: "messages with role 'tool' must be a response to a preceding message with
    'tool_calls'")."""
    agent, model = _with_one_turn(scripted, "orphan", "fine")
    bad = [HumanMessage("and this?"), ToolMessage("3", tool_call_id="ghost"),
           HumanMessage("well?")]
    text = assert_rejected(agent, model, thread("orphan"),
                           lambda: agent.invoke({"messages": bad}, thread("orphan")))
    assert "ghost" in text and "message 1" in text, text
    assert "tool" in text.lower(), text
    result = agent.invoke({"messages": [HumanMessage("well?")]}, thread("orphan"))
    assert texts(result["messages"]) == ["hi", "hello", "well?", "fine"]


def test_system_message_in_the_middle_is_a_value_error_naming_it(
        scripted: list[ScriptedChatModel]) -> None:
    """Error. A system message may only come first (the pairing rule of this library;
    LangChain documents the same for Anthropic models: "System Messages may only be the first
    message"). Moving it first or turning it into a user message would change what it means,
    so: ``ValueError`` naming the message and the rule, nothing written."""
    agent, model = _with_one_turn(scripted, "system", "brief")
    bad = [SystemMessage("Be brief from now on."), HumanMessage("next question")]
    text = assert_rejected(agent, model, thread("system"),
                           lambda: agent.invoke({"messages": bad}, thread("system")))
    assert "system" in text.lower() and "first" in text.lower(), text
    assert "message 2" in text or "Be brief" in text, text
    result = agent.invoke({"messages": [HumanMessage("next question")]}, thread("system"))
    assert texts(result["messages"]) == ["hi", "hello", "next question", "brief"]
    assert_valid(model.requests[-1])


def test_stray_tool_message_as_the_next_turn_is_a_value_error(
        scripted: list[ScriptedChatModel]) -> None:
    """Error. A ToolMessage sent as the next turn of a thread whose last AIMessage asked for
    nothing is an orphan like any other (same rule, same error); the thread is unchanged."""
    agent, model = _with_one_turn(scripted, "stray", "ok")
    text = assert_rejected(
        agent, model, thread("stray"),
        lambda: agent.invoke({"messages": [ToolMessage("3", tool_call_id="zz")]},
                             thread("stray")))
    assert "zz" in text and "tool" in text.lower(), text


def test_the_same_human_message_object_sent_on_two_turns_is_two_turns(
        scripted: list[ScriptedChatModel]) -> None:
    """Repair. LangGraph's message reducer writes an id into the input message object, so a
    user who sends the same ``HumanMessage`` object again unknowingly sends a stored id, and
    the reducer replaces turn 1 in place. A LangGraph user expects ``invoke`` with a message
    to add a turn: a re-sent message equal to the stored one (same id, same content) is
    added as a new turn with a fresh id. (Editing history by id stays what
    ``update_state`` is for.)"""
    model = ScriptedChatModel(script=["first answer", "second answer"])
    scripted.append(model)
    agent = _agent(model)
    again = HumanMessage("hello")
    agent.invoke({"messages": [again]}, thread("same"))
    result = agent.invoke({"messages": [again]}, thread("same"))
    assert texts(model.requests[1]) == ["hello", "first answer", "hello"]
    assert texts(result["messages"]) == ["hello", "first answer", "hello", "second answer"]
    ids = [m.id for m in result["messages"]]
    assert len(set(ids)) == len(ids), ids


def test_unknown_role_is_a_value_error_and_the_thread_stays_readable(
        scripted: list[ScriptedChatModel]) -> None:
    """Error (nothing to repair: the role means nothing to us). LangChain's own message
    coercion raises ``ValueError`` for it; the point is *when*: before the input is written,
    so ``get_state`` keeps working and the next good run continues the thread."""
    agent, model = _with_one_turn(scripted, "role", "still here")
    text = assert_rejected(
        agent, model, thread("role"),
        lambda: agent.invoke({"messages": [{"role": "wizard", "content": "abracadabra"}]},
                             thread("role")))
    assert "wizard" in text, text
    assert stored(agent, thread("role"))[0][-1][:2] == ("ai", "hello")
    result = agent.invoke({"messages": [HumanMessage("are you there?")]}, thread("role"))
    assert texts(result["messages"]) == ["hi", "hello", "are you there?", "still here"]


def test_update_state_is_checked_like_an_input(scripted: list[ScriptedChatModel]) -> None:
    """The same rules through ``update_state`` (added with the fix): an orphan ToolMessage
    is a ``ValueError`` and writes nothing; an AIMessage whose calls the update ends on stays
    open (the tools may still answer them), and a new turn answers it as not executed."""
    RAN.clear()
    agent, model = _with_one_turn(scripted, "update", "four")
    config = thread("update")
    text = assert_rejected(agent, model, config, lambda: agent.update_state(
        config, {"messages": [ToolMessage("3", tool_call_id="ghost")]}))
    assert "ghost" in text and "message 0" in text, text
    agent.update_state(config, {"messages": [_call("u1")]})
    assert kinds(agent.get_state(config).values["messages"])[-1] == "ai+calls"
    result = agent.invoke({"messages": [HumanMessage("go on")]}, config)
    assert kinds(model.requests[-1])[-3:] == ["ai+calls", "tool:error", "human"]
    assert RAN == [] and result["messages"][-1].content == "four"
    assert_valid(result["messages"])
