"""The checks every LangGraph Agent Server deployment of ``langgraph.json``'s graph passes.

Used by ``tests/ecosystem/test_langgraph_server.py`` (``langgraph dev``, one process) and
``tests/ecosystem/test_aegra.py`` (Aegra, two processes on PostgreSQL + Redis). Each check takes
the URL that starts the work and the URL that reads or continues it: the same URL for one
process, the other process for a deployment. The model behind the server is the loopback
``auto_reply`` (call the tool the user names, then answer ``"Done."``).

:class:`Engine` lists what an engine legitimately does differently; nothing else is relaxed.
"""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client

GRAPH_ID = "langgraph-loop"
CHAT_GRAPH_ID = "langgraph-loop-chat"
"""``langgraph.json``'s second graph (for chat UIs)."""


@dataclass(frozen=True)
class Engine:
    """Engine differences the checks allow.

    Attributes:
        tool_chunk_type: the ``type`` a ToolMessage has in ``messages-tuple`` streams
            (``langgraph dev``: ``"tool"``; Aegra sends the chunk class, ``"ToolMessageChunk"``).
    """

    tool_chunk_type: str = "tool"


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


async def check_thread_run_state_and_history(url: str, read_url: str,
                                             served: tuple[str, ...] = (GRAPH_ID, CHAT_GRAPH_ID)) -> None:
    """A run, then its state and history read back (from ``read_url``), then a second turn.

    ``served``: the graph ids the deployment serves (one assistant each).
    """
    client, reader = get_client(url=url), get_client(url=read_url)
    assert sorted(a["graph_id"] for a in await client.assistants.search()) == sorted(served)
    thread_id = (await client.threads.create())["thread_id"]

    result = await client.runs.wait(thread_id, GRAPH_ID, input=user("get_weather for Paris"))
    assert result["stop_reason"] == "completed"
    assert types(result["messages"]) == ["human", "ai", "tool", "ai"]
    call = result["messages"][1]["tool_calls"][0]
    assert (call["name"], call["args"]) == ("get_weather", {})  # the tool's default city
    assert result["messages"][2]["content"] == "Paris: 18°C, cloudy"
    assert result["messages"][3]["content"] == "Done."
    assert result["usage"]["total_tokens"] > 0

    state = await reader.threads.get_state(thread_id)
    assert state["next"] == []
    ids = [m["id"] for m in result["messages"]]
    assert [m["id"] for m in state["values"]["messages"]] == ids
    assert state["values"]["stop_reason"] == "completed"
    history = await reader.threads.get_history(thread_id, limit=100)
    assert [h["metadata"]["step"] for h in history] == list(range(5, -2, -1))
    assert [h["next"] for h in history] == [
        [], ["router"], ["model"], ["tools"], ["model"], ["prepare"], ["__start__"]]
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]

    again = await reader.runs.wait(thread_id, GRAPH_ID, input=user("thanks"))
    assert types(again["messages"]) == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert again["iteration"] == 1


def check_streaming_with_the_sync_client(url: str, engine: Engine) -> None:
    """``updates``, ``messages-tuple`` and ``custom`` stream modes through the sync client."""
    client = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, GRAPH_ID, input=user("get_weather now"),
                                    stream_mode=["updates", "messages-tuple", "custom"]))
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    nodes = [node for p in parts if p.event == "updates" for node in p.data]
    assert nodes == ["prepare", "model", "tools", "model", "router"]
    streamed = [p.data[0] for p in parts if p.event == "messages"]
    assert {m["type"] for m in streamed} == {"AIMessageChunk", engine.tool_chunk_type}
    text = "".join(str(m.get("content") or "") for m in streamed if m["type"] == "AIMessageChunk")
    assert text == "Done."
    custom = [p.data for p in parts if p.event == "custom"]
    assert [c["event"] for c in custom if c["event"] == "tool_call"] == ["tool_call"]
    assert next(c for c in custom if c["event"] == "tool_call")["name"] == "get_weather"


