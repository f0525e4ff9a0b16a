"""Stall detection: iterations that repeat themselves without new work (``StallDetection``).

The router asks it when the loop would otherwise continue. Over the last ``consecutive``
iterations (the current one included): the same answer text (whitespace and case ignored), the
same tool calls with the same results, or flat tokens (every total > 0 and ``max - min <=
tolerance * min``: no drift through small steps); and in every case none of them after the
first did *new work* (a call, with its result, no earlier iteration made). Growing work is
never a stall.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from langgraph_loop.core.config import StallDetection
from langgraph_loop.core.state import IterationRecord, LoggedCall
from langgraph_loop.core.stop import Guard, StopReason, guard

__all__ = ["flat_tokens", "new_work_by_iteration", "stall_guard"]

def flat_tokens(totals: Sequence[int], *, tolerance: float) -> bool:
    """True when all totals are > 0 and within ``tolerance`` of each other."""
    if len(totals) < 2 or min(totals) <= 0:
        return False
    return max(totals) - min(totals) <= tolerance * min(totals)


def new_work_by_iteration(log: Sequence[LoggedCall]) -> dict[int, bool]:
    """For each iteration of the run's call log: did it run a call no earlier one made?"""
    by_iteration: dict[int, set[str]] = {}
    for call in log:
        keys = by_iteration.setdefault(int(call.get("iteration", 0)), set())
        if call.get("status") in ("success", "error"):  # it ran
            args = json.dumps(call.get("args"), sort_keys=True, default=str)
            keys.add(f"{call.get('name')}|{args}|{call.get('result_hash')}")
    seen: set[str] = set()
    out: dict[int, bool] = {}
    for iteration in sorted(by_iteration):
        out[iteration] = bool(by_iteration[iteration] - seen)
        seen |= by_iteration[iteration]
    return out


def _same(records: Sequence[IterationRecord], key: str) -> bool:
    values = {r.get(key) for r in records}
    return len(values) == 1 and None not in values


def stall_guard(records: Sequence[IterationRecord], config: StallDetection, *,
                new_work: Mapping[int, bool]) -> Guard | None:
    """The stall the last ``consecutive`` records show, or None (see module docstring)."""
    window = list(records)[-config.consecutive :]
    if len(window) < config.consecutive:
        return None
    if any(new_work.get(int(r.get("iteration", 0))) for r in window[1:]):
        return None  # the first iteration of the window is the baseline the others repeat
    totals = [int((r.get("usage") or {}).get("total_tokens", 0)) for r in window]
    n = len(window)
    if _same(window, "answer_hash"):
        layer, detail = "answer", f"the last {n} iterations gave the same answer"
    elif _same(window, "work_hash"):
        layer, detail = "work", f"the last {n} iterations repeated the same tool calls with the same results"
    elif flat_tokens(totals, tolerance=config.tolerance):
        layer = "tokens"
        detail = (f"the last {n} iterations used nearly the same tokens ({totals}, "
                  f"tolerance {config.tolerance:.0%}) without new work")
    else:
        return None
    return guard("stall_detection", StopReason.STALLED, layer=layer,
                 iterations=[r.get("iteration") for r in window], totals=totals, detail=detail)
