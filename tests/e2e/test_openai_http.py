"""The whole loop through a real client: ``langchain_openai.ChatOpenAI`` over HTTP.

The model is the loopback OpenAI-compatible server of ``tests/support``; every test
asserts on the exact JSON request bodies the provider received, and the
``openai_server`` fixture checks the pairing rule on every one of them.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_loop import Iterations, Judge, LoopDetection, Repeat, StopReason, create_loop_agent
from tests.support.openai_server import (
    JSON,
    OpenAIServer,
    Reply,
    check_pairing,
    error,
    text,
    tool_calls,
)

WEATHER = {"Paris": "18°C, cloudy", "Rome": "24°C, sunny"}
BACKOFF = 0.5
"""The graph's retry policy waits at least this long before each new attempt."""


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry waits the graph asks for, recorded instead of slept (shorter sleeps, such as
    the loopback server's, still run)."""
    waits: list[float] = []
    real_sleep, real_asleep = time.sleep, asyncio.sleep

    def sleep(seconds: float) -> None:
        if seconds >= BACKOFF:
            waits.append(seconds)
        else:
            real_sleep(seconds)

    async def asleep(seconds: float, *args: Any) -> Any:
        if seconds >= BACKOFF:
            waits.append(seconds)
            seconds = 0
        return await real_asleep(seconds, *args)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(asyncio, "sleep", asleep)
    return waits


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return WEATHER.get(city, "unknown city")


@tool
def search(query: str) -> str:
    """Search the web."""
    return "no new results"


def chat(server: OpenAIServer) -> ChatOpenAI:
    """The real client pointed at the loopback server (no client-side retries)."""
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("test"), model="m",
                      max_retries=0, stream_usage=True)


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def roles(body: JSON) -> list[str]:
    """The wire roles of a request, with a message's ``name`` when it has one."""
    return [m["role"] + (f":{m['name']}" if m.get("name") else "") for m in body["messages"]]


def test_tool_call_round_trip_and_usage(openai_server: OpenAIServer) -> None:
    openai_server.script += [tool_calls([("get_weather", {"city": "Paris"})], usage=(30, 7)),
                             text("It is 18°C and cloudy in Paris.", usage=(50, 9))]
    agent = create_loop_agent(chat(openai_server), [get_weather], system_prompt="Be brief.")
    state = agent.invoke({"messages": [HumanMessage("Weather in Paris?")]})

    assert state["stop_reason"] == StopReason.COMPLETED
    assert state["messages"][-1].content == "It is 18°C and cloudy in Paris."
    assert state["usage"] == {"input_tokens": 80, "output_tokens": 16, "total_tokens": 96}
    assert state["iterations"][0]["usage"]["total_tokens"] == 96
    first, second = openai_server.requests
    assert roles(first) == ["system", "user"]
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert roles(second) == ["system", "user", "assistant", "tool"]
    call = second["messages"][2]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_1_0", "get_weather")
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1_0",
                                     "content": "18°C, cloudy"}


async def test_parallel_calls_async(openai_server: OpenAIServer) -> None:
    openai_server.script += [
        tool_calls([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]),
        text("Paris 18°C, Rome 24°C."),
    ]
    agent = create_loop_agent(chat(openai_server), [get_weather])
    state = await agent.ainvoke({"messages": [HumanMessage("Paris and Rome?")]})

    assert state["stop_reason"] == StopReason.COMPLETED
    second = openai_server.requests[1]
    assert roles(second) == ["user", "assistant", "tool", "tool"]
    answers = [(m["tool_call_id"], m["content"]) for m in second["messages"][2:]]
    assert answers == [("call_1_0", "18°C, cloudy"), ("call_1_1", "24°C, sunny")]
    assert [c["status"] for c in state["iterations"][0]["tool_calls"]] == ["success", "success"]


