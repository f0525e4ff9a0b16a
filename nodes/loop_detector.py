"""The ``loop_detector`` node: judge every model reply before any tool runs.

It enforces the inner limits (model calls per pass, tool calls per run, token
budget, time, graph steps), feeds the reply to the loop-detection layers, queues
warnings in the deferred-notice queue (never between an AIMessage and its
ToolMessages), and on a stop answers every pending call of the reply with an error
ToolMessage, so the stored thread stays provider-valid whatever happens next.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> [m.status for m in stop_answers(ai, {"reason": "loop_detected"})]
    ['error']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.effects import Logic
from langgraph_loop.core.notices import queue_notice
from langgraph_loop.core.pairing import call_ids
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState, Notice
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.base import LoopNode, emit
from langgraph_loop.nodes.detection import observe
from langgraph_loop.nodes.limits import check_limits, finish_steps, fits, pressure_due, stop_answer_text

__all__ = ["LoopDetectorNode", "previous_results", "stop_answers"]


def stop_answers(ai: AIMessage, guard: dict[str, Any]) -> list[ToolMessage]:
    """One error ToolMessage per call (valid or malformed) of a stopped reply."""
    text = stop_answer_text(guard)
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error")
            for i in call_ids(ai)]


def previous_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The ToolMessages of the round before the newest reply (scans the tail only)."""
    out: list[ToolMessage] = []
    for i in range(len(messages) - 2, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            out.append(msg)
        elif isinstance(msg, AIMessage):
            break
    out.reverse()
    return out


def _gated(ai: AIMessage, settings: LoopSettings) -> bool:
    approval = settings.approval
    return approval is not None and any(c["name"] in approval.tools for c in ai.tool_calls)


class LoopDetectorNode(LoopNode):
    """Limits, loop detection, warnings and clean stops (see module docstring)."""

    name = "loop_detector"
    trace = False  # a pure decision on every step: keep it off the callback path

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        yield from ()
        settings = self.run_settings(runtime)
        messages = state.get("messages") or []
        ai = messages[-1] if messages else None
        if state.get("stop_reason") is not None or not isinstance(ai, AIMessage):
            return {}
        run: dict[str, Any] = dict(state.get("run") or {})
        has_calls = bool(call_ids(ai))
        guard = check_limits(state, settings, has_calls=has_calls, gated=_gated(ai, settings))
        update: dict[str, Any] = {}
        notices = list(state.get("pending_notices") or [])
        if guard is None and settings.loop_detection is not None:
            guard, notices = self._detect(state, ai, run, notices, settings.loop_detection,
                                          runtime, update)
        if guard is None and pressure_due(state, settings):
            run["pressure_queued"] = True
            pressure = settings.budget_pressure
            assert pressure is not None
            notices = queue_notice(notices, run=run["id"], key="budget_pressure",
                                   text=pressure.instruction, source="budget_pressure")
            emit(runtime, "budget_pressure", usage=state.get("usage"),
                 threshold=pressure.threshold, limit=settings.limits.token_budget)
        if guard is not None:
            update.update(self._stop(ai, guard, run, has_calls))
            if has_calls and not fits(state.get("remaining_steps"), finish_steps(settings)):
                run["finalized"] = True  # no room left for the final answer call
                guard["final_answer"] = "skipped: the graph's step limit leaves no room"
        if notices != list(state.get("pending_notices") or []):
            update["pending_notices"] = notices
        if run != state.get("run"):
            update["run"] = run
        return update

    @staticmethod
    def _detect(
        state: LoopState,
        ai: AIMessage,
        run: dict[str, Any],
        notices: list[Notice],
        detection: LoopDetection,
        runtime: Runtime[LoopContext] | None,
        update: dict[str, Any],
    ) -> tuple[dict[str, Any] | None, list[Notice]]:
        """Run the detection layers; queue their warnings (none when stopping)."""
        obs = observe(state.get("detector") or {}, ai, previous_results(
            state.get("messages") or []), detection)
        update["detector"] = obs.state
        if obs.stop is not None:
            return obs.stop, notices
        for warning in obs.warnings:
            notices = queue_notice(notices, run=run["id"], key=f"loop:{warning.key}",
                                   text=warning.text, source="loop")
            emit(runtime, "loop_warning", layer=warning.layer, key=warning.key,
                 calls=list(warning.calls), count=warning.count, text=warning.text)
        return None, notices

    @staticmethod
    def _stop(
        ai: AIMessage, guard: dict[str, Any], run: dict[str, Any], has_calls: bool
    ) -> dict[str, Any]:
        run["guard"] = guard
        if not has_calls:
            run["finalized"] = True  # the reply is already text: no final call needed
        update: dict[str, Any] = {"stop_reason": StopReason(guard["reason"])}
        if has_calls:
            update["messages"] = stop_answers(ai, guard)
        return update
