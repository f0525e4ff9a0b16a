"""The ``prepare`` node: start a run with fresh per-run counters.

It validates the run's overrides, gives the run an id, resets every per-run key
(``iteration``, ``iterations``, ``usage``, ``judge_usage``, ``progress``, the fresh-context
baseline; the loop detector's window is derived from the run's own messages), drops
notices left by earlier runs, and repairs a thread whose last AIMessage still has unanswered tool calls (a run
abandoned at an approval pause) so the next request stays provider-valid.

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
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Call, Logic
from langgraph_loop.core.pairing import unanswered_tail
from langgraph_loop.core.records import Guard, new_usage
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import RESET, LoopContext, LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.base import LoopNode, emit
from langgraph_loop.nodes.passes import new_pass
from langgraph_loop.nodes.steps import fits, start_steps

__all__ = ["PrepareNode", "repair_dangling", "start_run"]

CANCELLED = "Error: this call was not executed: the run that requested it ended first."


def repair_dangling(messages: Sequence[BaseMessage]) -> list[Any]:
    """Writes that answer the last AIMessage's unanswered calls before newer messages."""
    index, missing = unanswered_tail(messages)
    if not missing:
        return []
    later = [m for m in messages[index + 1 :] if not isinstance(m, ToolMessage)]
    answers = [ToolMessage(CANCELLED, tool_call_id=c, status="error") for c in missing]
    return [RemoveMessage(id=str(m.id)) for m in later] + answers + later


def start_run(state: LoopState, settings: LoopSettings, *, now: float | None = None) -> dict[str, Any]:
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
    update: dict[str, Any] = {
        "run": {"id": uuid.uuid4().hex, "started_at": started, "request_id": request_id,
                "tool_calls": 0, "auto_rounds": 0, "finalized": False, "pressure_queued": False,
                "guard": None},
        "pass_info": new_pass(request_id, now=started),
        "iteration": 1,
        "iterations": [],
        "usage": new_usage(),
        "judge_usage": new_usage(),
        "progress": [],
        "pending_notices": [],
        "verdict": None,
        "stop_reason": None,
        "structured_response": None,
        "call_log": RESET,
    }
    if not fits(state.get("remaining_steps"), start_steps(settings)):
        update["stop_reason"] = StopReason.STEP_LIMIT  # no pass can run: end at once
        update["iteration"] = 0
        guard: Guard = {"guard": "limits", "reason": "step_limit", "limit": "recursion_limit"}
        update["run"].update(finalized=True, guard=guard)
    repairs = repair_dangling(messages)
    if repairs:
        update["messages"] = repairs
    return update


class PrepareNode(LoopNode):
    """Start a run (``start_run``), then tell ``hooks.on_iteration_start``."""

    name = "prepare"

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)  # validates per-run overrides up front
        update = start_run(state, settings)
        hook = settings.hooks.on_iteration_start
        if hook is not None:
            yield Call(hook, ({**state, **update},), name="hooks.on_iteration_start")
        emit(runtime, {"event": "iteration_start", "iteration": 1})
        return update
