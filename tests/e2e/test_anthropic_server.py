"""The loopback Anthropic Messages API server: it serves ChatAnthropic (JSON and streaming) and
rejects, with HTTP 400 and Anthropic's error shape, every request shape the real API rejects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from tests.support.anthropic_server import (
    FIRST_USER,
    TOOLS_REQUIRED,
    AnthropicServer,
    check_request,
    error,
    text,
    tool_use,
)


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


TOOLS = [{"name": "get_weather", "description": "w",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 64, "messages": messages, **extra}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def use(call_id: str, name: str = "get_weather") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"city": "Paris"}}


def result(call_id: str, content: Any = "sunny") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def txt(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


ROUND = [user("weather?"), assistant([use("t1")]), user([result("t1")])]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as srv:
        yield srv


def llm(srv: AnthropicServer, **kwargs: Any) -> ChatAnthropic:
    return ChatAnthropic(model="claude-test", base_url=srv.base_url, api_key="test",  # type: ignore[call-arg]
                         max_retries=0, **kwargs)


def post(srv: AnthropicServer, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{srv.base_url}/v1/messages", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# --------------------------------------------------------------------------- valid shapes


VALID = {
    "plain": body([user("hi")]),
    "system string and blocks": body([user("hi")], system=[txt("be brief")]),
    "a tool round": body([*ROUND], tools=TOOLS),
    "tool results then text in one user turn": body(
        [user("q"), assistant([use("t1")]), user([result("t1"), txt("note")])], tools=TOOLS),
    "a notice as a separate user message after the results (merged)": body(
        [user("q"), assistant([use("t1")]), user([result("t1")]), user("loop warning")], tools=TOOLS),
    "two user messages in a row (merged)": body([user("a"), user("b")]),
    "parallel calls answered in any order": body(
        [user("q"), assistant([txt("checking"), use("t1"), use("t2")]), user([result("t2"), result("t1")])],
        tools=TOOLS),
    "an error result with text blocks": body(
        [user("q"), assistant([use("t1")]),
         user([{**result("t1", [txt("boom")]), "is_error": True}])], tools=TOOLS),
    "tool_choice none with tools (a final-answer call)": body(
        [*ROUND], tools=TOOLS, tool_choice={"type": "none"}),
    "tool_choice naming a tool": body(
        [user("q")], tools=TOOLS, tool_choice={"type": "tool", "name": "get_weather"}),
    "tool_choice any": body([user("q")], tools=TOOLS, tool_choice={"type": "any"}),
    "a final assistant prefill": body([user("q"), assistant("The answer is")]),
    "a server tool": body([user("q")], tools=[{"type": "web_search_20250305", "name": "web_search"}]),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_shapes_pass_the_rules(name: str) -> None:
    assert check_request(VALID[name]) == []


def test_valid_request_answered_over_http(server: AnthropicServer) -> None:
    server.script.append(text("fine"))
    status, answer = post(server, VALID["a tool round"])
    assert status == 200
    assert answer["content"] == [{"type": "text", "text": "fine"}]
    assert answer["stop_reason"] == "end_turn"
    assert server.rejected == []


# --------------------------------------------------------------------------- broken shapes


BROKEN = {
    "first message from the assistant": (body([assistant("hi"), user("q")]), FIRST_USER),
    "a system role inside messages": (body([{"role": "system", "content": "x"}, user("q")]), "role"),
    "empty content": (body([user("q"), assistant(""), user("again")]), "non-empty content"),
    "an empty text block": (body([user([txt("")])]), "must be non-empty"),
    "a whitespace text block": (body([user([txt(" \n")])]), "non-whitespace"),
    "a text block with an extra key (e.g. an MCP block id)": (
        body([user("q"), assistant([use("t1")]), user([result("t1", [{**txt("x"), "id": "lc_1"}])])],
             tools=TOOLS), "Extra inputs are not permitted"),
    "tool_use without tools defined": (body(list(ROUND)), TOOLS_REQUIRED),
    "tool_use answered by nothing": (
        body([user("q"), assistant([use("t1")]), user("no result")], tools=TOOLS), "without `tool_result`"),
    "tool_use as the last turn": (
        body([user("q"), assistant([use("t1")])], tools=TOOLS), "without `tool_result`"),
    "one of two calls unanswered": (
        body([user("q"), assistant([use("t1"), use("t2")]), user([result("t1")])], tools=TOOLS), "t2"),
    "text before the tool results": (
        body([user("q"), assistant([use("t1")]), user([txt("warning"), result("t1")])], tools=TOOLS),
        "must come first"),
    "a notice message between call and results (merged: text first)": (
        body([user("q"), assistant([use("t1")]), user("loop warning"), user([result("t1")])], tools=TOOLS),
        "must come first"),
    "a result answering no call": (
        body([user("q"), assistant("hm"), user([result("t9")])], tools=TOOLS), "unexpected `tool_use_id`"),
    "two results for one call": (
        body([user("q"), assistant([use("t1")]), user([result("t1"), result("t1")])], tools=TOOLS),
        "more than one"),
    "a result one turn late": (
        body([user("q"), assistant([use("t1")]), user([result("t1")]), assistant("ok"), user([result("t1")])],
             tools=TOOLS), "unexpected `tool_use_id`"),
    "duplicate tool_use ids": (
        body([user("q"), assistant([use("t1")]), user([result("t1")]), assistant([use("t1")]),
              user([result("t1")])], tools=TOOLS), "must be unique"),
    "a tool_result in an assistant turn": (
        body([user("q"), assistant([result("t1")])], tools=TOOLS), "not allowed here"),
    "tool_choice with an unknown type": (body([user("q")], tools=TOOLS, tool_choice={"type": "never"}),
                                         "tool_choice"),
    "tool_choice naming a missing tool (ChatAnthropic's tool_choice='none')": (
        body([*ROUND], tools=TOOLS, tool_choice={"type": "tool", "name": "none"}), "not found"),
    "tool_choice as a bare string": (body([user("q")], tools=TOOLS, tool_choice="none"), "tool_choice"),
    "tool_choice none with an extra key": (
        body([user("q")], tools=TOOLS, tool_choice={"type": "none", "disable_parallel_tool_use": True}),
        "Extra inputs"),
    "tool_choice without tools": (body([user("q")], tool_choice={"type": "none"}), "while providing tools"),
    "a tool without an object schema": (body([user("q")], tools=[{"name": "x", "input_schema": {}}]),
                                        "input_schema"),
    "duplicate tool names": (body([user("q")], tools=TOOLS + TOOLS), "unique"),
    "no max_tokens": ({"model": "m", "messages": [user("q")]}, "max_tokens"),
    "no messages": (body([]), "at least one message"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_broken_shape_is_rejected(server: AnthropicServer, name: str) -> None:
    payload, expected = BROKEN[name]
    problems = check_request(payload)
    assert problems, f"{name}: accepted"
    assert any(expected in p for p in problems), problems
    server.script.append(text("must not be used"))
    status, answer = post(server, payload)
    assert status == 400
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert expected in answer["error"]["message"]
    assert server.rejected == [(0, problems)]
    assert server.requests == [payload]
    assert len(server.script) == 1  # a rejected request does not consume the script


# --------------------------------------------------------------------------- through ChatAnthropic


def test_chat_anthropic_tool_round_json(server: AnthropicServer) -> None:
    server.script += [tool_use([("get_weather", {"city": "Paris"})], usage=(12, 7)), text("Sunny.")]
    model = llm(server).bind_tools([get_weather])
    first = model.invoke([SystemMessage("be brief"), HumanMessage("weather?")])
    assert first.tool_calls == [{"name": "get_weather", "args": {"city": "Paris"}, "id": "toolu_1_0",
                                 "type": "tool_call"}]
    assert first.usage_metadata is not None
    assert (first.usage_metadata["input_tokens"], first.usage_metadata["output_tokens"]) == (12, 7)
    second = model.invoke([HumanMessage("weather?"), first, ToolMessage("sunny", tool_call_id="toolu_1_0")])
    assert second.content == "Sunny."
    assert server.requests[0]["system"] == "be brief"
    assert server.requests[1]["messages"][2]["content"][0]["type"] == "tool_result"
    assert server.rejected == []


def test_chat_anthropic_streams(server: AnthropicServer) -> None:
    server.script += [tool_use([("get_weather", {"city": "Rome"})], content="Let me check"),
                      text("Done now.")]
    model = llm(server).bind_tools([get_weather])
    chunks = list(model.stream([HumanMessage("weather?")]))
    message = chunks[0]
    for chunk in chunks[1:]:
        message += chunk
    assert message.tool_calls[0]["args"] == {"city": "Rome"}
    assert len(chunks) > 3
    tokens = "".join(c.text for c in model.stream([HumanMessage("again")]))
    assert tokens == "Done now."
    assert all(b["stream"] for b in server.requests)


def test_chat_anthropic_rejections_surface_as_errors(server: AnthropicServer) -> None:
    """The traps a loop can fall into: a history with tool blocks and no tools bound, and
    ChatAnthropic's ``tool_choice="none"`` string (it means a tool named "none")."""
    first = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "P"}, "id": "t1"}])
    history = [HumanMessage("q"), first, ToolMessage("sunny", tool_call_id="t1")]
    with pytest.raises(Exception, match="must define tools"):
        llm(server).invoke(history)
    with pytest.raises(Exception, match="not found in provided tools"):
        llm(server).bind_tools([get_weather], tool_choice="none").invoke(history)
    server.script.append(text("final"))
    answer = llm(server).bind_tools([get_weather], tool_choice={"type": "none"}).invoke(history)
    assert answer.content == "final"
    assert [len(p) for _, p in server.rejected] == [1, 1]
    server.rejected.clear()


def test_scripted_http_error_and_count_tokens(server: AnthropicServer) -> None:
    server.script += [error(529, "Overloaded")]
    with pytest.raises(Exception, match="Overloaded"):
        llm(server).invoke([HumanMessage("q")])
    count = llm(server).get_num_tokens_from_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
    assert count == 30
    assert server.count_requests and server.rejected == []
