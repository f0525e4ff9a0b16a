"""Issue 20, item 3: what ``create_agent`` accepts as model, prompt, tools and response format,
``create_loop_agent`` accepts too, with the same behaviour."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain.chat_models import init_chat_model
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from langgraph_loop.scripted import ScriptedChatModel
from tests.parity.compare import ModelFactory, Seen, call, calls, normalise_messages, run_both, scripted
from tests.support.openai_server import OpenAIServer, check_pairing, text, tool_calls

ASK = {"messages": [HumanMessage("What is the weather in Paris?")]}


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


class Weather(BaseModel):
    """A weather report."""

    city: str = Field(description="the city")
    sky: str = Field(description="the sky")


WEATHER_CALL = calls(call("get_weather", {"city": "Paris"}, "c1"))


@pytest.fixture
def servers() -> Iterator[Callable[..., OpenAIServer]]:
    """Start scripted OpenAI servers on demand; stop them and check wire pairing afterwards."""
    with contextlib.ExitStack() as stack:
        started: list[OpenAIServer] = []

        def start(*script: Any) -> OpenAIServer:
            server = stack.enter_context(OpenAIServer(list(script)))
            started.append(server)
            return server

        yield start
    for server in started:
        for body in server.requests:
            assert check_pairing(body) == []


def wire_messages(server: OpenAIServer) -> Seen:
    """What an OpenAI-wire model saw: each request's messages."""
    return lambda: [body["messages"] for body in server.requests]


OPENAI_SCRIPT = (tool_calls([("get_weather", {"city": "Paris"})]), text("It is sunny in Paris."))


# --------------------------------------------------------------------------- models


def test_model_as_provider_string(servers: Callable[..., OpenAIServer],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``"openai:m"`` is resolved with ``init_chat_model`` (here against the loopback server)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")

    def model() -> tuple[Any, Seen]:
        server = servers(*OPENAI_SCRIPT)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        return "openai:m", wire_messages(server)

    pair = run_both(model, [get_weather], ASK)
    pair.assert_same()
    assert pair.loop.messages[-1].content == "It is sunny in Paris."


def test_configurable_model(servers: Callable[..., OpenAIServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """``init_chat_model(configurable_fields=...)``: the model name comes from each run's config."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    started: list[OpenAIServer] = []

    def model() -> tuple[Any, Seen]:
        server = servers(*OPENAI_SCRIPT)
        started.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # read when a run builds the model
        return init_chat_model("openai:m", configurable_fields=("model",)), wire_messages(server)

    run_config = {"configurable": {"thread_id": "parity", "model": "openai:m2"}}
    pair = run_both(model, [get_weather], ASK, config=run_config)
    pair.assert_same()
    assert [{body["model"] for body in server.requests} for server in started] == [{"m2"}, {"m2"}]


def test_model_with_fallbacks() -> None:
    """A ``with_fallbacks`` wrapper: the primary fails, the fallback answers every call."""
    primaries: list[ScriptedChatModel] = []

    def model() -> tuple[Any, Seen]:
        primary = ScriptedChatModel(script=[RuntimeError("primary down")] * 3)
        fallback = ScriptedChatModel(script=[WEATHER_CALL, "sunny"])
        primaries.append(primary)
        return primary.with_fallbacks([fallback]), lambda: [normalise_messages(r) for r in fallback.requests]

    pair = run_both(model, [get_weather], ASK)
    pair.assert_same()
    assert pair.loop.messages[-1].content == "sunny"
    assert [p.calls for p in primaries] == [2, 2]


def test_model_with_retry() -> None:
    """A ``with_retry`` wrapper: the first attempt fails, the retry answers. ``create_agent``
    itself rejects a ``RunnableRetry`` (it has no ``bind_tools``), so the loop's run is compared
    with ``create_agent`` on the bare model whose attempts all succeed."""

    def retried() -> tuple[Any, Seen]:
        chat = ScriptedChatModel(script=[RuntimeError("flaky"), WEATHER_CALL, "sunny"])
        wrapped = chat.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
        return wrapped, lambda: [normalise_messages(r) for r in chat.requests[1:]]  # after the failure

    pair = run_both(scripted(WEATHER_CALL, "sunny"), [get_weather], ASK, loop_model=retried)
    pair.assert_same()
    assert pair.loop.messages[-1].content == "sunny"


# --------------------------------------------------------------------------- prompt, tools, name


def test_system_prompt_as_system_message() -> None:
    prompt = SystemMessage("You are terse.", name="policy")
    pair = run_both(scripted(WEATHER_CALL, "sunny"), [get_weather], ASK, common={"system_prompt": prompt})
    pair.assert_same()
    assert pair.loop.seen[0][0] == {"type": "system", "content": "You are terse.", "name": "policy"}


def test_provider_side_tool_dict(servers: Callable[..., OpenAIServer]) -> None:
    """``{"type": "web_search"}`` is bound as it is (the request carries it) and never run
    locally; the local tool still runs."""
    bodies: list[list[dict[str, Any]]] = []

    def model() -> tuple[Any, Seen]:
        server = servers(*OPENAI_SCRIPT)
        bodies.append(server.requests)
        chat = ChatOpenAI(base_url=server.base_url, api_key="test", model="m", max_retries=0,  # type: ignore[arg-type]
                          use_responses_api=False)
        return chat, wire_messages(server)

    pair = run_both(model, [get_weather, {"type": "web_search"}], ASK)
    pair.assert_same()
    reference_tools, loop_tools = ([b.get("tools") for b in requests] for requests in bodies)
    assert loop_tools == reference_tools
    assert all({"type": "web_search"} in tools for tools in loop_tools)
    assert [m.name for m in pair.loop.messages if isinstance(m, ToolMessage)] == ["get_weather"]


def test_name_on_every_reply() -> None:
    pair = run_both(scripted(WEATHER_CALL, "sunny"), [get_weather], ASK, common={"name": "forecaster"})
    pair.assert_same()
    replies = [m for m in pair.loop.messages if isinstance(m, AIMessage)]
    assert [m.name for m in replies] == ["forecaster", "forecaster"]


# --------------------------------------------------------------------------- response formats


REPORT = {"city": "Paris", "sky": "sunny"}


def _tool_strategy_script() -> ModelFactory:
    return scripted(WEATHER_CALL, calls(call("Weather", REPORT, "c2")))


@pytest.mark.parametrize("kind", ["ToolStrategy", "bare schema"])
def test_response_format_tool_strategy(kind: str) -> None:
    """The structured answer comes as a call of the schema's tool (a bare schema on a model
    without native structured output means ``ToolStrategy``)."""
    response_format = ToolStrategy(Weather) if kind == "ToolStrategy" else Weather
    pair = run_both(_tool_strategy_script(), [get_weather], ASK, common={"response_format": response_format})
    pair.assert_same()
    assert pair.loop.state["structured_response"] == Weather(**REPORT)


def test_response_format_provider_strategy() -> None:
    """The structured answer is the model's JSON text, parsed."""
    script = scripted(WEATHER_CALL, '{"city": "Paris", "sky": "sunny"}')
    pair = run_both(script, [get_weather], ASK, common={"response_format": ProviderStrategy(Weather)})
    pair.assert_same()
    assert pair.loop.state["structured_response"] == Weather(**REPORT)
