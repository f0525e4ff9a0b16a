"""The ``prepare`` node: start a run with fresh per-run counters.

It stores the run's validated overrides with the run (every resume enforces them), resets
every per-run key, and repairs a thread whose last AIMessage still has unanswered tool calls (a
run abandoned at an approval pause) so the next request stays provider-valid.

A message a person typed while the run was paused at the loop question does not start a new
run (``go_on``): the run goes on with its counters, its detector's window and its budget, so a
model that goes back to the same call is stopped (or asked) at once instead of looping again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.drive import StepNode, Steps
from langgraph_loop.core.history import not_executed
from langgraph_loop.core.messages import newest_reply
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import RESET, LoopState, RunInfo, ThreadBudget, emit, new_iteration, new_usage
from langgraph_loop.core.stop import StopReason, limit_guard, stop_update
from langgraph_loop.core.upgrade import translated
from langgraph_loop.engine.dialogue import typed_instead

__all__ = ["PrepareNode", "folded_budget", "go_on", "repair_dangling", "start_run"]


def repair_dangling(messages: Sequence[BaseMessage]) -> list[Any]:
    """Writes that answer the last AIMessage's unanswered calls before newer messages."""
    newest = newest_reply(messages)
    if not newest.pending:
        return []
    later = [m for m in messages[newest.at + 1 :] if not isinstance(m, ToolMessage)]
    answers = [not_executed(c) for c in newest.pending]
    return [RemoveMessage(id=str(m.id)) for m in later] + answers + later


def folded_budget(state: LoopState) -> ThreadBudget | None:
    """The thread's budget record with the run that ends here folded in: its tokens and
    what a person added at its check-ins (None: nothing to fold)."""
    run = state.get("run") or {}
    spent = int((state.get("usage") or {}).get("total_tokens") or 0)
    extra = int(run.get("budget_extra") or 0)
    if not run.get("id") or not (spent or extra):
        return None
    before = state.get("thread_budget") or {}
    return ThreadBudget(spent=int(before.get("spent") or 0) + spent,
                        extra=int(before.get("extra") or 0) + extra)


def go_on(state: LoopState, settings: LoopSettings) -> dict[str, Any] | None:
    """A message typed while the run waits at the loop question (``LoopDetection.ask_human``)
    continues it as a redirect (``typed_instead``: the paused calls are recorded as not run;
    None: not that case)."""
    run = state.get("run") or {}
    decision = run.get("decision") or {}
    detection = settings.loop_detection
    if (detection is None or not detection.ask_human or decision.get("guard") is None
            or decision.get("finding") is None):
        return None  # the question is not open
    writes = typed_instead(state.get("messages") or [])
    if writes is None:
        return None
    return {"run": {k: v for k, v in run.items() if k != "decision"}, "messages": writes}


def start_run(state: LoopState, settings: LoopSettings, *, now: float | None = None,
              overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The update that starts a run: fresh per-run keys, a repaired thread (pure)."""
    messages = state.get("messages") or []
    started = time.time() if now is None else now
    request_id = messages[-1].id if messages else None
    run: RunInfo = {"id": uuid.uuid4().hex, "started_at": started, "request_id": request_id,
                    "auto_rounds": 0, "finalized": False,
                    "pressure_queued": False, "overrides": dict(overrides or {})}
    update: dict[str, Any] = {
        "run": run,
        "iteration_info": new_iteration(request_id, now=started),
        "iteration": 1,
        "iterations": [],
        "usage": new_usage(),
        "judge_usage": new_usage(),
        "progress": [],
        "loop_notices": [],
        "verdict": None,
        "review": None,
        "stop_reason": None,
        "stop_guard": None,
        "structured_response": None,
        "call_log": RESET,
    }
    if not settings.shape.fits(state.get("remaining_steps"), settings.shape.start_steps):
        # no iteration can run: end at once
        why = limit_guard(StopReason.STEP_LIMIT, "recursion_limit", state.get("remaining_steps"))
        del why["value"]
        update.update(stop_update(run, why, finalized=True), iteration=0)
    upgraded = translated(messages)  # a thread 0.2 stored: read once, in 0.4's shape
    thread: Sequence[BaseMessage] = messages
    if upgraded:
        by_id = {m.id: m for m in upgraded}
        thread = [by_id.get(m.id, m) for m in messages]
    repairs = repair_dangling(thread)
    if upgraded or repairs:
        update["messages"] = [*upgraded, *repairs]
    folded = folded_budget(state)
    if folded is not None:
        update["thread_budget"] = folded
    return update


class PrepareNode(StepNode):
    """Start a run (``start_run``), then tell ``hooks.on_iteration_start``."""

    name = "prepare"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """Start the run (or ``go_on`` with a paused one); a new one calls
        ``hooks.on_iteration_start`` and emits its event."""
        runtime = get_runtime()
        settings = self.settings.for_runtime(runtime)
        going_on = go_on(state, settings)
        if going_on is not None:
            return going_on
        overrides = self.settings.overrides(runtime.context)  # validated, stored with the run
        update = start_run(state, settings, overrides=overrides)
        if settings.hooks.on_iteration_start is not None:
            yield callback(settings.hooks.on_iteration_start, {**state, **update},
                           name="hooks.on_iteration_start")
        emit(runtime, {"event": "iteration_start", "iteration": 1})
        return update
