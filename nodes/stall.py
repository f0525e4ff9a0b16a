"""Guards at the end of a pass: time cap, budget-pressure wrap-up, stall detection.

The router asks ``guard_at_pass_end`` only when the loop would otherwise continue
(a predicate or judge asked for another pass). In order:

1. **time cap** (``Limits.max_duration_s``) spent → ``timeout``, without starting a
   pass that would only be cut short;
2. **budget pressure**: the pressure notice was queued and the model has *seen* it
   (the notice was drained into a request of this pass) → ``budget_pressure``. A
   threshold crossed by the last call of a pass leaves the notice queued: the next
   pass starts with the continuation message followed by the notice and is the
   final pass;
3. **stall** (``StallDetection``) over the run's records plus the current one.

Stall rules, over the last ``consecutive`` passes (the current one included):

* *repeated answer*: they all end with the same answer text (whitespace and case
  ignored), or
* *repeated work*: they all made the same tool calls (name, arguments) with the
  same results, or
* *flat tokens*: every total is > 0 and ``max - min <= tolerance * min`` (every
  pair within the tolerance of the smaller one; no drift through a chain of
  small steps),

and in every case none of those passes after the first (the baseline the others
repeat) did *new work*: a tool call (name, arguments, result) that ran and that no
earlier pass of the run made. Growing work is never a stall, whatever the token
counts or the answer text say.

Example:
    >>> flat_tokens([1000, 1040, 980], tolerance=0.10)
    True
    >>> flat_tokens([1000, 1080, 1160], tolerance=0.10)   # steady growth: 16% spread
    False
    >>> recs = [{"iteration": i, "usage": {"total_tokens": t}, "answer_hash": None,
    ...          "work_hash": "w"} for i, t in [(1, 500), (2, 900), (3, 1700)]]
    >>> stall_guard(recs, StallDetection(consecutive=3), new_work={})["layer"]
    'work'
    >>> stall_guard(recs, StallDetection(consecutive=3), new_work={3: True}) is None
    True
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_loop.core.config import StallDetection
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import CallRecord, IterationRecord, LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.records import answer_text, build_record, calls_of_pass, last_ai

__all__ = [
    "budget_pressure_guard",
    "current_record",
    "flat_tokens",
    "guard_at_pass_end",
    "new_work_by_pass",
    "pressure_seen",
    "stall_guard",
    "stop_guard",
    "timeout_guard",
]

Guard = dict[str, Any]
_RAN = ("success", "error")


def flat_tokens(totals: Sequence[int], *, tolerance: float) -> bool:
    """True when all totals are > 0 and within ``tolerance`` of each other."""
    if len(totals) < 2 or min(totals) <= 0:
        return False
    return max(totals) - min(totals) <= tolerance * min(totals)


def _call_key(call: Mapping[str, Any]) -> str:
    args = json.dumps(call.get("args"), sort_keys=True, default=str)
    return f"{call.get('name')}|{args}|{call.get('result_hash')}"


def new_work_by_pass(log: Sequence[CallRecord]) -> dict[int, bool]:
    """For each pass of the run's call log: did it run a call no earlier pass made?

    Example:
        >>> log = [{"name": "s", "args": {"q": 1}, "status": "success", "iteration": 1,
        ...         "result_hash": "a"},
        ...        {"name": "s", "args": {"q": 1}, "status": "success", "iteration": 2,
        ...         "result_hash": "a"},
        ...        {"name": "s", "args": {"q": 1}, "status": "success", "iteration": 3,
        ...         "result_hash": "b"}]
        >>> new_work_by_pass(log)
        {1: True, 2: False, 3: True}
    """
    by_pass: dict[int, set[str]] = {}
    for call in log:
        keys = by_pass.setdefault(int(call.get("iteration", 0)), set())
        if call.get("status") in _RAN:
            keys.add(_call_key(call))
    seen: set[str] = set()
    out: dict[int, bool] = {}
    for iteration in sorted(by_pass):
        out[iteration] = bool(by_pass[iteration] - seen)
        seen |= by_pass[iteration]
    return out


def _same(records: Sequence[IterationRecord], key: str) -> bool:
    values = {r.get(key) for r in records}
    return len(values) == 1 and None not in values


def stall_guard(
    records: Sequence[IterationRecord], config: StallDetection, *, new_work: Mapping[int, bool]
) -> Guard | None:
    """The stall the last ``consecutive`` records show, or None (see module docstring)."""
    window = list(records)[-config.consecutive :]
    if len(window) < config.consecutive:
        return None
    if any(new_work.get(int(r.get("iteration", 0))) for r in window[1:]):
        return None  # the first pass of the window is the baseline the others repeat
    totals = [int((r.get("usage") or {}).get("total_tokens", 0)) for r in window]
    n = len(window)
    if _same(window, "answer_hash"):
        layer, detail = "answer", f"the last {n} passes gave the same answer"
    elif _same(window, "work_hash"):
        layer, detail = "work", f"the last {n} passes repeated the same tool calls with the same results"
    elif flat_tokens(totals, tolerance=config.tolerance):
        layer = "tokens"
        detail = (f"the last {n} passes used nearly the same tokens ({totals}, "
                  f"tolerance {config.tolerance:.0%}) without new work")
    else:
        return None
    return {"guard": "stall_detection", "reason": StopReason.STALLED.value, "layer": layer,
            "passes": [r.get("iteration") for r in window], "totals": totals, "detail": detail}


def pressure_seen(state: LoopState) -> bool:
    """The budget-pressure notice was queued in this run and has been delivered."""
    if not (state.get("run") or {}).get("pressure_queued"):
        return False
    return not any(n.get("source") == "budget_pressure" for n in state.get("pending_notices") or [])


def budget_pressure_guard(state: LoopState, settings: LoopSettings) -> Guard | None:
    """``budget_pressure`` once the model has seen the pressure notice, else None."""
    pressure, budget = settings.budget_pressure, settings.limits.token_budget
    if pressure is None or budget is None or not pressure_seen(state):
        return None
    total = (state.get("usage") or {}).get("total_tokens", 0)
    return {"guard": "budget_pressure", "reason": StopReason.BUDGET_PRESSURE.value,
            "threshold": pressure.threshold, "limit": budget, "value": total}


def timeout_guard(state: LoopState, settings: LoopSettings, now: float | None = None) -> Guard | None:
    """``timeout`` when the run's wall-clock cap is spent, else None."""
    cap = settings.limits.max_duration_s
    started = (state.get("run") or {}).get("started_at")
    if cap is None or started is None:
        return None
    elapsed = (time.time() if now is None else now) - started
    if elapsed < cap:
        return None
    return {"guard": "limits", "reason": StopReason.TIMEOUT.value, "limit": cap,
            "value": round(elapsed, 3)}


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


