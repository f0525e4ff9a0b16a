"""The systems under test, built from one scripted model and its tools.

Every system is exposed as a :class:`System`: ``build(model, tools, n, checkpointer)``
returns an :data:`Invoker` that runs one task to the end and returns the final state
(a dict with at least ``messages``).

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
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "PEER_SYSTEMS",
    "GraphInvoker",
    "Invoker",
    "System",
    "all_systems",
    "load_langgraph_loop",
    "plain_loop",
    "recursion_limit",
]

Invoker = Callable[[str], dict[str, Any]]
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


class GraphInvoker:
    """Run a compiled graph: a fresh thread id per call, a recursion limit for ``n`` rounds.

    Calling it runs one task; :meth:`debug_events` runs one task with ``stream_mode="debug"``
    (for counting steps and checkpoints).
    """

    def __init__(self, graph: Any, n: int) -> None:
        self.graph = graph
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

    def debug_events(self, prompt: str) -> list[dict[str, Any]]:
        """Run one task on a new thread and return its ``stream_mode="debug"`` events."""
        stream = self.graph.stream({"messages": [HumanMessage(prompt)]}, self._config(), stream_mode="debug")
        return list(stream)


def _graph_invoker(graph: Any, n: int) -> Invoker:
    return GraphInvoker(graph, n)


def _build_plain(
    model: BaseChatModel, tools: list[BaseTool], n: int, saver: BaseCheckpointSaver[Any] | None
) -> Invoker:
    return lambda prompt: {"messages": plain_loop(model, tools, prompt)}


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
    System("create_react_agent", _build_react),
    System("create_agent", _build_create_agent),
    System("create_agent_limits", _build_create_agent_limits),
)


def all_systems() -> list[System]:
    """The peers, plus ``langgraph-loop`` when it can be imported."""
    systems = list(PEER_SYSTEMS)
    if load_langgraph_loop() is not None:
        systems.append(System("langgraph-loop", _build_langgraph_loop))
    return systems
