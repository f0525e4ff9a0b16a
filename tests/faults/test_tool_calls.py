"""Issue 21, tool calls and outputs: whatever a model asks for and whatever a tool returns,
every call gets exactly one answer, the request and the stored transcript agree, what the
model said is not changed by a tool, the output cap covers every content shape, and tools
cannot write the loop's own keys."""

from __future__ import annotations

import copy
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Limits, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import Meter, assert_valid, kinds, text_of, thread

RAN: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add({a},{b})")
    return a + b


def _asking(*calls: tuple[str, dict[str, Any], Any]) -> AIMessage:
    """A model reply with these ``(name, args, id)`` calls, ids as given (even bad ones)."""
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"}
                                     for n, a, i in calls])


def _calls(message: Any) -> list[Any]:
    assert isinstance(message, AIMessage)
    return list(message.tool_calls)


def _call_ids(message: Any) -> list[Any]:
    return [c["id"] for c in _calls(message)]


def test_two_parallel_calls_sharing_one_id_both_run_under_unique_ids(
        scripted: list[ScriptedChatModel]) -> None:
    """Repair: the second call gets a fresh unique id, recorded on the AIMessage before it
    is stored, so the request and the transcript agree and both results reach the model
    (today one result is lost and the request carries duplicate ids)."""
    RAN.clear()
    model = ScriptedChatModel(script=[_asking(("add", {"a": 1, "b": 2}, "dup"),
                                              ("add", {"a": 2, "b": 2}, "dup")), "3 and 4"])
    scripted.append(model)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    result = agent.invoke({"messages": [HumanMessage("1+2 and 2+2?")]}, thread("dup"))
    assert sorted(RAN) == ["add(1,2)", "add(2,2)"]
    request = model.requests[1]
    ids = _call_ids(request[1])
    assert len(set(ids)) == 2 and all(isinstance(i, str) and i for i in ids), ids
    answers = [(getattr(m, "tool_call_id", None), m.content) for m in request[2:]]
    assert answers == list(zip(ids, ["3", "4"], strict=True))
    assert _call_ids(result["messages"][1]) == ids
    assert_valid(result["messages"])


def test_a_call_without_an_id_runs_under_a_fresh_id(scripted: list[ScriptedChatModel]) -> None:
    """Repair: a call with ``id=None`` (some providers and hand-built messages omit it) gets
    a fresh unique id recorded on the AIMessage, runs, and is answered (today it is skipped
    and the next request is invalid)."""
    RAN.clear()
    model = ScriptedChatModel(script=[_asking(("add", {"a": 1, "b": 2}, None)), "three"])
    scripted.append(model)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    result = agent.invoke({"messages": [HumanMessage("1+2?")]}, thread("none"))
    assert RAN == ["add(1,2)"]
    request = model.requests[1]
    (call_id,) = _call_ids(request[1])
    assert isinstance(call_id, str) and call_id and call_id != "None"
    assert kinds(request) == ["human", "ai+calls", "tool:success"]
    assert isinstance(request[2], ToolMessage)
    assert request[2].tool_call_id == call_id and request[2].content == "3"
    assert _call_ids(result["messages"][1]) == [call_id]


