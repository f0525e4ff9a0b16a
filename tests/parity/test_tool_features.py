"""Issue 20, item 1: every LangGraph tool feature behaves under ``create_loop_agent`` as under
LangChain's ``create_agent`` (same tool results, same state updates, same final messages, same
messages seen by the model)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain.agents import AgentState, create_agent
from langchain.tools import InjectedState, InjectedStore, ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt

from langgraph_loop import LoopState, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.parity.compare import call, calls, normalise_messages, run_both, scripted

ASK = {"messages": [HumanMessage("please help")]}


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# --------------------------------------------------------------------------- injections


@tool
def count_messages(note: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Count the messages so far."""
    first = state["messages"][0].content
    return f"{note}: {len(state['messages'])} messages, first {first!r}"


def test_injected_state() -> None:
    pair = run_both(scripted(calls(call("count_messages", {"note": "n"}, "c1")), "done"),
                    [count_messages], ASK)
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "n: 2 messages, first 'please help'"


@tool
def last_words(messages: Annotated[list[Any], InjectedState("messages")]) -> str:
    """The first message's text (the messages field injected alone)."""
    return f"{len(messages)} messages; first: {messages[0].content}"


def test_injected_state_field() -> None:
    pair = run_both(scripted(calls(call("last_words", {}, "c1")), "done"), [last_words], ASK)
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "2 messages; first: please help"


class UserAgentState(AgentState):
    user_name: str


class UserLoopState(LoopState):
    user_name: str


@tool
def greet(greeting: str, user_name: Annotated[str, InjectedState("user_name")]) -> str:
    """Greet the user by the name stored in the state."""
    return f"{greeting}, {user_name}!"


def test_injected_state_custom_field() -> None:
    """``InjectedState("user_name")`` reads a key of the user's ``state_schema``."""
    pair = run_both(scripted(calls(call("greet", {"greeting": "Hello"}, "c1")), "done"), [greet],
                    {**ASK, "user_name": "Ada"},
                    reference={"state_schema": UserAgentState}, loop={"state_schema": UserLoopState})
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "Hello, Ada!"
    assert pair.loop.state["user_name"] == "Ada"


