"""The graph state: public keys users read, private keys the nodes own.

Messages live in a ``DeltaChannel``: a checkpoint stores only the new messages of a
step, so storage grows linearly with the thread instead of quadratically. The
per-run log of tool-call records uses one too. Everything else is small.

Example:
    >>> from langgraph_loop.core.state import new_usage, add_usage
    >>> add_usage(new_usage(), {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
    {'input_tokens': 3, 'output_tokens': 2, 'total_tokens': 5}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.managed import RemainingSteps
from pydantic import Field

from langgraph_loop.core.compat import messages_delta_reducer
from langgraph_loop.core.records import (
    CallRecord,
    Guard,
    IterationRecord,
    LoggedCall,
    Notice,
    Todo,
    Usage,
    add_usage,
    new_usage,
    usage_of,
)
from langgraph_loop.core.stop import StopReason

__all__ = [
    "CallRecord",
    "IterationRecord",
    "LoopContext",
    "LoopInput",
    "LoopOutput",
    "LoopState",
    "Notice",
    "PassInfo",
    "RunInfo",
    "Todo",
    "Usage",
    "add_usage",
    "new_usage",
    "usage_of",
]

RESET = "__reset__"


class RunInfo(TypedDict, total=False):
    """Per-run bookkeeping owned by the nodes."""

    id: str
    started_at: float
    request_id: str | None
    tool_calls: int
    auto_rounds: int
    review: dict[str, Any] | None
    finalized: bool
    pressure_queued: bool
    guard: Guard | None


class PassInfo(TypedDict, total=False):
    """Bookkeeping of the current pass."""

    model_calls: int
    started_at: float
    usage: Usage
    start_id: str | None
    compacted: int
    offered: list[str] | None
    predicate: dict[str, Any] | None


def _log_reducer(state: list[Any] | None, writes: Sequence[Any]) -> list[Any]:
    """Append records; a ``RESET`` write empties the log (batching-invariant)."""
    out = list(state or [])
    for write in writes:
        if write == RESET:
            out = []
        elif isinstance(write, list):
            out.extend(write)
        else:
            out.append(write)
    return out


SNAPSHOT_EVERY = 500
"""A full snapshot of a delta channel every this many writes (bounds replay on load)."""

MESSAGES: DeltaChannel[list[Any]] = DeltaChannel(
    messages_delta_reducer, snapshot_frequency=SNAPSHOT_EVERY
)
"""The messages channel: each checkpoint stores only the step's new messages."""


class LoopInput(TypedDict, total=False):
    """What a run accepts as input."""

    messages: Annotated[list[AnyMessage], MESSAGES]
    mode: str | None
    todos: list[Todo]


def _reason(_old: str | None, new: str | None) -> str | None:
    """Store stop reasons as their plain string value (checkpoint- and JSON-friendly)."""
    return None if new is None else StopReason(new).value


class LoopOutput(LoopInput, total=False):
    """What ``invoke`` returns: the public keys.

    ``stop_reason`` holds the ``StopReason`` value as a plain ``str``:
    ``state["stop_reason"] == StopReason.COMPLETED`` and ``StopReason(state["stop_reason"])``
    both work, and it survives every checkpointer and LangGraph Server's JSON unchanged.
    """

    stop_reason: Annotated[str | None, _reason]
    iteration: int
    iterations: list[IterationRecord]
    usage: Usage
    judge_usage: Usage
    progress: list[str]
    pending_notices: list[Notice]
    verdict: dict[str, Any] | None
    structured_response: Any


class LoopState(LoopOutput, total=False):
    """The full state schema of the compiled graph.

    Public keys (see the README's state keys): ``messages``, ``stop_reason``, ``iteration``,
    ``iterations``, ``usage``, ``judge_usage``, ``progress``, ``todos``, ``mode``,
    ``pending_notices``, ``verdict``. The rest belong to the nodes.
    """

    run: RunInfo
    pass_info: PassInfo
    call_log: Annotated[list[LoggedCall], DeltaChannel(_log_reducer, snapshot_frequency=SNAPSHOT_EVERY)]
    remaining_steps: RemainingSteps


class LoopContext(TypedDict, total=False):
    """Per-run overrides through LangGraph's runtime context (all optional).

    The one declaration of the override names and their bounds: per-run validation
    (``graph/core/settings.py``) is derived from it. Each name overrides the field of
    the same name in ``Limits``, ``LoopDetection``, ``StallDetection`` or
    ``BudgetPressure`` (``max_iterations``: the builder's argument).

    Example:
        >>> sorted(LoopContext.__annotations__)[:3]
        ['consecutive', 'max_duration_s', 'max_iterations']
    """

    max_iterations: Annotated[int | None, Field(ge=1)]
    max_model_calls: Annotated[int | None, Field(ge=1)]
    max_tool_calls: Annotated[int | None, Field(ge=1)]
    token_budget: Annotated[int | None, Field(ge=1)]
    max_duration_s: Annotated[float | None, Field(gt=0)]
    max_tool_output_chars: Annotated[int | None, Field(ge=100)]
    warn_after: int
    stop_after: int
    window: int
    no_progress_warn_after: int
    no_progress_stop_after: int
    consecutive: int
    tolerance: float
    threshold: float
