"""Every way of running works: invoke, ainvoke, stream/astream with each stream mode; a reply
whose text runs away is cut while it streams, through real clients and loopback servers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_loop import Iterations, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.config import DEFAULT_LAYERS
from langgraph_loop.core.messages import is_cut
from langgraph_loop.core.prompts import CUT_REPLY
from langgraph_loop.engine.detection import text_cut_text
from langgraph_loop.scripted import ScriptedChatModel, repeat
from tests.helpers import add, thread
from tests.support import anthropic_server as claude
from tests.support.anthropic_server import AnthropicServer
from tests.support.openai_server import OpenAIServer, StreamLog, text, tool_calls


def _agent(model: ScriptedChatModel, **kw: object):  # type: ignore[no-untyped-def]
    return create_loop_agent(model, [add], **kw)  # type: ignore[arg-type]


def test_stream_updates_names_each_node_in_order(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 1})], "two"])
    scripted.append(model)
    nodes = [next(iter(part)) for part in _agent(model).stream(
        {"messages": [HumanMessage("1+1")]}, stream_mode="updates")]
    assert nodes == ["prepare", "model", "tools", "model", "router"]


def test_stream_values_ends_with_the_final_state(scripted: list) -> None:
    model = ScriptedChatModel(script=["hello"])
    scripted.append(model)
    states = list(_agent(model).stream({"messages": [HumanMessage("hi")]}, stream_mode="values"))
    assert states[-1]["stop_reason"] == StopReason.COMPLETED
    assert states[-1]["messages"][-1].content == "hello"


def test_stream_messages_yields_model_tokens(scripted: list) -> None:
    model = ScriptedChatModel(script=["the answer is forty two"])
    scripted.append(model)
    chunks = [(msg, meta) for msg, meta in _agent(model).stream(
        {"messages": [HumanMessage("q")]}, stream_mode="messages")
        if isinstance(msg, AIMessageChunk)]
    assert "".join(str(m.content) for m, _ in chunks) == "the answer is forty two"
    assert len(chunks) >= 5
    assert {meta["langgraph_node"] for _, meta in chunks} == {"model"}


def test_stream_custom_reports_tool_calls_and_the_stop(scripted: list) -> None:
    model = ScriptedChatModel(default=repeat([("add", {"a": 1, "b": 1})]), no_tools_reply="ok")
    scripted.append(model)
    agent = _agent(model, loop_detection=None, iterations=Iterations(max_model_calls=2))
    events = list(agent.stream({"messages": [HumanMessage("x")]}, stream_mode="custom"))
    kinds = [e["event"] for e in events]
    assert kinds.count("tool_call") == 1
    stop = next(e for e in events if e["event"] == "stop")
    assert stop["reason"] == "max_model_calls"


MARKDOWN = json.loads((Path(__file__).parents[1] / "data" / "markdown_answers.json").read_text())["answers"]
TABLES = [a["text"] for a in MARKDOWN if not a["loop"] and ("separator" in a["name"] or "wide" in a["name"])]
CHANTS = [a["text"] for a in MARKDOWN if a["loop"] and a["name"] in (
    "a sentence chanted", "a table row repeated", "a reply looping after a real table")]


@pytest.mark.parametrize("answer", TABLES)
def test_a_table_answer_streams_whole_and_is_not_cut(scripted: list, answer: str) -> None:
    """Wide tables and their long separator rows, streamed word by word with
    ``stream_mode="messages"``: the user sees the whole answer and the thread stores it."""
    model = ScriptedChatModel(script=[answer])
    scripted.append(model)
    parts = list(_agent(model).stream({"messages": [HumanMessage("fares?")]},
                                      stream_mode=["messages", "values"]))
    shown = "".join(str(m.content) for mode, (m, _) in ((k, p) for k, p in parts if k == "messages")
                    if isinstance(m, AIMessageChunk))
    final = [p for k, p in parts if k == "values"][-1]
    assert shown == answer and final["messages"][-1].content == answer
    assert not is_cut(final["messages"][-1]) and len(model.requests) == 1
    assert final["stop_reason"] == StopReason.COMPLETED


@pytest.mark.parametrize("answer", CHANTS)
def test_a_chanting_reply_is_cut_while_it_streams(scripted: list, answer: str) -> None:
    model = ScriptedChatModel(script=[answer, "The flight is booked."])
    scripted.append(model)
    parts = list(_agent(model).stream({"messages": [HumanMessage("book it")]},
                                      stream_mode=["messages", "values"]))
    final = [p for k, p in parts if k == "values"][-1]
    cut = next(m for m in final["messages"] if is_cut(m))
    assert answer.startswith(str(cut.content)) and len(str(cut.content)) < len(answer)
    assert final["messages"][-1].content == "The flight is booked."


async def test_astream_with_checkpointer_and_two_runs(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 2, "b": 2})], "four", "bye"])
    scripted.append(model)
    agent = _agent(model, checkpointer=InMemorySaver())
    parts = [p async for p in agent.astream({"messages": [HumanMessage("2+2")]}, thread("a"),
                                            stream_mode=["updates", "custom"])]
    assert ("custom", {"event": "tool_call", "name": "add", "args": {"a": 2, "b": 2},
                       "status": "success", "iteration": 1}) in [
        (mode, {k: v for k, v in data.items() if k != "duration_s"})
        for mode, data in parts if mode == "custom"]
    result = await agent.ainvoke({"messages": [HumanMessage("bye?")]}, thread("a"))
    assert result["messages"][-1].content == "bye"
    assert result["iteration"] == 1
    history = [s async for s in agent.aget_state_history(thread("a"))]
    assert len(history) > 8


# --- a runaway reply is cut while it streams -------------------------------------------------

RUNAWAY = "I will fix the typo now. " * 4000  # 100,000 characters, streamed in 4,000 chunks
AGAIN = "Wait, let me look at the file again. " * 3000
LIVE = {"chunk_chars": 25, "chunk_delay": 0.002}  # a live model: a chunk every 2 ms
ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    ran.append(city)
    return "sunny"


def openai_chat(server: OpenAIServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("test"), model="m",
                      max_retries=0, stream_usage=True, **kwargs)


def closed_early(stream: StreamLog) -> bool:
    """The server saw the client close this stream before its last event (it notices at its
    next write, a moment after the client's close)."""
    deadline = time.monotonic() + 5
    while not stream.closed_by_client and time.monotonic() < deadline:
        time.sleep(0.01)
    return stream.closed_by_client and stream.sent < stream.total


def cut_reply(result: dict[str, Any], index: int = 1) -> Any:
    reply = result["messages"][index]
    assert reply.response_metadata["langgraph_loop_cut"] == "text"
    return reply


def test_a_runaway_reply_is_cut_and_the_model_asked_again(openai_server: OpenAIServer) -> None:
    openai_server.script += [text(RUNAWAY, **LIVE), text("The typo is fixed.")]
    agent = create_loop_agent(openai_chat(openai_server, streaming=True))
    result = agent.invoke({"messages": [HumanMessage("Fix the typo.")]})

    first = openai_server.streams[0]
    assert closed_early(first) and first.sent < 40 and first.total == 4004
    cut = cut_reply(result)
    assert RUNAWAY.startswith(cut.content) and 250 < len(cut.content) < 1000
    assert openai_server.requests[1]["messages"] == [
        {"role": "user", "content": "Fix the typo."},
        {"role": "assistant", "content": cut.content},
        {"role": "user", "name": "loop_notice", "content": text_cut_text()},
    ]
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["messages"][-1].content == "The typo is fixed."
    assert result["iterations"][0]["model_calls"] == 2


async def test_a_runaway_reply_is_cut_async_and_the_stream_showed_what_was_generated(
        openai_server: OpenAIServer) -> None:
    """No ``streaming=True``: ``stream_mode="messages"`` makes LangChain stream the call."""
    openai_server.script += [text(RUNAWAY, **LIVE), text("The typo is fixed.")]
    agent = create_loop_agent(openai_chat(openai_server))
    chunks: list[AIMessageChunk] = []
    async for mode, data in agent.astream({"messages": [HumanMessage("Fix the typo.")]},
                                          stream_mode=["messages", "values"]):
        if mode == "messages" and isinstance(data[0], AIMessageChunk):
            chunks.append(data[0])
        elif mode == "values":
            result = data
    assert closed_early(openai_server.streams[0])
    cut = cut_reply(result)
    assert "".join(str(c.content) for c in chunks if c.id == cut.id) == cut.content
    assert openai_server.requests[1]["messages"][-1]["content"] == text_cut_text()
    assert result["messages"][-1].content == "The typo is fixed."


def _normal_run_parts(server: OpenAIServer, layers: tuple[str, ...], mode: str) -> Any:
    server.script += [tool_calls([("get_weather", {"city": "Paris"})]),
                      text("It is sunny in Paris, 18 degrees, a light wind from the west.")]
    agent = create_loop_agent(openai_chat(server), [get_weather],
                              loop_detection=LoopDetection(layers=layers))
    ask = {"messages": [HumanMessage("Weather in Paris?")]}
    if mode == "sync":
        return list(agent.stream(ask, stream_mode=["messages", "values"]))

    async def collect() -> list[Any]:
        return [part async for part in agent.astream(ask, stream_mode=["messages", "values"])]
    return collect()


def _seen(parts: list[Any]) -> tuple[list[Any], list[Any]]:
    """What the user saw (chunks and their metadata, run-specific ids left out) and the
    stored messages."""
    volatile = {"checkpoint_ns", "langgraph_checkpoint_ns", "langgraph_task_id"}
    chunks = [(msg.model_dump(exclude={"id"}), {k: v for k, v in meta.items() if k not in volatile})
              for mode, (msg, meta) in ((m, d) for m, d in parts if m == "messages")]
    final = [d for m, d in parts if m == "values"][-1]["messages"]
    return chunks, [m.model_dump(exclude={"id"}) for m in final]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_normal_streamed_reply_is_the_same_as_without_the_cut(mode: str) -> None:
    """With the ``text`` layer on the call is streamed by the model node; without it LangChain
    streams it inside ``invoke`` (as before). The user sees the same chunks, the thread holds
    the same messages."""
    seen = []
    for layers in (DEFAULT_LAYERS, tuple(x for x in DEFAULT_LAYERS if x != "text")):
        with OpenAIServer() as server:
            parts = _normal_run_parts(server, layers, mode)
            seen.append(_seen(parts if mode == "sync" else await parts))
    assert seen[0] == seen[1]
    assert len(seen[0][0]) >= 8 and seen[0][1][-1]["content"].startswith("It is sunny")


def test_a_second_cut_stops_the_run_and_the_thread_stays_valid(openai_server: OpenAIServer) -> None:
    """The second runaway streams half a tool call before its text: the cut reply keeps no
    call, the tool never runs, the final answer comes without tools, and the thread goes on."""
    ran.clear()
    openai_server.script += [
        text(RUNAWAY, **LIVE),
        tool_calls([("get_weather", {"city": "Paris"})], content=AGAIN, call_first=True, **LIVE),
        text("Sorry: I could not fix the typo."), text("You are welcome."),
    ]
    agent = create_loop_agent(openai_chat(openai_server, streaming=True), [get_weather],
                              checkpointer=InMemorySaver())
    result = agent.invoke({"messages": [HumanMessage("Fix the typo.")]}, thread("cut"))

    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    guard = result["iterations"][-1]["guard"]
    assert (guard["guard"], guard["layer"], guard["count"]) == ("loop_detector", "text", 2)
    assert guard["began"] == {"response": None, "message_id": cut_reply(result).id}
    there = {"configurable": {"thread_id": "cut", "checkpoint_ns": "",
                              "checkpoint_id": guard["checkpoint_id"]}}
    assert agent.get_state(there).next == ("model",)  # time travel: just before the first cut
    assert all(closed_early(s) for s in openai_server.streams[:2])
    second = cut_reply(result, 3)
    assert second.tool_calls == [] and AGAIN.startswith(second.content)
    assert second.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"] == "get_weather"
    assert ran == []
    final = openai_server.requests[2]
    assert [m["role"] + (":" + m["name"] if "name" in m else "") for m in final["messages"]] == [
        "user", "assistant", "user:loop_notice", "assistant", "user:stop_notice"]
    assert final["messages"][-1]["content"].startswith(
        "The run has been stopped because your replies kept repeating the same text.")
    assert final["tool_choice"] == "none"
    assert result["messages"][-1].content == "Sorry: I could not fix the typo."
    again = agent.invoke({"messages": [HumanMessage("Thanks.")]}, thread("cut"))
    assert again["stop_reason"] == StopReason.COMPLETED
    assert len(openai_server.requests[3]["messages"]) == 7  # every message before, then "Thanks."


@pytest.mark.parametrize("where", ["text", "thinking"])
async def test_a_runaway_reply_is_cut_through_anthropic(anthropic_server: AnthropicServer,
                                                        where: str) -> None:
    """The reply runs away in its text (after a signed thinking block) or in its thinking: the
    cut reply keeps no thinking block (one cut before its signature is rejected) and never
    goes back empty; Anthropic's rules hold for every request (the fixture checks them)."""
    runaway = (claude.text(RUNAWAY, thinking="The typo is on line 3.", **LIVE) if where == "text"
               else claude.text("Fixing it.", thinking=RUNAWAY, **LIVE))
    anthropic_server.script += [runaway, claude.text("The typo is fixed.")]
    model = ChatAnthropic(base_url=anthropic_server.base_url, api_key=SecretStr("test"),
                          model="claude-test", max_retries=0, streaming=True, max_tokens=4096,
                          thinking={"type": "enabled", "budget_tokens": 1024})
    result = await create_loop_agent(model).ainvoke({"messages": [HumanMessage("Fix the typo.")]})

    assert closed_early(anthropic_server.streams[0])
    cut = cut_reply(result)
    sent = anthropic_server.accepted[1]["messages"]
    assert sent[0] == {"role": "user", "content": "Fix the typo."}
    assert sent[2] == {"role": "user", "content": text_cut_text()}
    if where == "text":
        assert [b["type"] for b in cut.content] == ["text"]
        assert RUNAWAY.startswith(cut.content[0]["text"]) and len(cut.content[0]["text"]) < 1000
        assert sent[1] == {"role": "assistant", "content": [{"type": "text", "text": cut.content[0]["text"]}]}
    else:
        assert cut.content == CUT_REPLY
        assert sent[1] == {"role": "assistant", "content": CUT_REPLY}
    assert result["messages"][-1].content[-1]["text"] == "The typo is fixed."


def test_a_run_that_does_not_stream_is_not_cut_and_warned_after_the_reply(
        openai_server: OpenAIServer) -> None:
    looping = "I will fix the typo now. " * 40
    openai_server.script += [tool_calls([("get_weather", {"city": "Paris"})], content=looping),
                             text("Sunny.")]
    result = create_loop_agent(openai_chat(openai_server), [get_weather]).invoke(
        {"messages": [HumanMessage("Weather in Paris?")]})

    assert openai_server.streams == [] and not any(b.get("stream") for b in openai_server.requests)
    assert result["messages"][1].content == looping
    assert "langgraph_loop_cut" not in result["messages"][1].response_metadata
    warning = openai_server.requests[1]["messages"][-1]
    assert warning["name"] == "loop_notice" and "repeats the same text" in warning["content"]


def test_without_the_text_layer_a_runaway_streams_to_its_end(openai_server: OpenAIServer) -> None:
    looping = "I will fix the typo now. " * 200
    openai_server.script += [text(looping, chunk_chars=25)]
    agent = create_loop_agent(openai_chat(openai_server, streaming=True),
                              loop_detection=LoopDetection(layers=("no_progress", "repeat")))
    result = agent.invoke({"messages": [HumanMessage("Fix the typo.")]})

    stream = openai_server.streams[0]
    assert (stream.sent, stream.closed_by_client) == (stream.total, False)
    assert result["messages"][-1].content == looping
