"""What the nodes that call out share: logic written once as effects, sync/async entry points.

A node that calls a model, a tool or a user callback writes its logic once as a
generator of effects (``graph/core/effects.py``); ``invoke``/``ainvoke`` perform them
the sync or the async way. Pure nodes are plain functions and need none of this.

Example:
    >>> from langgraph_loop.core.effects import Call
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> class Double(LoopNode):
    ...     name = "double"
    ...     def logic(self, state, config, runtime):
    ...         doubled = yield Call(lambda n: n * 2, (state["iteration"],))
    ...         return {"iteration": doubled}
    >>> Double(LoopSettings.build(ScriptedChatModel())).invoke({"iteration": 2}, {}, None)
    {'iteration': 4}
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Logic, run_async, run_sync
from langgraph_loop.core.records import Event
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.core.stop import StopReason

__all__ = ["LoopNode", "emit", "jsonable", "plain_update", "settings_for_run"]


def jsonable(value: Any) -> Any:
    """``value`` made of JSON types only (enums by value, tuples as lists, others as str).

    Example:
        >>> from langgraph_loop.core.stop import StopReason
        >>> jsonable({"reason": StopReason.STALLED, "args": (1, {"x": object}), "ok": None})
        {'reason': 'stalled', 'args': [1, {'x': "<class 'object'>"}], 'ok': None}
    """
    return json.loads(json.dumps(value, default=str))


def emit(runtime: Runtime[LoopContext] | None, event: Event) -> None:
    """Send a typed ``custom`` stream event, made JSON-friendly (no-op when nobody streams)."""
    if runtime is not None and runtime.stream_writer is not None:
        runtime.stream_writer(jsonable(event))


def plain_update(update: Any) -> Any:
    """The update with ``stop_reason`` as a plain ``str``.

    A node's writes are saved as they are (before any reducer): a ``StopReason`` enum
    would be an unregistered type in the checkpoint, which LangGraph's strict msgpack
    mode refuses to load back.

    Example:
        >>> from langgraph_loop.core.stop import StopReason
        >>> type(plain_update({"stop_reason": StopReason.STALLED})["stop_reason"])
        <class 'str'>
    """
    if isinstance(update, dict) and isinstance(update.get("stop_reason"), StopReason):
        update["stop_reason"] = update["stop_reason"].value
    return update


def settings_for_run(settings: LoopSettings, runtime: Runtime[LoopContext] | None) -> LoopSettings:
    """``settings`` with this run's overrides (its runtime context) applied and validated."""
    context = runtime.context if runtime is not None else None
    return settings.for_run(context if isinstance(context, dict) else None)


class LoopNode:
    """A graph node: ``logic`` is a generator of effects returning a state update."""

    name = "node"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def run_settings(self, runtime: Runtime[LoopContext] | None) -> LoopSettings:
        """The settings with this run's overrides (runtime context) applied."""
        return settings_for_run(self.settings, runtime)

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        """The node's behaviour; override in subclasses."""
        raise NotImplementedError

    def invoke(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext]
    ) -> Any:
        """Sync entry point."""
        return plain_update(run_sync(self.logic(state, config, runtime)))

    async def ainvoke(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext]
    ) -> Any:
        """Async entry point."""
        return plain_update(await run_async(self.logic(state, config, runtime)))