@tool
def preference(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Read a user preference from the store."""
    item = store.get(("prefs", "u1"), key)
    return f"{key}={item.value['v'] if item else None}"


def test_injected_store() -> None:
    def make_store() -> InMemoryStore:
        store = InMemoryStore()
        store.put(("prefs", "u1"), "color", {"v": "green"})
        return store

    script = scripted(calls(call("preference", {"key": "color"}, "c1")), "green it is")
    pair = run_both(script, [preference], ASK,
                    reference={"store": make_store()}, loop={"store": make_store()})
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "color=green"


@tool
def whoami(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Report the id of this call."""
    return f"call id {tool_call_id}"


def test_injected_tool_call_id() -> None:
    pair = run_both(scripted(calls(call("whoami", {}, "c-42")), "done"), [whoami], ASK)
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "call id c-42"


@dataclass
class UserContext:
    user_id: str


def account_tool() -> BaseTool:
    """A ``ToolRuntime`` tool, built when its test runs: under the lowest versions pyproject.toml
    allows (langchain-core 1.7.0, pydantic 2.10.0) building its schema raises, and a module-level
    definition would take the whole module down with it."""

    @tool
    def account(field: str, runtime: ToolRuntime[UserContext]) -> str:
        """Read the user's account from the runtime context."""
        return (f"{field} of {runtime.context.user_id} (call {runtime.tool_call_id}, "
                f"{len(runtime.state['messages'])} messages, store {runtime.store is not None})")

    return account


def test_tool_runtime_with_context_schema() -> None:
    account = account_tool()
    pair = run_both(scripted(calls(call("account", {"field": "plan"}, "c1")), "done"), [account], ASK,
                    common={"context_schema": UserContext}, context=UserContext(user_id="u-7"))
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "plan of u-7 (call c1, 2 messages, store False)"


# --------------------------------------------------------------------------- Command returns


class NotesAgentState(AgentState):
    notes: Annotated[list[str], operator.add]
    visits: Annotated[int, operator.add]


class NotesLoopState(LoopState):
    notes: Annotated[list[str], operator.add]
    visits: Annotated[int, operator.add]


@tool
def take_note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Store a note in the state."""
    return Command(update={
        "notes": [text], "visits": 1,
        "messages": [ToolMessage(f"noted {text}", tool_call_id=tool_call_id)],
    })


def test_command_update_custom_keys() -> None:
    script = scripted(calls(call("take_note", {"text": "a"}, "c1"), call("take_note", {"text": "b"}, "c2")),
                      "noted both")
    pair = run_both(script, [take_note], {**ASK, "notes": [], "visits": 0},
                    reference={"state_schema": NotesAgentState}, loop={"state_schema": NotesLoopState})
    pair.assert_same()
    assert sorted(pair.loop.state["notes"]) == ["a", "b"]
    assert pair.loop.state["visits"] == 2


@tool
def escalate(reason: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Answer the call and add a message for the model."""
    return Command(update={"messages": [
        ToolMessage("escalated", tool_call_id=tool_call_id),
        HumanMessage(f"A supervisor says: {reason} is approved."),
    ]})


def test_command_with_extra_messages() -> None:
    pair = run_both(scripted(calls(call("escalate", {"reason": "refund"}, "c1")), "refund approved"),
                    [escalate], ASK)
    pair.assert_same()
    assert [m.type for m in pair.loop.messages] == ["human", "ai", "tool", "human", "ai"]


@tool
def finish_now(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """End the run at once."""
    done = ToolMessage("finished by the tool", tool_call_id=tool_call_id)
    return Command(goto=END, update={"messages": [done]})


def test_command_goto() -> None:
    """A tool's ``Command(goto=END)``: under ``create_agent`` the goto joins the tools node's own
    edge (the model still answers the tool result); the loop must route the same way."""
    model = scripted(calls(call("finish_now", {}, "c1")), "after the tool")
    pair = run_both(model, [finish_now], ASK)
    pair.assert_same()
    assert [m.type for m in pair.loop.messages] == ["human", "ai", "tool", "ai"]


@tool
def transfer_to_billing(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Hand the conversation to the billing agent (a node of the parent graph)."""
    done = ToolMessage("transferred to billing", tool_call_id=tool_call_id)
    return Command(goto="billing", graph=Command.PARENT, update={"messages": [done]})


def _in_parent(build: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """The agent as a node of a parent graph whose ``billing`` node a tool can hand off to."""
    model = ScriptedChatModel(script=[calls(call("transfer_to_billing", {}, "c1")), "unreachable"])
    agent = build(model, [transfer_to_billing])
    parent = StateGraph(MessagesState)
    parent.add_node("agent", agent, destinations=("billing",))
    parent.add_node("billing", lambda state: {"messages": [AIMessage("billing here", name="billing")]})
    parent.add_edge(START, "agent")
    parent.add_edge("billing", END)
    result = parent.compile().invoke(ASK)
    return normalise_messages(result["messages"]), [normalise_messages(r) for r in model.requests]


def test_command_goto_parent_handoff() -> None:
    """``Command(goto=..., graph=Command.PARENT)`` leaves the agent and routes the parent graph
    (what a ``langgraph-swarm`` handoff is), carrying the tool's ToolMessage along."""
    reference = _in_parent(create_agent)
    assert reference[0][-1]["content"] == "billing here"
    assert _in_parent(create_loop_agent) == reference


@tool(return_direct=True)
def final_lookup(key: str) -> str:
    """Look a value up; its result is the answer."""
    return f"value of {key} is 42"


def test_return_direct() -> None:
    model = scripted(calls(call("final_lookup", {"key": "k"}, "c1")), "the model must not be called again")
    pair = run_both(model, [final_lookup], ASK)
    pair.assert_same()
    assert pair.loop.messages[-1].content == "value of k is 42"
    assert len(pair.loop.seen) == 1


@tool(response_format="content_and_artifact")
def fetch_rows(table: str) -> tuple[str, dict[str, Any]]:
    """Fetch rows: a summary for the model, the rows as an artifact."""
    return f"2 rows from {table}", {"rows": [[1, "a"], [2, "b"]]}


def test_content_and_artifact() -> None:
    pair = run_both(scripted(calls(call("fetch_rows", {"table": "t"}, "c1")), "two rows"), [fetch_rows], ASK)
    pair.assert_same()
    [result] = tool_messages(pair.loop.messages)
    assert (result.content, result.artifact) == ("2 rows from t", {"rows": [[1, "a"], [2, "b"]]})


async def _slow_double(x: int) -> int:
    return 2 * x


async_only = StructuredTool.from_function(coroutine=_slow_double, name="double", description="Double x.")


def test_async_only_tool() -> None:
    pair = run_both(scripted(calls(call("double", {"x": 21}, "c1")), "42"), [async_only], ASK,
                    invoke="ainvoke")
    pair.assert_same()
    assert tool_messages(pair.loop.messages)[0].content == "42"


# --------------------------------------------------------------------------- interrupts


@tool
def ask_human(question: str) -> str:
    """Ask a human and wait for the answer."""
    answer = interrupt({"question": question})
    return f"human said {answer}"


def _answer_all(result: dict[str, Any]) -> Command:
    return Command(resume={i.id: f"yes to {i.value['question']}" for i in result["__interrupt__"]})


def test_tool_interrupts_surface_together() -> None:
    script = scripted(calls(call("ask_human", {"question": "q1"}, "c1"),
                            call("ask_human", {"question": "q2"}, "c2")), "thanks")
    pair = run_both(script, [ask_human], [ASK, _answer_all])
    pair.assert_same()
    assert len(pair.loop.results[0]["__interrupt__"]) == 2
    assert sorted(m.content for m in tool_messages(pair.loop.messages)) == ["human said yes to q1",
                                                                          "human said yes to q2"]


# --------------------------------------------------------------------------- tool errors


@tool
def strict_add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _flaky(x: str) -> str:
    """A tool that reports its own failure."""
    raise ToolException(f"backend unavailable for {x}")


flaky = StructuredTool.from_function(_flaky, name="flaky", handle_tool_error=True)


def test_tool_errors_become_error_tool_messages() -> None:
    """Invalid arguments and a handled ``ToolException`` become error ToolMessages in both,
    with the same text."""
    script = scripted(calls(call("strict_add", {"a": "not a number", "b": 1}, "c1"),
                            call("flaky", {"x": "q"}, "c2")), "sorry")
    pair = run_both(script, [strict_add, flaky], ASK)
    pair.assert_same()
    results = tool_messages(pair.loop.messages)
    assert [m.status for m in results] == ["error", "error"]
    assert results[1].content == "backend unavailable for q"


@tool
def crashing(x: str) -> str:
    """A tool with a bug."""
    raise RuntimeError(f"bug on {x}")


def test_loop_default_turns_any_tool_exception_into_an_error_message() -> None:
    """The loop's documented default (DESIGN: "turns tool errors ... into error ToolMessages"):
    unlike ``create_agent``, an unexpected exception is reported to the model, not raised."""
    pair = run_both(scripted(calls(call("crashing", {"x": "a"}, "c1")), "it failed"), [crashing], ASK)
    assert isinstance(pair.reference.error, RuntimeError)
    assert pair.loop.error is None
    [result] = tool_messages(pair.loop.messages)
    assert result.status == "error"
    assert "bug on a" in str(result.content)
    assert pair.loop.messages[-1].content == "it failed"


def test_tool_exception_can_propagate() -> None:
    """``handle_tool_errors=False`` (ToolNode's switch) lets the exception out of the run, as
    ``create_agent`` does for an unexpected exception."""
    pair = run_both(scripted(calls(call("crashing", {"x": "a"}, "c1")), "unreachable"), [crashing], ASK,
                    loop={"handle_tool_errors": False})
    assert isinstance(pair.reference.error, RuntimeError)
    pair.assert_same()


@pytest.mark.parametrize("handler", ["a fixed text", "callable"])
def test_handle_tool_errors_custom_handler(handler: str) -> None:
    """ToolNode's ``handle_tool_errors`` as a text or a callable shapes the error message."""
    choice: Any = handler if handler != "callable" else (lambda exc: f"handled: {exc}")
    pair = run_both(scripted(calls(call("crashing", {"x": "a"}, "c1")), "ok"), [crashing], ASK,
                    loop={"handle_tool_errors": choice})
    assert pair.loop.error is None, pair.loop.error_text()
    [result] = tool_messages(pair.loop.messages)
    assert result.content == ("a fixed text" if handler != "callable" else "handled: bug on a")
    assert isinstance(pair.loop.messages[-1], AIMessage)