def test_loop_warning_is_sent_after_the_tool_results(openai_server: OpenAIServer) -> None:
    same = tool_calls([("search", {"query": "langgraph-loop"})])
    openai_server.script += [same, same, same, text("Nothing found about langgraph-loop.")]
    agent = create_loop_agent(chat(openai_server), [search])
    state = agent.invoke({"messages": [HumanMessage("Find langgraph-loop")]})

    assert state["stop_reason"] == StopReason.COMPLETED
    fourth = openai_server.requests[3]
    assert roles(fourth) == ["user"] + ["assistant", "tool"] * 3 + ["user:loop_notice"]
    warning = fourth["messages"][-1]["content"]
    assert warning.startswith('Loop warning: search({"query":"langgraph-loop"})')
    assert [roles(b)[-1] for b in openai_server.requests[:3]] == ["user", "tool", "tool"]


def test_loop_hard_stop_ends_with_an_answer_that_may_not_use_tools(openai_server: OpenAIServer) -> None:
    """The final-answer call keeps the tools defined (the history holds tool calls) and
    forbids their use with ``tool_choice: "none"``."""
    openai_server.default = lambda body: (
        text("I keep getting no results; stopping.") if body.get("tool_choice") == "none"
        else tool_calls([("search", {"query": "same"})]))
    agent = create_loop_agent(chat(openai_server), [search],
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)))
    state = agent.invoke({"messages": [HumanMessage("Find it")]})

    assert state["stop_reason"] == StopReason.LOOP_DETECTED
    assert state["messages"][-1].content == "I keep getting no results; stopping."
    final = openai_server.requests[-1]
    assert [t["function"]["name"] for t in final["tools"]] == ["search"]
    assert final["tool_choice"] == "none"
    assert [roles(b) for b in openai_server.requests[2:]] == [
        ["user", "assistant", "tool", "assistant", "tool", "user:loop_notice"],
        ["user", "assistant", "tool", "assistant", "tool", "user:loop_notice",
         "assistant", "tool", "user:stop_notice"],
    ]
    stopped_call, stop_notice = final["messages"][-2:]
    assert stopped_call["tool_call_id"] == "call_3_0"
    assert stopped_call["content"].startswith("Error: not executed")
    assert "Tools are no longer available" in stop_notice["content"]


def test_tokens_stream_through_messages_mode(openai_server: OpenAIServer) -> None:
    answer = "Paris is cloudy today, with 18 degrees."
    openai_server.script += [tool_calls([("get_weather", {"city": "Paris"})]), text(answer)]
    agent = create_loop_agent(chat(openai_server), [get_weather])
    parts = list(agent.stream({"messages": [HumanMessage("Weather in Paris?")]},
                              stream_mode="messages"))

    model_chunks = [c for c, meta in parts
                    if isinstance(c, AIMessageChunk) and meta["langgraph_node"] == "model"]
    pieces = [c.content for c in model_chunks if c.content]
    assert len(pieces) >= 3
    assert "".join(str(p) for p in pieces) == answer
    assert all(body["stream"] is True for body in openai_server.requests)
    assert all(body["stream_options"] == {"include_usage": True}
               for body in openai_server.requests)
    tool_parts = [c for c, meta in parts if meta["langgraph_node"] == "tools"]
    assert [c.content for c in tool_parts] == ["18°C, cloudy"]


async def test_tokens_stream_async_with_usage(openai_server: OpenAIServer) -> None:
    openai_server.script += [text("Hello from the stream.", usage=(11, 4))]
    agent = create_loop_agent(chat(openai_server))
    pieces: list[str] = []
    final: dict[str, Any] = {}
    async for mode, data in agent.astream({"messages": [HumanMessage("hi")]},
                                          stream_mode=["messages", "values"]):
        if mode == "messages" and isinstance(data[0], AIMessageChunk):
            pieces.append(str(data[0].content))
        elif mode == "values":
            final = data
    assert "".join(pieces) == "Hello from the stream."
    assert final["usage"] == {"input_tokens": 11, "output_tokens": 4, "total_tokens": 15}


