"""The systems under test, built from one scripted model and its tools.

Every system is exposed as a :class:`System`: ``build(model, tools, n, checkpointer)``
returns an :class:`Invoker` that runs one task to the end and returns the final state
(a dict with at least ``messages``): called, with sync ``invoke``; :meth:`Invoker.ainvoke`,
with async ``ainvoke`` (given an async-capable checkpointer).

The two bare LangGraph loops are the floor for a loop that *is* a LangGraph graph (issue 24):
``StateGraph(MessagesState)`` with a ``model`` node and a ``tools`` node, nothing else.
``bare_direct``'s tool node calls ``tool.invoke`` itself; ``bare_toolnode`` uses LangGraph's
``ToolNode`` and ``tools_condition``. Their nodes are plain functions, so each is compiled
twice: sync functions for ``invoke``, ``async def`` ones for ``ainvoke`` (what a user writes;
a sync node under ``ainvoke`` would run in a thread).

Example (the echo task, sync and async):
    >>> import asyncio
    >>> from benchmarks.scripted import EchoModel, make_echo
    >>> bare = next(s for s in PEER_SYSTEMS if s.name == "bare_toolnode")
    >>> invoker = bare.build(EchoModel(n_rounds=2), [make_echo()], 2, None)
    >>> invoker("go")["messages"][-1].content
    'Done after 2 rounds.'
    >>> asyncio.run(invoker.ainvoke("go"))["messages"][-1].content
    'Done after 2 rounds.'

The langgraph-loop adapter codes against the public contract
``from langgraph_loop import create_loop_agent, Limits`` and is skipped (with
``langgraph-loop: not available``) when that import fails.
"""

from __future__ import annotations

import importlib
import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

__all__ = [
    "PEER_SYSTEMS",
    "GraphInvoker",
    "Invoker",
    "PlainInvoker",
    "System",
    "all_systems",
    "aplain_loop",
    "bare_graph",
    "load_langgraph_loop",
    "plain_loop",
    "recursion_limit",
]


class Invoker(Protocol):
    """Runs one task to the end on a fresh thread and returns the final state."""

    def __call__(self, prompt: str) -> dict[str, Any]:
        """Sync: ``invoke``."""
        ...

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        """Async: ``ainvoke``."""
        ...


Builder = Callable[[BaseChatModel, list[BaseTool], int, "BaseCheckpointSaver[Any] | None"], Invoker]


@dataclass(frozen=True)
class System:
    """A named system; ``checkpoints`` is False when it cannot take a checkpointer."""

    name: str
    build: Builder
    checkpoints: bool = True


def recursion_limit(n: int) -> int:
    """A recursion limit no system reaches within ``n`` rounds (10 supersteps per round)."""
    return max(1_000, 10 * n + 100)


def plain_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    prompt: str,
    *,
    max_model_calls: int | None = None,
) -> list[BaseMessage]:
    """The floor: ``bound.invoke`` + ``tool.invoke`` in a while loop; returns the transcript."""
    bound = model.bind_tools(list(tools))
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(prompt)]
    calls = 0
    while max_model_calls is None or calls < max_model_calls:
        ai = bound.invoke(messages)
        calls += 1
        messages.append(ai)
        if not getattr(ai, "tool_calls", None):
            break
        messages.extend(by_name[tc["name"]].invoke(tc) for tc in ai.tool_calls)
    return messages


async def aplain_loop(model: BaseChatModel, tools: Sequence[BaseTool], prompt: str) -> list[BaseMessage]:
    """:func:`plain_loop` with ``bound.ainvoke`` + ``tool.ainvoke``."""
    bound = model.bind_tools(list(tools))
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(prompt)]
    while True:
        ai = await bound.ainvoke(messages)
        messages.append(ai)
        if not getattr(ai, "tool_calls", None):
            return messages
        messages.extend([await by_name[tc["name"]].ainvoke(tc) for tc in ai.tool_calls])