def check_schemas_answer(url: str) -> None:
    """``GET /assistants/{id}/schemas`` answers 200 (Studio reads it): the graph's input,
    output, state and context JSON schemas build on the server's Python."""
    client = get_sync_client(url=url)
    [assistant] = [a for a in client.assistants.search(graph_id=GRAPH_ID) if a["graph_id"] == GRAPH_ID][:1]
    request = urllib.request.Request(f"{url}/assistants/{assistant['assistant_id']}/schemas")
    with urllib.request.urlopen(request, timeout=30) as resp:  # raises HTTPError on a 500
        assert resp.status == 200
        schemas = json.loads(resp.read())
    assert "messages" in schemas["input_schema"]["properties"]
    assert "stop_reason" in schemas["output_schema"]["properties"]
    context = schemas["context_schema"]["properties"]
    assert {"iterations", "limits", "loop_detection"} <= set(context)
    assert "max_iterations" not in context  # 0.2's flat names went in 0.4 (a clear error instead)


def check_per_run_context_overrides_limits(url: str) -> None:
    """``context=`` sets a run's limits (a stateless run)."""
    client = get_sync_client(url=url)
    result = client.runs.wait(None, GRAPH_ID, input=user("get_weather for Paris"),
                              context={"iterations": {"max_model_calls": 1}})
    assert isinstance(result, dict)
    assert result["stop_reason"] == "max_model_calls"
    assert types(result["messages"]) == ["human", "ai", "tool", "human", "ai"]
    unanswered, notice = result["messages"][2:4]
    assert unanswered["status"] == "error"
    assert unanswered["content"].startswith("Error: not executed")
    assert notice["name"] == "stop_notice"
    assert "model-call limit" in notice["content"]
    assert result["iterations"][0]["guard"]["limit"] == 1


def check_a_misspelled_override_is_the_in_process_error(url: str) -> None:
    """The server applies the graph's own check of ``context=``: the same error text."""
    client = get_sync_client(url=url)
    text = "invalid run context: limits.final_answr: unknown field (fields of Limits: max_tool_calls,"
    with pytest.raises(Exception, match=re.escape(text)):
        client.runs.wait(None, GRAPH_ID, input=user("get_weather for Paris"),
                         context={"limits": {"final_answr": False}})


def check_messages_tuple_tells_model_tokens_from_notices(url: str) -> None:
    """The README rule: the model node's ``AIMessageChunk`` parts are what the model said;
    the stop notice it delivers comes as a tagged human message, not as tokens."""
    client = get_sync_client(url=url)
    parts = [p for p in client.runs.stream(None, GRAPH_ID, input=user("get_weather for Paris"),
                                           context={"iterations": {"max_model_calls": 1}},
                                           stream_mode="messages-tuple")
             if p.event == "messages"]
    from_model = [m for m, meta in (p.data for p in parts) if meta["langgraph_node"] == "model"]
    said = "".join(str(m.get("content") or "") for m in from_model
                   if m["type"] in ("AIMessageChunk", "ai"))
    assert said == "Done."
    notices = [m for m in from_model if m["type"] not in ("AIMessageChunk", "ai")]
    assert [(m["type"], m["name"]) for m in notices] == [("human", "stop_notice")]
    assert notices[0]["additional_kwargs"]["langgraph_loop"]["kind"] == "notice"
    assert notices[0]["additional_kwargs"]["lc_source"] == "langgraph_loop"
    assert "model-call limit" in notices[0]["content"]


async def check_approval_interrupt_and_resume(url: str, resume_url: str) -> None:
    """The approval interrupt, read and resumed through ``resume_url``; then seen in a stream."""
    client, resumer = get_client(url=url), get_client(url=resume_url)
    thread_id = (await client.threads.create())["thread_id"]

    await client.runs.wait(thread_id, GRAPH_ID, input=user("please send_email to the team"))
    paused = await resumer.threads.get_state(thread_id)
    assert paused["next"] == ["approval"]
    assert paused["values"]["stop_reason"] is None
    [interrupt] = [i for task in paused["tasks"] for i in task["interrupts"]]
    request = interrupt["value"]
    assert [a["name"] for a in request["action_requests"]] == ["send_email"]
    assert request["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}]
    assert types(paused["values"]["messages"]) == ["human", "ai"]

    result = await resumer.runs.wait(thread_id, GRAPH_ID,
                                     command={"resume": {"decisions": [{"type": "approve"}]}})
    assert result["stop_reason"] == "completed"
    assert types(result["messages"]) == ["human", "ai", "tool", "ai"]
    assert "queued" in result["messages"][2]["content"]

    history = await client.threads.get_history(thread_id, limit=100)
    assert any(h["next"] == ["approval"] for h in history)
    parts = [p async for p in client.runs.stream(thread_id, GRAPH_ID, input=user("send_email again"),
                                                 stream_mode="updates")]
    assert any("__interrupt__" in p.data for p in parts if p.event == "updates")
