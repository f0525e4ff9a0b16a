"""Budget pressure: queue the finalize-now notice near the token budget, stop once it was seen.

When agent tokens reach ``threshold × Limits.token_budget`` the instruction is queued
(once per run) and the model sees it on its next call; the run then stops with
``budget_pressure`` at the end of that pass. A threshold crossed by the last call of a
pass leaves the notice queued: the next pass starts with the continuation message
followed by the notice and is the final pass.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> from langgraph_loop.core.config import BudgetPressure, Limits
    >>> s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100),
    ...                        budget_pressure=BudgetPressure(threshold=0.8))
    >>> pressure_due({"usage": {"total_tokens": 80}, "run": {}}, s)
    True
    >>> budget_pressure_guard({"usage": {"total_tokens": 85}, "run": {"pressure_queued": True}}, s)
    {'guard': 'budget_pressure', 'reason': 'budget_pressure', 'threshold': 0.8, 'limit': 100, 'value': 85}
"""

from __future__ import annotations

from langgraph_loop.core.records import Guard
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason

__all__ = ["NOTICE_SOURCE", "budget_pressure_guard", "pressure_due", "pressure_seen"]

NOTICE_SOURCE = "budget_pressure"
"""The ``source`` of the pressure notice in the deferred-notice queue."""


def pressure_due(state: LoopState, settings: LoopSettings) -> bool:
    """True when the budget-pressure notice should be queued now (once per run)."""
    pressure, budget = settings.budget_pressure, settings.limits.token_budget
    if pressure is None or budget is None:
        return False
    if (state.get("run") or {}).get("pressure_queued"):
        return False
    total = (state.get("usage") or {}).get("total_tokens", 0)
    return total >= pressure.threshold * budget


def pressure_seen(state: LoopState) -> bool:
    """The budget-pressure notice was queued in this run and has been delivered."""
    if not (state.get("run") or {}).get("pressure_queued"):
        return False
    return not any(n.get("source") == NOTICE_SOURCE for n in state.get("pending_notices") or [])


def budget_pressure_guard(state: LoopState, settings: LoopSettings) -> Guard | None:
    """``budget_pressure`` once the model has seen the pressure notice, else None."""
    pressure, budget = settings.budget_pressure, settings.limits.token_budget
    if pressure is None or budget is None or not pressure_seen(state):
        return None
    total = (state.get("usage") or {}).get("total_tokens", 0)
    return {"guard": "budget_pressure", "reason": StopReason.BUDGET_PRESSURE.value,
            "threshold": pressure.threshold, "limit": budget, "value": total}
