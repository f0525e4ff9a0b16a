"""Stop reasons: why a run of the loop ended.

Example:
    >>> from langgraph_loop import StopReason
    >>> StopReason.LOOP_DETECTED == "loop_detected"
    True
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["StopReason"]


class StopReason(StrEnum):
    """Every way a run can end; stored as ``state["stop_reason"]`` (None while paused)."""

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    MAX_MODEL_CALLS = "max_model_calls"
    MAX_TOOL_CALLS = "max_tool_calls"
    TOKEN_BUDGET = "token_budget"
    BUDGET_PRESSURE = "budget_pressure"
    LOOP_DETECTED = "loop_detected"
    STALLED = "stalled"
    TIMEOUT = "timeout"
    TERMINATED = "terminated"
    STEP_LIMIT = "step_limit"