@pytest.mark.parametrize("status", [429, 500])
def test_transient_provider_errors_are_retried(openai_server: OpenAIServer, status: int,
                                              backoff: list[float]) -> None:
    openai_server.script += [error(status, "try again"), error(status, "try again"),
                             text("Made it.")]
    agent = create_loop_agent(chat(openai_server))
    state = agent.invoke({"messages": [HumanMessage("hi")]})

    assert state["stop_reason"] == StopReason.COMPLETED
    assert state["messages"][-1].content == "Made it."
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    bodies = openai_server.requests
    assert len(bodies) == 3
    assert bodies[0] == bodies[1] == bodies[2]
    assert len(backoff) == 2 and backoff[0] >= BACKOFF and backoff[1] >= 2 * BACKOFF  # backing off


@pytest.mark.parametrize(("status", "exc_type"),
                         [(429, openai.RateLimitError), (500, openai.InternalServerError)])
def test_persistent_provider_error_then_resume(
    openai_server: OpenAIServer, status: int, exc_type: type[Exception], backoff: list[float]
) -> None:
    openai_server.script += [tool_calls([("get_weather", {"city": "Rome"})])]
    openai_server.script += [error(status, "provider overloaded")] * 3
    agent = create_loop_agent(chat(openai_server), [get_weather], checkpointer=InMemorySaver())
    config = thread(f"err-{status}")

    with pytest.raises(exc_type, match="provider overloaded"):
        agent.invoke({"messages": [HumanMessage("Weather in Rome?")]}, config)
    assert len(openai_server.requests) == 4  # the first call, then three attempts
    assert len(backoff) == 2  # a wait before each retry
    paused = agent.get_state(config)
    assert paused.next == ("model",)
    assert [m.type for m in paused.values["messages"]] == ["human", "ai", "tool"]

    openai_server.script += [text("Rome: 24°C and sunny.")]
    state = agent.invoke(None, config)  # resume the thread where it failed
    assert state["stop_reason"] == StopReason.COMPLETED
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["messages"][-1].content == "Rome: 24°C and sunny."
    assert roles(openai_server.requests[-1]) == ["user", "assistant", "tool"]
    assert len(openai_server.requests) == 5


async def test_persistent_error_then_resume_async(openai_server: OpenAIServer,
                                                  backoff: list[float]) -> None:
    openai_server.script += [error(503, "unavailable")] * 3
    agent = create_loop_agent(chat(openai_server), checkpointer=InMemorySaver())
    config = thread("err-async")
    with pytest.raises(openai.APIStatusError, match="unavailable"):
        await agent.ainvoke({"messages": [HumanMessage("hi")]}, config)
    assert len(openai_server.requests) == 3 and len(backoff) == 2
    openai_server.script += [text("Back online.")]
    state = await agent.ainvoke(None, config)
    assert state["messages"][-1].content == "Back online."
    assert state["stop_reason"] == StopReason.COMPLETED


def verdict_reply(answered: bool, reasoning: str) -> Any:
    """Answer the judge the way its client asked: JSON-schema text or a forced tool call."""
    verdict = {"answered": answered, "reasoning": reasoning}

    def reply(body: JSON) -> Reply:
        for spec in body.get("tools") or []:
            name = spec["function"]["name"]
            return tool_calls([(name, verdict)], usage=(20, 6))
        return text(json.dumps(verdict), usage=(20, 6))

    return reply


