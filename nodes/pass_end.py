"""Why a run stops at the end of a pass, and the guard a pass record shows for a stop.

The router asks ``guard_at_pass_end`` only when the loop would otherwise continue
(a predicate or judge asked for another pass). In order:

1. **time cap** (``Limits.max_duration_s``) spent → ``timeout``, without starting a
   pass that would only be cut short (``nodes/limits.py``);
2. **budget pressure**: the pressure notice was queued and the model has *seen* it
   → ``budget_pressure`` (``nodes/budget_pressure.py``);
3. **stall** over the run's records plus the current one (``nodes/stall.py``).

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> s = LoopSettings.build(ScriptedChatModel(), max_iterations=2)
    >>> explain_stop({"iteration": 2}, s, StopReason.MAX_ITERATIONS)
    {'guard': 'max_iterations', 'reason': 'max_iterations', 'limit': 2, 'value': 2}
"""

from __future__ import annotations

from langgraph_loop.core.records import Guard, IterationRecord
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.budget_pressure import budget_pressure_guard
from langgraph_loop.nodes.limits import limit_guard, timeout_guard
from langgraph_loop.nodes.passes import answer_text, build_record, calls_of_pass, last_ai
from langgraph_loop.nodes.stall import new_work_by_pass, stall_guard

__all__ = ["current_record", "explain_stop", "guard_at_pass_end"]

_PASS_END_REASONS = (StopReason.TIMEOUT, StopReason.BUDGET_PRESSURE, StopReason.STALLED)


def current_record(state: LoopState) -> IterationRecord:
    """The record of the pass that is ending (without feedback and verdict)."""
    iteration = state.get("iteration", 1)
    return build_record(
        iteration=iteration, pass_info=state.get("pass_info") or {},
        calls=calls_of_pass(state.get("call_log") or [], iteration),
        answer=answer_text(last_ai(state.get("messages") or [])),
    )


def guard_at_pass_end(state: LoopState, settings: LoopSettings) -> Guard | None:
    """Why a run that would continue must stop at this pass end (None = continue)."""
    guard = timeout_guard(state, settings) or budget_pressure_guard(state, settings)
    if guard is not None or settings.stall_detection is None:
        return guard
    records = [*(state.get("iterations") or []), current_record(state)]
    return stall_guard(records, settings.stall_detection,
                       new_work=new_work_by_pass(state.get("call_log") or []))


def explain_stop(state: LoopState, settings: LoopSettings, stop: StopReason | None) -> Guard | None:
    """The guard that explains ``stop`` in the pass record (None for ``completed``)."""
    if stop is None or stop == StopReason.COMPLETED:
        return None
    stored = (state.get("run") or {}).get("guard")
    if stored and stored.get("reason") == stop.value:
        return Guard(**stored)
    if stop in _PASS_END_REASONS:
        found = guard_at_pass_end(state, settings)
        if found is not None and found["reason"] == stop.value:
            return found
    if stop == StopReason.MAX_ITERATIONS:
        return {"guard": "max_iterations", "reason": stop.value, "limit": settings.max_iterations,
                "value": state.get("iteration", 1)}
    if stop == StopReason.STEP_LIMIT:
        return limit_guard(stop, "recursion_limit", state.get("remaining_steps"))
    return {"guard": "router", "reason": stop.value}
