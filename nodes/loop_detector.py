"""The loop detector: a pure decision on every model reply, and the node that acts on it.

``decide(state, settings)`` is a pure function over state: the inner limits
(``nodes/limits.py``), the loop-detection layers (``nodes/detection.py``, over the
state derived from the run's transcript by ``nodes/detector_replay.py``) and the
budget-pressure threshold (``nodes/budget_pressure.py``). It runs as the conditional
edge after ``model``; a clean reply goes straight to the tools. The ``loop_detector``
node runs only when the decision acts, and ``apply`` turns it into a state update:
warnings go to the deferred-notice queue (never between an AIMessage and its
ToolMessages); on a stop every pending call of the reply gets an error ToolMessage,
so the stored thread stays provider-valid whatever happens next.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> [m.status for m in stop_answers(ai, {"guard": "limits", "reason": "loop_detected"})]
    ['error']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.runtime import Runtime

from langgraph_loop.core.notices import queue_notice
from langgraph_loop.core.pairing import call_ids
from langgraph_loop.core.records import Guard, Notice
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.approval import needs_approval
from langgraph_loop.nodes.base import emit
from langgraph_loop.nodes.budget_pressure import NOTICE_SOURCE, pressure_due
from langgraph_loop.nodes.detection import LoopWarning, observe
from langgraph_loop.nodes.detector_replay import remember, results_before, state_before
from langgraph_loop.nodes.detector_state import DetectorState
from langgraph_loop.nodes.limits import check_limits, stop_answer_text
from langgraph_loop.nodes.steps import answer_steps, fits

__all__ = ["Decision", "apply", "decide", "loop_detector", "previous_results", "stop_answers"]


@dataclass(frozen=True)
class Decision:
    """What the detector concluded about the newest reply.

    ``guard`` stops the run; ``warnings`` are queued; ``pressure`` queues the
    budget-pressure notice; ``detector`` is the detection layers' new state (None
    when detection is off; derived, never written to graph state).
    """

    ai: AIMessage
    guard: Guard | None = None
    warnings: tuple[LoopWarning, ...] = ()
    pressure: bool = False
    detector: DetectorState | None = None

    @property
    def acts(self) -> bool:
        """Does the ``loop_detector`` node run (a stop, a warning or the pressure notice)?"""
        return self.guard is not None or bool(self.warnings) or self.pressure


def stop_answers(ai: AIMessage, guard: Guard) -> list[ToolMessage]:
    """One error ToolMessage per call (valid or malformed) of a stopped reply."""
    text = stop_answer_text(guard)
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error")
            for i in call_ids(ai)]


def previous_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The ToolMessages of the round before the newest reply (scans the tail only)."""
    return results_before(messages, len(messages) - 1)


def decide(state: LoopState, settings: LoopSettings) -> Decision | None:
    """The decision on the newest reply (None: nothing to judge, the run already stopped)."""
    messages = state.get("messages") or []
    ai = messages[-1] if messages else None
    if state.get("stop_reason") is not None or not isinstance(ai, AIMessage):
        return None
    guard = check_limits(state, settings, has_calls=bool(call_ids(ai)),
                         gated=needs_approval(ai, settings.approval))
    if guard is not None:
        return Decision(ai, guard=guard)
    detector: DetectorState | None = None
    warnings: tuple[LoopWarning, ...] = ()
    if settings.loop_detection is not None:
        run = state.get("run") or {}
        before = state_before(messages, run, settings.loop_detection)
        obs = observe(before, ai, previous_results(messages), settings.loop_detection)
        remember(run, ai, settings.loop_detection, obs.state)
        if obs.stop is not None:
            return Decision(ai, guard=obs.stop, detector=obs.state)
        detector, warnings = obs.state, tuple(obs.warnings)
    return Decision(ai, warnings=warnings, pressure=pressure_due(state, settings),
                    detector=detector)


def _queue(notices: list[Notice], decision: Decision, run: dict[str, Any], settings: LoopSettings,
           state: LoopState, runtime: Runtime[LoopContext] | None) -> list[Notice]:
    """Queue the decision's warnings and pressure notice, emitting their events."""
    for warning in decision.warnings:
        notices = queue_notice(notices, run=run["id"], key=f"loop:{warning.key}",
                               text=warning.text, source="loop")
        emit(runtime, {"event": "loop_warning", "layer": warning.layer, "key": warning.key,
                       "calls": list(warning.calls), "count": warning.count, "text": warning.text})
    pressure = settings.budget_pressure
    if decision.pressure and pressure is not None:
        run["pressure_queued"] = True
        notices = queue_notice(notices, run=run["id"], key="budget_pressure",
                               text=pressure.instruction, source=NOTICE_SOURCE)
        emit(runtime, {"event": "budget_pressure", "usage": state.get("usage"),
                       "threshold": pressure.threshold, "limit": settings.limits.token_budget})
    return notices


def apply(decision: Decision, state: LoopState, settings: LoopSettings,
          runtime: Runtime[LoopContext] | None = None) -> dict[str, Any]:
    """The state update that carries out ``decision`` (events go to ``runtime``)."""
    run: dict[str, Any] = dict(state.get("run") or {})
    update: dict[str, Any] = {}
    guard = decision.guard
    if guard is not None:
        has_calls = bool(call_ids(decision.ai))
        run["guard"] = guard
        update["stop_reason"] = StopReason(guard["reason"])
        if has_calls:
            update["messages"] = stop_answers(decision.ai, guard)
        if not has_calls:
            run["finalized"] = True  # the reply is already text: no final call needed
        elif not fits(state.get("remaining_steps"), answer_steps(settings)):
            run["finalized"] = True  # no room left for the final answer call
            guard["final_answer"] = "skipped: the graph's step limit leaves no room"
    notices = _queue(list(state.get("pending_notices") or []), decision, run, settings, state,
                     runtime)
    if notices != list(state.get("pending_notices") or []):
        update["pending_notices"] = notices
    if run != state.get("run"):
        update["run"] = run
    return update


def loop_detector(state: LoopState, settings: LoopSettings,
                  runtime: Runtime[LoopContext] | None = None) -> dict[str, Any]:
    """The node: ``decide`` as the edge after ``model`` did, then ``apply``.

    The node runs one step after that edge, so it decides with the steps the edge saw
    (one more than its own) and reaches the same decision.
    """
    remaining = state.get("remaining_steps")
    seen: LoopState = state if remaining is None else {**state, "remaining_steps": remaining + 1}
    decision = decide(seen, settings)
    return {} if decision is None else apply(decision, state, settings, runtime)
