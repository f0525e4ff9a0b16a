"""What a UI receives, in order (issue 31.5): a notice reaches ``stream_mode="messages"``
before the reply it preceded, the stop notice before the final answer, the loop's events reach
``astream_events``, and every model call the loop makes on its own is tagged and named; through
``langchain-openai`` against the loopback OpenAI server."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_loop import Compaction, Iterations, Judge, StopReason, create_loop_agent
from langgraph_loop.core.messages import NOTICE_NAMES
from tests.helpers import add, thread
from tests.support.openai_server import OpenAIServer, text, tool_calls

REPEAT = tool_calls([("add", {"a": 1, "b": 1})])


def chat(server: OpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("test"), model="m",
                      max_retries=0, streaming=True, stream_usage=True)


def _key(message: BaseMessage) -> str:
    return "notice" if message.name in NOTICE_NAMES else str(message.id)


def _first_at(parts: list[tuple[BaseMessage, dict[str, Any]]], key: str) -> int:
    return next(i for i, (m, _) in enumerate(parts) if _key(m) == key)


def test_a_notice_and_the_stop_notice_come_before_the_replies_they_preceded(
        openai_server: OpenAIServer) -> None:
    """Warned on the 3rd repeat, stopped on the 4th (``loop_detected``): each notice is in the
    stream before the first token of the reply the model wrote after seeing it."""
    openai_server.script += [REPEAT] * 4 + [text("Two, as computed.")]
    agent = create_loop_agent(chat(openai_server), [add], checkpointer=InMemorySaver())
    config = thread("ui-order")
    parts = list(agent.stream({"messages": [HumanMessage("1+1?")]}, config, stream_mode="messages"))
    messages = agent.get_state(config).values["messages"]
    assert agent.get_state(config).values["stop_reason"] == StopReason.LOOP_DETECTED
    notices = [i for i, m in enumerate(messages) if m.name in NOTICE_NAMES]
    assert len(notices) == 2  # the warning, then the stop notice before the final answer
    order = [_key(m) for m, _ in parts]
    for at in notices:
        reply = messages[at + 1]
        streamed_notice = [i for i, k in enumerate(order) if k == "notice"
                           and parts[i][0].content == messages[at].content]
        assert streamed_notice, "the notice never reached the messages stream"
        assert streamed_notice[0] < _first_at(parts, str(reply.id)), (
            f"notice {messages[at].content[:40]!r} came after the reply it preceded")
    assert order.count("notice") == 2  # each notice once


async def test_the_final_answer_call_is_tagged_and_named(openai_server: OpenAIServer) -> None:
    openai_server.script += [REPEAT] * 4 + [text("Two, as computed.")]
    agent = create_loop_agent(chat(openai_server), [add])
    request = {"messages": [HumanMessage("1+1?")]}
    final = [meta for m, meta in agent.stream(request, stream_mode="messages")
             if isinstance(m, AIMessageChunk) and m.content]
    assert final and all(meta["tags"] == ["final_answer"] for meta in final)
    openai_server.script += [REPEAT] * 4 + [text("Two, as computed.")]
    runs = [(e["name"], e.get("tags") or []) async for e in agent.astream_events(request, version="v2")
            if e["event"] == "on_chat_model_start"]
    assert [name for name, _ in runs] == ["ChatOpenAI"] * 4 + ["final_answer"]
    assert "final_answer" in runs[-1][1] and all("final_answer" not in t for _, t in runs[:4])


async def test_astream_events_carries_the_loops_events_and_names_the_judge(
        openai_server: OpenAIServer) -> None:
    """A custom event per loop event (the same dicts as ``stream_mode="custom"``, named by
    their ``event``), in the order they happened; the judge's model call tagged judge."""
    openai_server.script += [tool_calls([("add", {"a": 1, "b": 1})]), text("Two."),
                             text('{"answered": true, "reasoning": "it says two"}')]
    agent = create_loop_agent(chat(openai_server), [add],
                              iterations=Iterations(judge=Judge(model=chat(openai_server))))
    custom: list[str] = []
    models: list[tuple[str, list[str]]] = []
    async for event in agent.astream_events({"messages": [HumanMessage("1+1?")]}, version="v2"):
        if event["event"] == "on_custom_event":
            assert event["data"]["event"] == event["name"]
            custom.append(event["name"])
        elif event["event"] == "on_chat_model_start":
            models.append((event["name"], event.get("tags") or []))
    assert custom == ["iteration_start", "tool_call", "iteration_end", "stop"]
    assert [("judge" in tags) for _, tags in models] == [False, False, True]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_summary_reaches_the_messages_stream_and_the_summarizer_is_named(
        openai_server: OpenAIServer, mode: str) -> None:
    openai_server.script += [tool_calls([("add", {"a": i, "b": 1})]) for i in range(4)]
    openai_server.script += [text("A summary of the old rounds."), text("Done.")]
    agent = create_loop_agent(chat(openai_server), [add],
                              compaction=Compaction(max_tokens=100, keep_last=2))
    request = {"messages": [HumanMessage("add some numbers " + "please " * 30)]}
    if mode == "sync":
        parts = list(agent.stream(request, stream_mode="messages"))
    else:
        parts = [p async for p in agent.astream(request, stream_mode="messages")]
    summaries = [m for m, _ in parts if m.name == "loop_summary"]
    assert len(summaries) >= 1
    summarizer = [meta for m, meta in parts if isinstance(m, AIMessageChunk)
                  and "compaction" in meta.get("tags", [])]
    assert summarizer and all(meta["langgraph_node"] == "compaction" for meta in summarizer)