@tool
def own_message(x: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
    """Answer with a ToolMessage addressed to another call."""
    return ToolMessage(f"got {x}", tool_call_id="wrong-id")


@tool
def own_command(x: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Answer with a Command whose ToolMessage is addressed to another call."""
    return Command(update={"messages": [ToolMessage(f"got {x}", tool_call_id="wrong-id")]})


@pytest.mark.parametrize("answering", [own_message, own_command], ids=lambda t: t.name)
def test_a_tool_answering_another_call_gets_an_error_result_for_its_own(
        scripted: list[ScriptedChatModel], answering: BaseTool) -> None:
    """Error result for that call, nothing orphaned. A tool's ToolMessage (or the one in its
    ``Command``) must answer the tool's own call; LangGraph's ``ToolNode`` refuses a
    ``Command`` without a matching ToolMessage too ("Expected to have a matching ToolMessage
    in Command.update"). Here the refusal is the call's error result, so the model can go
    on and the thread stays valid."""
    model = ScriptedChatModel(script=[[(answering.name, {"x": 1})], "sorry"])
    scripted.append(model)
    agent = create_loop_agent(model, [answering], checkpointer=InMemorySaver())
    result = agent.invoke({"messages": [HumanMessage("go")]}, thread(answering.name))
    request = model.requests[1]
    (call_id,) = _call_ids(request[1])
    assert kinds(request) == ["human", "ai+calls", "tool:error"]
    assert isinstance(request[2], ToolMessage) and request[2].tool_call_id == call_id
    assert all(getattr(m, "tool_call_id", None) != "wrong-id" for m in result["messages"])
    assert_valid(result["messages"])


SEEN: list[Any] = []


@tool
def tag(doc: dict[str, Any]) -> str:
    """Tag a document (and, carelessly, change the argument it was given)."""
    SEEN.append(copy.deepcopy(doc))
    doc["tags"].append("seen")
    doc["extra"] = True
    return "tagged"


def test_a_tool_mutating_its_nested_args_does_not_change_what_the_model_said(
        scripted: list[ScriptedChatModel]) -> None:
    """The tool receives a deep copy of the args: the next request and the stored thread
    show the call exactly as the model made it."""
    SEEN.clear()
    said = {"doc": {"tags": ["draft"]}}
    model = ScriptedChatModel(script=[[("tag", said)], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [tag], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("tag it")]}, thread("tag"))
    assert SEEN == [{"tags": ["draft"]}]  # what the tool was given
    assert _calls(model.requests[1][1])[0]["args"] == {"doc": {"tags": ["draft"]}}
    stored = agent.get_state(thread("tag")).values["messages"]
    assert stored[1].tool_calls[0]["args"] == {"doc": {"tags": ["draft"]}}


BIG = 200_000


@tool(response_format="content")
def mcp_like() -> list[dict[str, Any]]:
    """Return one huge text block (the shape MCP tools return)."""
    return [{"type": "text", "text": "x" * BIG}]


@tool(response_format="content")
def many_blocks() -> list[dict[str, Any]]:
    """Return many text blocks that are huge together."""
    return [{"type": "text", "text": "y" * 1000} for _ in range(BIG // 1000)]


@pytest.mark.parametrize("dumping", [mcp_like, many_blocks], ids=lambda t: t.name)
def test_the_output_cap_covers_content_blocks(scripted: list[ScriptedChatModel],
                                              dumping: BaseTool) -> None:
    """The cap covers every content shape: block lists are cut to
    ``max_tool_output_chars`` of text, with the truncation note, like strings are."""
    model = ScriptedChatModel(script=[[(dumping.name, {})], "ok"])
    scripted.append(model)
    agent = create_loop_agent(model, [dumping], limits=Limits(max_tool_output_chars=1000))
    agent.invoke({"messages": [HumanMessage("dump")]})
    sent = model.requests[1][-1]
    assert isinstance(sent, ToolMessage)
    shown = text_of(sent.content)
    size = len(shown)
    assert size <= 1000 + 200, f"{size} characters of tool output reached the model"
    assert "truncated" in shown


def test_a_tool_command_cannot_overwrite_the_run_usage(scripted: list[ScriptedChatModel]) -> None:
    """Loop-owned keys cannot be written by tools: a tool's ``Command`` setting ``usage``
    to zero does not reset the run's accounting, so ``token_budget`` still holds (today
    about 880 tokens are billed under a budget of 500). The same tool without the ``usage``
    write stops at about 400."""

    @tool
    def step(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Do one step (and reset the run's usage)."""
        zero = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        return Command(update={"usage": zero, "messages": [
            ToolMessage("step done", tool_call_id=tool_call_id)]})

    meter = Meter()
    model = ScriptedChatModel(default=lambda _m: [("step", {})], no_tools_reply="final",
                              callbacks=[meter])
    scripted.append(model)
    agent = create_loop_agent(model, [step], limits=Limits(token_budget=500),
                              loop_detection=None)
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == "token_budget"
    assert meter.total <= 500, meter.billed
    assert result["usage"]["total_tokens"] == meter.total
