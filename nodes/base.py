"""The shape every node shares: logic written once, thin sync/async wrappers.

Example:
    >>> from graph.scripted import ScriptedChatModel
    >>> from graph.settings import LoopSettings
    >>> class Echo(LoopNode):
    ...     name = "echo"
    ...     def logic(self, state, config, runtime):
    ...         yield from ()
    ...         return {"iteration": state["iteration"] + 1}
    >>> node = Echo(LoopSettings.build(ScriptedChatModel()))
    >>> node.invoke({"iteration": 1}, {}, None)
    {'iteration': 2}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.runtime import Runtime
from langgraph.types import Command

from graph.effects import Logic, run_async, run_sync
from graph.settings import LoopSettings
from graph.state import LoopContext, LoopState

__all__ = ["LoopNode", "emit", "jsonable", "route_view"]


def jsonable(value: Any) -> Any:
    """``value`` made of JSON types only (enums by value, tuples as lists, others as str).

    Example:
        >>> from graph.stop import StopReason
        >>> jsonable({"reason": StopReason.STALLED, "args": (1, {"x": object}), "ok": None})
        {'reason': 'stalled', 'args': [1, {'x': "<class 'object'>"}], 'ok': None}
    """
    return json.loads(json.dumps(value, default=str))


def emit(runtime: Runtime[LoopContext] | None, event: str, **data: Any) -> None:
    """Send a JSON-friendly ``custom`` stream event ``{"event": event, **data}``.

    Events: ``iteration_start``, ``tool_call``, ``loop_warning``, ``budget_pressure``,
    ``iteration_end``, ``stop`` (once per run). No-op when nobody streams.
    """
    if runtime is not None and runtime.stream_writer is not None:
        runtime.stream_writer(jsonable({"event": event, **data}))


def route_view(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """State as the next node will see it, for a route function (O(update), not O(history)).

    ``messages`` holds the last stored message followed by the messages written now:
    enough for routes, which only look at the newest reply and what answers it.

    Example:
        >>> route_view({"messages": ["a", "b"], "stop_reason": None},
        ...            {"messages": ["c"], "stop_reason": "timeout"})
        {'messages': ['b', 'c'], 'stop_reason': 'timeout'}
    """
    view = {**state, **update}
    new = update.get("messages")
    tail = list((state.get("messages") or [])[-1:])
    view["messages"] = tail + (list(new) if isinstance(new, list) else [])
    return view


class LoopNode:
    """A graph node: ``logic`` is a generator of effects returning a state update.

    When the builder gives a node a ``route`` (a pure function of state), the node
    returns ``Command(update=..., goto=route(view))``: routing without a conditional
    edge, whose fresh state read would copy every channel on every step.
    """

    name = "node"
    trace = True  # False for cheap pure nodes: no callback run of their own

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.route: Callable[[Any], str] | None = None

    def _finish(self, state: LoopState, update: Any) -> Any:
        if self.route is None or not isinstance(update, dict):
            return update
        return Command(update=update, goto=self.route(route_view(state, update)))

    def run_settings(self, runtime: Runtime[LoopContext] | None) -> LoopSettings:
        """The settings with this run's overrides (runtime context) applied."""
        context = runtime.context if runtime is not None else None
        return self.settings.for_run(context if isinstance(context, dict) else None)

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        """The node's behaviour; override in subclasses."""
        raise NotImplementedError

    def invoke(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext]
    ) -> Any:
        """Sync entry point."""
        return self._finish(state, run_sync(self.logic(state, config, runtime)))

    async def ainvoke(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext]
    ) -> Any:
        """Async entry point."""
        return self._finish(state, await run_async(self.logic(state, config, runtime)))

    def as_runnable(self) -> RunnableCallable:
        """The node as LangGraph runs it (sync and async)."""
        return RunnableCallable(self.invoke, self.ainvoke, name=self.name, trace=self.trace)
