"""Typed records: usage, todos, notices, tool-call and pass records, guards, stream events.

Example:
    >>> add_usage(new_usage(), {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
    {'input_tokens': 3, 'output_tokens': 2, 'total_tokens': 5}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Required, TypedDict

__all__ = [
    "ApprovalAutoEvent",
    "BudgetPressureEvent",
    "CallRecord",
    "CompactionEvent",
    "Event",
    "EventName",
    "Guard",
    "GuardName",
    "IterationEndEvent",
    "IterationRecord",
    "IterationStartEvent",
    "LoggedCall",
    "LoopWarningEvent",
    "Notice",
    "StopEvent",
    "Todo",
    "ToolCallEvent",
    "Usage",
    "add_usage",
    "new_usage",
    "usage_of",
]

GuardName = Literal["limits", "loop_detector", "stall_detection", "budget_pressure",
                    "max_iterations", "hooks", "router"]
"""Which guard stopped a run (``Guard["guard"]``)."""

EventName = Literal["iteration_start", "tool_call", "loop_warning", "budget_pressure",
                    "approval_auto", "compaction", "iteration_end", "stop"]
"""The ``event`` of a ``custom`` stream event."""


class Guard(TypedDict, total=False):
    """Why a run stopped: ``run["guard"]`` and a pass record's ``guard``.

    ``guard`` names the guard, ``reason`` is the ``StopReason`` value; the other
    keys depend on the guard (``limit``/``value`` for limits, ``layer``/``tool``/
    ``count``/... for the loop detector, ``passes``/``totals`` for stalls).
    """

    guard: Required[GuardName]
    reason: Required[str]
    limit: Any
    value: Any
    detail: str
    layer: str
    final_answer: str
    estimate: int
    tool: str
    args: str | None
    calls: list[str]
    count: int
    threshold: float
    turns: int
    progressing: bool
    passes: list[Any]
    totals: list[int]


class Usage(TypedDict, total=False):
    """Token usage; ``cached_tokens``/``reasoning_tokens`` only when reported."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    reasoning_tokens: int


class Todo(TypedDict):
    """One todo item: ``status`` is pending, in_progress or completed."""

    content: str
    status: Literal["pending", "in_progress", "completed"]


class Notice(TypedDict):
    """A message queued for the model's next call (the deferred-notice queue)."""

    run: str
    key: str
    text: str
    source: str


class CallRecord(TypedDict):
    """One tool execution (or refusal), as in ``iterations[i]["tool_calls"]``."""

    name: str
    args: dict[str, Any]
    status: str
    duration_s: float
    iteration: NotRequired[int]


class LoggedCall(CallRecord):
    """A call record in the run's call log: its pass and a digest of its result."""

    result_hash: NotRequired[str]


class IterationRecord(TypedDict, total=False):
    """One pass of the agent."""

    iteration: int
    model_calls: int
    tool_calls: list[CallRecord]
    usage: Usage
    duration_s: float
    feedback: str | None
    verdict: dict[str, Any] | None
    guard: Guard | None
    compacted: int
    answer_hash: str | None
    work_hash: str | None


class IterationStartEvent(TypedDict):
    """A pass starts."""

    event: Literal["iteration_start"]
    iteration: int


class IterationEndEvent(TypedDict):
    """A pass ended; its record."""

    event: Literal["iteration_end"]
    record: IterationRecord


class StopEvent(TypedDict):
    """The run stops (sent once per run)."""

    event: Literal["stop"]
    reason: str
    iteration: int
    guard: Guard | None


class ToolCallEvent(CallRecord):
    """A tool call ran (or was refused); the call record."""

    event: Literal["tool_call"]


class LoopWarningEvent(TypedDict):
    """The loop detector queued a warning."""

    event: Literal["loop_warning"]
    layer: str
    key: str
    calls: list[str]
    count: int
    text: str


class BudgetPressureEvent(TypedDict):
    """The budget-pressure notice was queued."""

    event: Literal["budget_pressure"]
    usage: Usage | None
    threshold: float
    limit: int | None


class ApprovalAutoEvent(TypedDict):
    """The approval resolver decided the gated calls."""

    event: Literal["approval_auto"]
    decisions: list[dict[str, Any]]
    auto_rounds: int


class CompactionEvent(TypedDict):
    """Old messages were replaced by a summary."""

    event: Literal["compaction"]
    replaced: int
    tokens: int
    max_tokens: int


Event = (IterationStartEvent | IterationEndEvent | StopEvent | ToolCallEvent | LoopWarningEvent
         | BudgetPressureEvent | ApprovalAutoEvent | CompactionEvent)
"""A ``custom`` stream event: ``{"event": <EventName>, ...}``."""


_USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")


def new_usage() -> Usage:
    """Zero usage."""
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def add_usage(total: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> Usage:
    """Sum two usage dicts (missing keys count as 0; optional keys kept when present)."""
    out: dict[str, int] = dict(total or new_usage())  # type: ignore[arg-type]
    for key, value in (extra or {}).items():
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = out.get(key, 0) + value
    for key in _USAGE_KEYS:
        out.setdefault(key, 0)
    return out  # type: ignore[return-value]


def usage_of(message: Any) -> Usage | None:
    """The usage a model reported on its AIMessage, flattened (None when unreported).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> m = AIMessage("hi", usage_metadata={"input_tokens": 4, "output_tokens": 1,
        ...     "total_tokens": 5, "input_token_details": {"cache_read": 2}})
        >>> usage_of(m)["cached_tokens"]
        2
    """
    meta = getattr(message, "usage_metadata", None)
    if not meta:
        return None
    out: Usage = {
        "input_tokens": int(meta.get("input_tokens", 0) or 0),
        "output_tokens": int(meta.get("output_tokens", 0) or 0),
        "total_tokens": int(meta.get("total_tokens", 0) or 0),
    }
    cached = (meta.get("input_token_details") or {}).get("cache_read")
    reasoning = (meta.get("output_token_details") or {}).get("reasoning")
    if cached is not None:
        out["cached_tokens"] = int(cached)
    if reasoning is not None:
        out["reasoning_tokens"] = int(reasoning)
    return out
