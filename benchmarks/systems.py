"""The systems under test: ``build(model, tools, n, saver)`` gives an invoker that runs one task on
a fresh thread (called: ``invoke``; ``.ainvoke``: ``ainvoke``) and returns the final state.

``plain_loop`` (no graph), the bare two-node LangGraph loops (``bare_direct``: the tool node calls
``tool.invoke``; ``bare_toolnode``: ``ToolNode`` + ``tools_condition``; ``bare_toolnode_loopstate``:
that loop over ``LoopState``), compiled with sync nodes for ``invoke`` and async ones for
``ainvoke``; ``create_react_agent``, ``create_agent`` (``_limits``: both limit middlewares), and
``langgraph-loop`` when ``from langgraph_loop import create_loop_agent`` works.

Example:
    >>> import asyncio
    >>> from benchmarks.scripted import EchoModel, make_echo
    >>> bare = next(s for s in PEER_SYSTEMS if s.name == "bare_toolnode")
    >>> invoker = bare.build(EchoModel(n_rounds=2), [make_echo()], 2, None)
    >>> invoker("go")["messages"][-1].content, asyncio.run(invoker.ainvoke("go"))["messages"][-1].content
    ('Done after 2 rounds.', 'Done after 2 rounds.')
"""

from __future__ import annotations

import importlib
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

__all__ = ["PEER_SYSTEMS", "GraphInvoker", "System", "all_systems", "load_langgraph_loop", "recursion_limit"]

Saver = BaseCheckpointSaver[Any] | None
Builder = Callable[[BaseChatModel, list[BaseTool], int, Saver], Any]


@dataclass(frozen=True)
class System:
    """A named system; ``checkpoints`` is False when it cannot take a checkpointer."""

    name: str
    build: Builder
    checkpoints: bool = True


def recursion_limit(n: int) -> int:
    """A recursion limit no system reaches within ``n`` rounds (10 supersteps per round)."""
    return max(1_000, 10 * n + 100)


class PlainInvoker:
    """``bound.invoke`` + ``tool.invoke`` in a while loop (``ainvoke`` for :meth:`ainvoke`)."""

    def __init__(self, model: BaseChatModel, tools: list[BaseTool]) -> None:
        self.bound, self.tools = model.bind_tools(tools), {t.name: t for t in tools}

    def __call__(self, prompt: str) -> dict[str, Any]:
        """Run the sync loop."""
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        while (ai := self.bound.invoke(messages)).tool_calls:
            messages += [ai, *(self.tools[tc["name"]].invoke(tc) for tc in ai.tool_calls)]
        return {"messages": [*messages, ai]}

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        """Run the async loop."""
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        while (ai := await self.bound.ainvoke(messages)).tool_calls:
            messages += [ai, *[await self.tools[tc["name"]].ainvoke(tc) for tc in ai.tool_calls]]
        return {"messages": [*messages, ai]}


class GraphInvoker:
    """Runs a compiled graph (``agraph``, a graph of async nodes, for :meth:`ainvoke` when given):
    a fresh thread id per call, a recursion limit for ``n`` rounds."""

    def __init__(self, graph: Any, n: int, agraph: Any = None) -> None:
        self.graph, self.agraph, self.n = graph, graph if agraph is None else agraph, n
        self._threads = itertools.count()

    def _args(self, prompt: str) -> tuple[dict[str, Any], dict[str, Any]]:
        thread = {"thread_id": f"bench-{next(self._threads)}"}
        return {"messages": [HumanMessage(prompt)]}, {"recursion_limit": recursion_limit(self.n),
                                                      "configurable": thread}

    def __call__(self, prompt: str) -> dict[str, Any]:
        """Run one task with ``invoke``; the final state."""
        return dict(self.graph.invoke(*self._args(prompt)))

    async def ainvoke(self, prompt: str) -> dict[str, Any]:
        """Run one task with ``ainvoke``; the final state."""
        return dict(await self.agraph.ainvoke(*self._args(prompt)))

    def debug_events(self, prompt: str) -> list[dict[str, Any]]:
        """Run one task; its ``stream_mode="debug"`` events (for counting steps and checkpoints)."""
        return list(self.graph.stream(*self._args(prompt), stream_mode="debug"))