class PlainInvoker:
    """:func:`plain_loop` / :func:`aplain_loop` as an :class:`Invoker` (no graph, no checkpointer)."""

    def __init__(self, model: BaseChatModel, tools: list[BaseTool]) -> None:
        self.model = model
        self.tools = tools

    def __call__(self, prompt: str) -> dict[str, Any]:
        """Run the sync loop."""
        return {"messages": plain_loop(self.model, self.tools, prompt)}

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        """Run the async loop."""
        return {"messages": await aplain_loop(self.model, self.tools, prompt)}


class GraphInvoker:
    """Run a compiled graph: a fresh thread id per call, a recursion limit for ``n`` rounds.

    Calling it runs one task with ``invoke``, :meth:`ainvoke` with ``ainvoke`` (on ``agraph``
    when given: a graph of async nodes); :meth:`debug_events` runs one task with
    ``stream_mode="debug"`` (for counting steps and checkpoints).
    """

    def __init__(self, graph: Any, n: int, agraph: Any = None) -> None:
        self.graph = graph
        self.agraph = graph if agraph is None else agraph
        self.n = n
        self._threads = itertools.count()

    def _config(self) -> dict[str, Any]:
        return {
            "recursion_limit": recursion_limit(self.n),
            "configurable": {"thread_id": f"bench-{next(self._threads)}"},
        }

    def __call__(self, prompt: str) -> dict[str, Any]:
        """Run one task on a new thread and return the final state."""
        result: dict[str, Any] = self.graph.invoke({"messages": [HumanMessage(prompt)]}, self._config())
        return result

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        """Run one task on a new thread with ``ainvoke`` and return the final state."""
        result: dict[str, Any] = await self.agraph.ainvoke(
            {"messages": [HumanMessage(prompt)]}, self._config()
        )
        return result

    def debug_events(self, prompt: str) -> list[dict[str, Any]]:
        """Run one task on a new thread and return its ``stream_mode="debug"`` events."""
        stream = self.graph.stream({"messages": [HumanMessage(prompt)]}, self._config(), stream_mode="debug")
        return list(stream)


def _graph_invoker(graph: Any, n: int) -> Invoker:
    return GraphInvoker(graph, n)


