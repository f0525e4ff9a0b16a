"""Pins the LangGraph internals ``langgraph_loop.core.compat`` relies on, and how nodes run.

When LangGraph changes one of them, these tests fail before the loop misbehaves.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.tools import tool
from langchain_core.tracers._streaming import _V2StreamingCallbackHandler
from langchain_openai import ChatOpenAI
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import START, StateGraph
from langgraph.types import Command, Durability, interrupt
from pydantic import SecretStr

from langgraph_loop import LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.compat import (
    checkpointer,
    durable,
    messages_delta_reducer,
    resuming,
    streams,
    would_stream,
)
from langgraph_loop.scripted import ScriptedChatModel


class Seen(TypedDict, total=False):
    seen: list[bool]
    messages: Annotated[list[AnyMessage], DeltaChannel(messages_delta_reducer)]


def _probe_graph(probe: Any, checkpointer: Any = None) -> Any:
    def node(state: Seen) -> dict[str, Any]:
        return {"seen": [*state.get("seen", []), probe(get_config())]}

    builder = StateGraph(Seen)
    builder.add_node("probe", node)
    builder.add_edge(START, "probe")
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize(("saver", "durability", "expected"), [
    (True, "sync", True), (True, "async", True), (True, "exit", False), (False, None, False),
])
def test_durable_means_a_checkpointer_and_not_exit_durability(
    saver: bool, durability: Durability | None, expected: bool
) -> None:
    graph = _probe_graph(durable, InMemorySaver() if saver else None)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"seen": []}, config, durability=durability)["seen"] == [expected]


@pytest.mark.parametrize("saver", [True, False])
def test_checkpointer_is_the_running_graphs_saver(saver: bool) -> None:
    memory = InMemorySaver() if saver else None
    graph = _probe_graph(lambda config: checkpointer(config) is memory, memory)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"seen": []}, config)["seen"] == [True]


def test_resuming_is_true_only_when_the_interrupted_step_runs_again() -> None:
    calls: list[bool] = []

    def node(state: Seen) -> dict[str, Any]:
        calls.append(resuming(get_config()))
        answer = interrupt("decide")
        return {"seen": [answer == "yes"]}

    builder = StateGraph(Seen)
    builder.add_node("ask", node)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"seen": []}, config)
    assert graph.invoke(Command(resume="yes"), config)["seen"] == [True]
    assert calls == [False, True]


def test_the_delta_reducer_gives_plain_messages_stable_ids() -> None:
    graph = _probe_graph(lambda _config: True, InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": ["hi", {"role": "user", "content": "there"}]}, config)
    first = graph.get_state(config).values["messages"]
    again = graph.get_state(config).values["messages"]
    assert [type(m) for m in first] == [HumanMessage, HumanMessage]
    assert all(m.id for m in first) and [m.id for m in first] == [m.id for m in again]


@pytest.mark.parametrize(("mode", "settings", "expected"), [
    ("messages", {}, True), ("updates", {}, False), ("updates", {"streaming": True}, True),
    ("messages", {"streaming": False}, False), ("messages", {"disable_streaming": True}, False),
])
def test_would_stream_is_langchains_own_rule_for_invoke(mode: str, settings: dict[str, Any],
                                                         expected: bool) -> None:
    """What ``invoke`` does inside a LangGraph node: stream_mode="messages" attaches a handler
    that makes a chat model stream, ``streaming=True`` does too; an explicit ``streaming=False``
    or ``disable_streaming`` wins."""
    chat = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), model="m", **settings)

    def probe(config: Any) -> bool:
        handlers = config["callbacks"].handlers
        return would_stream(chat, handlers, {}, async_api=False) and would_stream(
            chat, handlers, {}, async_api=True)

    graph = _probe_graph(probe)
    assert [p for p in graph.stream({"seen": []}, stream_mode=["values", mode])
            if p[0] == "values"][-1][1]["seen"] == [expected]


class Runs(BaseCallbackHandler):
    """Counts the chain runs by name."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        self.names[str(kw.get("name"))] += 1


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_edges_and_the_loop_detector_have_no_callback_run_of_their_own(mode: str) -> None:
    same = [("add", {"a": 1, "b": 2})]  # the second identical call warns: the detector acts once
    agent = create_loop_agent(ScriptedChatModel(script=[same, same, "3"]), [add],
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)))
    runs = Runs()
    state = {"messages": [HumanMessage("1+2?")]}
    if mode == "sync":
        agent.invoke(state, {"callbacks": [runs]})
    else:
        await agent.ainvoke(state, {"callbacks": [runs]})
    # one run per node step (LangGraph's own): no node nests a second run of its name
    assert runs.names["loop_detector"] == 1 and runs.names["prepare"] == 1
    assert runs.names["model"] == 3 and runs.names["tools"] == 2 and runs.names["router"] == 1
    assert not {"after_prepare", "after_model", "after_detector", "after_router",
                "condition"} & set(runs.names)


# --- whether a call streams (streams) -------------------------------------------------------

class Tokens(BaseCallbackHandler):
    """A handler that wants tokens, as LangGraph's ``stream_mode="messages"`` handler does."""

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output


class Events(Tokens, _V2StreamingCallbackHandler):
    """A handler that wants v2 protocol events (``invoke`` emits them; ``stream()`` does not)."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def openai_chat(**kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), model="m", **kwargs)


def test_a_call_is_streamed_when_langchain_would_stream_it_anyway() -> None:
    tokens = {"callbacks": CallbackManager(handlers=[Tokens()])}
    assert not streams(openai_chat(), {}, async_api=False)  # nobody asked for tokens: invoke
    assert streams(openai_chat(), tokens, async_api=False)  # stream_mode="messages", astream_events
    assert streams(openai_chat(), {"callbacks": [Tokens()]}, async_api=True)
    assert streams(openai_chat(streaming=True), {}, async_api=False)
    assert streams(openai_chat(streaming=True).bind_tools([lookup]), {}, async_api=False)
    assert streams(openai_chat(callbacks=[Tokens()]), {}, async_api=False)


def test_a_call_keeps_invoke_where_stream_would_behave_differently() -> None:
    tokens = {"callbacks": [Tokens()]}
    assert not streams(openai_chat(streaming=True, disable_streaming=True), tokens, async_api=False)
    no_tools = openai_chat(streaming=True, disable_streaming="tool_calling")
    assert streams(no_tools, {}, async_api=False)
    assert not streams(no_tools.bind_tools([lookup]), {}, async_api=False)
    assert not streams(openai_chat().bind(stream=False), tokens, async_api=False)
    assert not streams(openai_chat().with_retry(), tokens, async_api=False)  # stream() would not retry
    assert not streams(openai_chat(cache=InMemoryCache()), tokens, async_api=False)  # nor read the cache
    assert not streams(openai_chat(), {"callbacks": [Tokens(), Events()]}, async_api=False)  # v2 events


def test_fallbacks_stream_as_their_primary_model_does() -> None:
    tokens = {"callbacks": [Tokens()]}
    assert streams(openai_chat().with_fallbacks([openai_chat()]), tokens, async_api=False)
    no_stream = openai_chat(disable_streaming=True)
    assert not streams(no_stream.with_fallbacks([openai_chat()]), tokens, async_api=False)
