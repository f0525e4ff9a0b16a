"""The ``prepare`` node: start a run with fresh per-run counters.

It validates the run's overrides and stores them with the run (``run["overrides"]``: every
resume of the run enforces them), gives the run an id, resets every per-run key
(``iteration``, ``iterations``, ``usage``, ``judge_usage``, ``progress``, the fresh-context
baseline; the loop detector's window is derived from the run's own messages), drops
notices left by earlier runs, and repairs a thread whose last AIMessage still has
unanswered tool calls (a run abandoned at an approval pause) so the next request stays
provider-valid.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> msgs = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a"),
    ...         HumanMessage("new question", id="h")]
    >>> [type(m).__name__ for m in repair_dangling(msgs)]
    ['RemoveMessage', 'ToolMessage', 'HumanMessage']
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import get_runtime

from langgraph_loop.core.callbacks import call_async, call_sync
from langgraph_loop.core.history import not_executed
from langgraph_loop.core.messages import unanswered_tail
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.shape import Route, take_edge
from langgraph_loop.core.state import RESET, LoopState, RunInfo, emit, new_iteration, new_usage
from langgraph_loop.core.stop import StopReason, limit_guard, stop_update

__all__ = ["PrepareNode", "repair_dangling", "start_run"]


def repair_dangling(messages: Sequence[BaseMessage]) -> list[Any]:
    """Writes that answer the last AIMessage's unanswered calls before newer messages."""
    index, missing = unanswered_tail(messages)
    if not missing:
        return []
    later = [m for m in messages[index + 1 :] if not isinstance(m, ToolMessage)]
    answers = [not_executed(c) for c in missing]
    return [RemoveMessage(id=str(m.id)) for m in later] + answers + later


def start_run(state: LoopState, settings: LoopSettings, *, now: float | None = None,
              overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The update that starts a run: fresh per-run keys, a repaired thread (pure).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> s = LoopSettings.build(ScriptedChatModel())
        >>> update = start_run({"messages": [HumanMessage("hi", id="h1")]}, s, now=5.0)
        >>> update["iteration"], update["run"]["request_id"], update["stop_reason"]
        (1, 'h1', None)
    """
    messages = state.get("messages") or []
    request = messages[-1] if messages else None
    started = time.time() if now is None else now
    request_id = request.id if request is not None else None
    run: RunInfo = {"id": uuid.uuid4().hex, "started_at": started, "request_id": request_id,
                    "auto_rounds": 0, "finalized": False,
                    "pressure_queued": False, "guard": None, "overrides": dict(overrides or {})}
    update: dict[str, Any] = {
        "run": run,
        "iteration_info": new_iteration(request_id, now=started),
        "iteration": 1,
        "iterations": [],
        "usage": new_usage(),
        "judge_usage": new_usage(),
        "progress": [],
        "pending_notices": [],
        "verdict": None,
        "review": None,
        "stop_reason": None,
        "structured_response": None,
        "call_log": RESET,
    }
    if not settings.shape.fits(state.get("remaining_steps"), settings.shape.start_steps):
        # no iteration can run: end at once
        why = limit_guard(StopReason.STEP_LIMIT, "recursion_limit", state.get("remaining_steps"))
        del why["value"]
        update.update(stop_update(run, why, finalized=True), iteration=0)
    repairs = repair_dangling(messages)
    if repairs:
        update["messages"] = repairs
    return update


class PrepareNode(Runnable[LoopState, dict[str, Any]]):
    """Start a run (``start_run``), then tell ``hooks.on_iteration_start``."""

    name = "prepare"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.route: Route | None = None
        """The edge after this node, when it takes it itself (set by the builder)."""

    def _start(self, state: LoopState) -> tuple[dict[str, Any], LoopSettings]:
        runtime = get_runtime()
        overrides = self.settings.overrides(runtime.context)  # validated, stored with the run
        settings = self.settings.for_runtime(runtime)
        return start_run(state, settings, overrides=overrides), settings

    def invoke(self, state: LoopState, config: RunnableConfig | None = None,  # type: ignore[override]
               **kwargs: Any) -> dict[str, Any]:
        """Sync entry point."""
        update, settings = self._start(state)
        if settings.hooks.on_iteration_start is not None:
            call_sync(settings.hooks.on_iteration_start, {**state, **update},
                      name="hooks.on_iteration_start")
        emit(get_runtime(), {"event": "iteration_start", "iteration": 1})
        return take_edge(self.route, state, update)

    async def ainvoke(self, state: LoopState, config: RunnableConfig | None = None,  # type: ignore[override]
                      **kwargs: Any) -> dict[str, Any]:
        """Async entry point."""
        update, settings = self._start(state)
        if settings.hooks.on_iteration_start is not None:
            await call_async(settings.hooks.on_iteration_start, {**state, **update},
                             name="hooks.on_iteration_start")
        emit(get_runtime(), {"event": "iteration_start", "iteration": 1})
        return take_edge(self.route, state, update)