def _build_plain(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    return PlainInvoker(model, tools)


ToolsKind = Literal["direct", "toolnode"]


def _route(state: MessagesState) -> Literal["tools", "__end__"]:
    """``bare_direct``'s edge: to the tools when the last reply asks for any."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"


def bare_graph(
    model: BaseChatModel,
    tools: list[BaseTool],
    kind: ToolsKind,
    *,
    asynchronous: bool = False,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    state_schema: type[Any] = MessagesState,
) -> Any:
    """The bare two-node loop, compiled: ``model`` ⇄ ``tools``, nothing else.

    ``kind="direct"``: the tool node calls ``tool.invoke`` (``ainvoke``) per tool call, and a
    plain edge function routes; ``"toolnode"``: ``ToolNode(tools)`` and ``tools_condition``.
    ``asynchronous`` makes the nodes ``async def`` (for ``ainvoke``). ``state_schema``: the
    graph's state (the nodes read and write ``messages`` only).
    """
    bound = model.bind_tools(tools)
    by_name = {t.name: t for t in tools}

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def acall_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    def call_tools(state: MessagesState) -> dict[str, list[ToolMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [by_name[tc["name"]].invoke(tc) for tc in last.tool_calls]}

    async def acall_tools(state: MessagesState) -> dict[str, list[ToolMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [await by_name[tc["name"]].ainvoke(tc) for tc in last.tool_calls]}

    builder = StateGraph(state_schema)
    builder.add_node("model", acall_model if asynchronous else call_model, input_schema=state_schema)
    if kind == "toolnode":
        builder.add_node("tools", ToolNode(tools))
        builder.add_conditional_edges("model", tools_condition)
    else:
        builder.add_node("tools", acall_tools if asynchronous else call_tools, input_schema=state_schema)
        builder.add_conditional_edges("model", _route)
    builder.add_edge(START, "model")
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def _bare_builder(kind: ToolsKind, state_schema: Callable[[], type[Any]] = lambda: MessagesState) -> Builder:
    """A builder of the bare loop of ``kind``: a sync graph for ``invoke``, an async one for
    ``ainvoke`` (over ``state_schema()``)."""

    def build(
        model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
    ) -> Invoker:
        schema = state_schema()
        graph = bare_graph(model, tools, kind, checkpointer=saver, state_schema=schema)
        agraph = bare_graph(model, tools, kind, asynchronous=True, checkpointer=saver, state_schema=schema)
        return GraphInvoker(graph, n, agraph)

    return build


def _build_react(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        graph = create_react_agent(model, tools, checkpointer=saver)
    return _graph_invoker(graph, n)


def _build_create_agent(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    from langchain.agents import create_agent

    return _graph_invoker(create_agent(model, tools, checkpointer=saver), n)


def _build_create_agent_limits(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    from langchain.agents import create_agent
    from langchain.agents.middleware import (
        AgentMiddleware,
        ModelCallLimitMiddleware,
        ToolCallLimitMiddleware,
    )

    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        ModelCallLimitMiddleware(run_limit=n + 10, exit_behavior="end"),
        ToolCallLimitMiddleware(run_limit=n + 10, exit_behavior="end"),
    ]
    graph = create_agent(model, tools, middleware=middleware, checkpointer=saver)
    return _graph_invoker(graph, n)


_LOOPGRAPH: list[ModuleType | None] = []


def load_langgraph_loop() -> ModuleType | None:
    """Import the langgraph-loop package once; print why and return None when unavailable."""
    if not _LOOPGRAPH:
        try:
            module = importlib.import_module("langgraph_loop")
            for name in ("create_loop_agent", "Limits", "LoopDetection"):
                getattr(module, name)
        except Exception as exc:  # noqa: BLE001 - any import failure means "skip it"
            print(f"langgraph-loop: not available ({type(exc).__name__}: {exc})")
            module = None
        _LOOPGRAPH.append(module)
    return _LOOPGRAPH[0]


def _build_langgraph_loop(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    """``create_loop_agent`` with default loop detection; the model-call limit cannot fire."""
    lg = load_langgraph_loop()
    assert lg is not None, "langgraph-loop is not importable"
    graph = lg.create_loop_agent(
        model,
        tools,
        limits=lg.Limits(max_model_calls=n + 10),
        checkpointer=saver,
    )
    return _graph_invoker(graph, n)


PEER_SYSTEMS: tuple[System, ...] = (
    System("plain_loop", _build_plain, checkpoints=False),
    System("bare_direct", _bare_builder("direct")),
    System("bare_toolnode", _bare_builder("toolnode")),
    System("create_react_agent", _build_react),
    System("create_agent", _build_create_agent),
    System("create_agent_limits", _build_create_agent_limits),
)


def _loop_state() -> type[Any]:
    """langgraph-loop's public ``LoopState`` (every key the contract promises, and the nodes' own)."""
    lg = load_langgraph_loop()
    assert lg is not None, "langgraph-loop is not importable"
    return lg.LoopState  # type: ignore[no-any-return]


def all_systems() -> list[System]:
    """The peers, plus ``langgraph-loop`` and ``bare_toolnode_loopstate`` (the bare ``ToolNode``
    loop over ``LoopState``: what our state's channels cost a loop that does nothing else) when
    it can be imported."""
    systems = list(PEER_SYSTEMS)
    if load_langgraph_loop() is not None:
        systems.append(System("bare_toolnode_loopstate", _bare_builder("toolnode", _loop_state)))
        systems.append(System("langgraph-loop", _build_langgraph_loop))
    return systems