def test_judge_over_http(openai_server: OpenAIServer) -> None:
    with OpenAIServer() as judge_server:
        judge_server.script += [verdict_reply(False, "the date is missing"),
                                verdict_reply(True, "city and date are given")]
        openai_server.script += [text("Paris is cloudy."), text("Paris is cloudy on 1 May.")]
        agent = create_loop_agent(chat(openai_server),
                                  iterations=Iterations(judge=Judge(model=chat(judge_server))))
        state = agent.invoke({"messages": [HumanMessage("Weather in Paris on 1 May?")]})

    assert state["stop_reason"] == StopReason.COMPLETED
    assert state["iteration"] == 2
    assert state["verdict"]["answered"] is True
    assert [r["verdict"]["answered"] for r in state["iterations"]] == [False, True]
    assert state["judge_usage"]["total_tokens"] == 52
    assert state["usage"]["total_tokens"] != state["judge_usage"]["total_tokens"]
    first_judge, second_judge = judge_server.requests
    # structured output as the client sends it: a JSON schema or a forced tool call
    wire_schema = (first_judge.get("response_format") or {}).get("json_schema", {}).get("schema")
    tool_schema = [t["function"]["parameters"] for t in first_judge.get("tools") or []]
    schema = wire_schema or tool_schema[0]
    assert set(schema["properties"]) == {"answered", "reasoning"}
    assert "Weather in Paris on 1 May?" in json.dumps(first_judge["messages"])
    assert "Paris is cloudy." in json.dumps(first_judge["messages"])
    assert "Paris is cloudy on 1 May." in json.dumps(second_judge["messages"])
    continuation = openai_server.requests[1]["messages"][-1]
    assert continuation["role"] == "user"
    assert "the date is missing" in continuation["content"]
    assert [check_pairing(b) for b in judge_server.requests] == [[], []]


def _readme_token_recipe() -> str:
    """The README's ``stream_mode="messages"`` recipe: the ``for`` line and its body."""
    lines = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("for chunk, meta in agent.stream(") and '"messages"' in line)
    body = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        body.append(line)
    return "\n".join(body)


def test_the_readme_token_recipe_prints_only_what_the_model_said(
        openai_server: OpenAIServer) -> None:
    """A looping model gets a warning and a stop notice; the recipe prints only model text."""
    call = [("search", {"query": "news"})]
    openai_server.script += [tool_calls(call, content="Searching.")] * 3 + [
        text("Nothing new today.")]
    agent = create_loop_agent(chat(openai_server), [search],
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)))
    printed: list[str] = []
    parts: list[Any] = []

    class Recorded:  # the agent, keeping what the stream sent
        def stream(self, *args: Any, **kwargs: Any) -> Any:
            for part in agent.stream(*args, **kwargs):
                parts.append(part)
                yield part

    namespace = {"agent": Recorded(), "inputs": {"messages": [HumanMessage("Any news?")]},
                 "config": thread("recipe"), "AIMessage": AIMessage,
                 "print": lambda *a, end="\n": printed.append(" ".join(map(str, a)) + end)}
    exec(_readme_token_recipe(), namespace)  # the README's own code
    assert "".join(printed) == "Searching." * 3 + "Nothing new today."
    notices = [c for c, meta in parts if meta["langgraph_node"] == "model"
               and not isinstance(c, AIMessage)]
    assert [n.name for n in notices] == ["loop_notice", "stop_notice"]  # warning, stop notice
    assert all(n.additional_kwargs["langgraph_loop"]["kind"] == "notice" for n in notices)
    assert "Tools are no longer available" in str(notices[-1].content)


def test_the_final_answer_call_is_bounded_by_what_is_left_of_the_budget(
        openai_server: OpenAIServer) -> None:
    """Under ``token_budget`` the tools-free final call carries ``max_tokens`` = what is left
    after its estimated input; the regular calls carry none."""
    call = [("search", {"query": "news"})]
    openai_server.script += [tool_calls(call, usage=(100, 20))] * 3 + [
        text("Summary.", usage=(150, 3))]
    agent = create_loop_agent(chat(openai_server), [search],
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)),
                              limits={"token_budget": 1100})  # the stop notice asks more
    result = agent.invoke({"messages": [HumanMessage("Any news?")]})
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    bodies = openai_server.requests
    assert [("max_tokens" in b or "max_completion_tokens" in b) for b in bodies] == [
        False, False, False, True]
    bound = bodies[-1].get("max_completion_tokens", bodies[-1].get("max_tokens"))
    assert 50 <= bound <= 1100 - 3 * 120 - 150  # what is left after the estimated input
    assert result["usage"]["total_tokens"] == 3 * 120 + 153 <= 1100