def stop_guard(state: LoopState, settings: LoopSettings, stop: StopReason | None) -> Guard | None:
    """The guard that explains ``stop`` in the pass record (None for ``completed``).

    Example:
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> s = LoopSettings.build(ScriptedChatModel(), max_iterations=2)
        >>> stop_guard({"iteration": 2}, s, StopReason.MAX_ITERATIONS)
        {'guard': 'max_iterations', 'reason': 'max_iterations', 'limit': 2, 'value': 2}
    """
    if stop is None or stop == StopReason.COMPLETED:
        return None
    stored = (state.get("run") or {}).get("guard")
    if stored and stored.get("reason") == stop.value:
        return dict(stored)
    if stop in (StopReason.TIMEOUT, StopReason.BUDGET_PRESSURE, StopReason.STALLED):
        found = guard_at_pass_end(state, settings)
        if found is not None and found["reason"] == stop.value:
            return found
    if stop == StopReason.MAX_ITERATIONS:
        return {"guard": "max_iterations", "reason": stop.value, "limit": settings.max_iterations,
                "value": state.get("iteration", 1)}
    if stop == StopReason.STEP_LIMIT:
        return {"guard": "limits", "reason": stop.value, "limit": "recursion_limit",
                "value": state.get("remaining_steps")}
    return {"guard": "router", "reason": stop.value}