def bare_graph(model: BaseChatModel, tools: list[BaseTool], kind: Literal["direct", "toolnode"], *,
               asynchronous: bool = False, checkpointer: Saver = None,
               state_schema: type[Any] = MessagesState) -> Any:
    """The bare two-node loop, compiled: ``model`` ⇄ ``tools``, nothing else."""
    bound, by_name = model.bind_tools(tools), {t.name: t for t in tools}

    def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def acall_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    def call_tools(state: MessagesState) -> dict[str, list[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [by_name[tc["name"]].invoke(tc) for tc in last.tool_calls]}

    async def acall_tools(state: MessagesState) -> dict[str, list[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {"messages": [await by_name[tc["name"]].ainvoke(tc) for tc in last.tool_calls]}

    def route(state: MessagesState) -> Literal["tools", "__end__"]:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"

    builder = StateGraph(state_schema)
    builder.add_node("model", acall_model if asynchronous else call_model, input_schema=state_schema)
    if kind == "toolnode":
        builder.add_node("tools", ToolNode(tools))
        builder.add_conditional_edges("model", tools_condition)
    else:
        builder.add_node("tools", acall_tools if asynchronous else call_tools, input_schema=state_schema)
        builder.add_conditional_edges("model", route)
    builder.add_edge(START, "model")
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def _bare(kind: Literal["direct", "toolnode"],
          schema: Callable[[], type[Any]] = lambda: MessagesState) -> Builder:
    """The bare loop of ``kind`` over ``schema()``: a sync graph for ``invoke``, an async one for
    ``ainvoke``."""
    return lambda model, tools, n, saver: GraphInvoker(
        bare_graph(model, tools, kind, checkpointer=saver, state_schema=schema()), n,
        bare_graph(model, tools, kind, asynchronous=True, checkpointer=saver, state_schema=schema()))


def _react(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
    with warnings.catch_warnings():  # deprecated in favour of create_agent
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return GraphInvoker(create_react_agent(model, tools, checkpointer=saver), n)


def _create_agent(limits: bool) -> Builder:
    """``create_agent``; with ``limits``, plus both limit middlewares at ``run_limit=N+10``."""
    def build(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
        from langchain.agents import create_agent
        from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware

        middleware = [ModelCallLimitMiddleware(run_limit=n + 10, exit_behavior="end"),
                      ToolCallLimitMiddleware(run_limit=n + 10, exit_behavior="end")] if limits else []
        return GraphInvoker(create_agent(model, tools, middleware=middleware, checkpointer=saver), n)

    return build


_LOOPGRAPH: list[ModuleType | None] = []


def load_langgraph_loop() -> ModuleType | None:
    """Import the langgraph-loop package once; print why and return None when unavailable."""
    if not _LOOPGRAPH:
        try:
            module: ModuleType | None = importlib.import_module("langgraph_loop")
            for name in ("create_loop_agent", "Limits", "LoopDetection", "LoopState"):
                getattr(module, name)
        except Exception as exc:  # noqa: BLE001 - any import failure means "skip it"
            print(f"langgraph-loop: not available ({type(exc).__name__}: {exc})")
            module = None
        _LOOPGRAPH.append(module)
    return _LOOPGRAPH[0]


def _langgraph_loop(model: BaseChatModel, tools: list[BaseTool], n: int, saver: Saver) -> GraphInvoker:
    """``create_loop_agent`` with default loop detection; the model-call limit cannot fire."""
    lg = load_langgraph_loop()
    assert lg is not None, "langgraph-loop is not importable"
    return GraphInvoker(lg.create_loop_agent(model, tools, limits=lg.Limits(max_model_calls=n + 10),
                                             checkpointer=saver), n)


PEER_SYSTEMS: tuple[System, ...] = (
    System("plain_loop", lambda model, tools, n, saver: PlainInvoker(model, tools), checkpoints=False),
    System("bare_direct", _bare("direct")),
    System("bare_toolnode", _bare("toolnode")),
    System("create_react_agent", _react),
    System("create_agent", _create_agent(limits=False)),
    System("create_agent_limits", _create_agent(limits=True)),
)


def all_systems() -> list[System]:
    """The peers, plus ``bare_toolnode_loopstate`` and ``langgraph-loop`` when it can be imported."""
    lg = load_langgraph_loop()
    if lg is None:
        return list(PEER_SYSTEMS)
    return [*PEER_SYSTEMS, System("bare_toolnode_loopstate", _bare("toolnode", lambda: lg.LoopState)),
            System("langgraph-loop", _langgraph_loop)]
