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
from typing import Annotated, Any, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.managed import RemainingSteps
from pydantic import Field
from typing_extensions import TypedDict

from langgraph_loop.core.compat import messages_delta_reducer
from langgraph_loop.core.messages import Notice
from langgraph_loop.core.records import (
    CallRecord,
    IterationInfo,
    IterationRecord,
    LoggedCall,
    Review,
    RunInfo,
    Todo,
    Usage,
    add_usage,
    new_usage,
    usage_of,
)
from langgraph_loop.core.stop import StopReason

__all__ = [
    "CallRecord",
    "IterationInfo",
    "IterationRecord",
    "IterationsOverrides",
    "LimitsOverrides",
    "LoopContext",
    "LoopDetectionOverrides",
    "LoopInput",
    "LoopOutput",
    "LoopState",
    "Notice",
    "RunInfo",
    "Todo",
    "Usage",
    "add_usage",
    "iteration_info",
    "new_usage",
    "usage_of",
    "with_user_keys",
]

RESET = "__reset__"


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
    ``pending_notices``, ``verdict``. The rest belong to the nodes: ``run`` (per-run
    bookkeeping, ``prepare`` resets it), ``iteration_info`` (the current iteration's),
    ``review`` (approval decisions for the ``tools`` node), ``call_log`` (the run's tool calls).
    """

    run: RunInfo
    iteration_info: IterationInfo
    pass_info: IterationInfo
    """Written by 0.2 (read by ``iteration_info()`` when a 0.2 thread resumes; never written)."""
    review: Review | None
    call_log: Annotated[list[LoggedCall], DeltaChannel(_log_reducer, snapshot_frequency=SNAPSHOT_EVERY)]
    remaining_steps: RemainingSteps


def with_user_keys(schema: type[Any], state_schema: type[Any] | None) -> type[Any]:
    """``schema`` (``LoopInput``/``LoopOutput``) plus the keys a user ``state_schema`` adds.

    Example:
        >>> class Mine(LoopState, total=False):
        ...     notes: list[str]
        >>> "notes" in with_user_keys(LoopInput, Mine).__annotations__
        True
        >>> with_user_keys(LoopInput, None) is LoopInput
        True
    """
    if state_schema is None:
        return schema
    hints = get_type_hints(state_schema, include_extras=True)
    extra = {k: v for k, v in hints.items() if k not in LoopState.__annotations__}
    if not extra:
        return schema
    fields = {**get_type_hints(schema, include_extras=True), **extra}
    return TypedDict(f"{state_schema.__name__}{schema.__name__.removeprefix('Loop')}",  # type: ignore[operator]
                     fields, total=False)


class StallOverrides(TypedDict, total=False):
    """``iterations.stall`` fields a run may override (``StallDetection``)."""

    consecutive: int
    tolerance: float


class IterationsOverrides(TypedDict, total=False):
    """``iterations`` fields a run may override (``Iterations``)."""

    max: Annotated[int | None, Field(ge=1)]
    max_model_calls: Annotated[int | None, Field(ge=1)]
    stall: StallOverrides


class BudgetPressureOverrides(TypedDict, total=False):
    """``limits.budget_pressure`` fields a run may override (``BudgetPressure``)."""

    threshold: float


class LimitsOverrides(TypedDict, total=False):
    """``limits`` fields a run may override (``Limits``)."""

    max_tool_calls: Annotated[int | None, Field(ge=1)]
    token_budget: Annotated[int | None, Field(ge=1)]
    max_duration_s: Annotated[float | None, Field(gt=0)]
    max_tool_output_chars: Annotated[int | None, Field(ge=100)]
    budget_pressure: BudgetPressureOverrides


class LoopDetectionOverrides(TypedDict, total=False):
    """``loop_detection`` fields a run may override (``LoopDetection``)."""

    warn_after: int
    stop_after: int
    window: int
    no_progress_warn_after: int
    no_progress_stop_after: int


class LoopContext(TypedDict, total=False):
    """Per-run overrides through LangGraph's runtime context, nested by group (all optional).

    The one declaration of what a run may override: per-run validation
    (``graph/core/settings.py``) is derived from it, in-process and on LangGraph Server
    (this is the graph's context schema). Each group is merged over the graph's own
    configuration model of the same name and validated by it. Only numbers are
    overridable: nothing that would need another graph (a judge, approval).

    The flat names of 0.2 (``max_iterations``, ``max_tool_calls``, ``threshold``, ...)
    still work until 0.4, with a ``DeprecationWarning``.

    Example:
        >>> from langgraph_loop.core.state import LoopContext
        >>> context: LoopContext = {"iterations": {"max": 3},
        ...                         "limits": {"budget_pressure": {"threshold": 0.5}}}
        >>> sorted(LoopContext.__annotations__)[:3]
        ['consecutive', 'iterations', 'limits']
    """

    iterations: IterationsOverrides
    limits: LimitsOverrides
    loop_detection: LoopDetectionOverrides
    # deprecated flat names (0.2), mapped into the groups until 0.4
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


def iteration_info(state: LoopState) -> IterationInfo:
    """The current iteration's bookkeeping (from ``pass_info`` on a thread 0.2 paused).

    Example:
        >>> iteration_info({"pass_info": {"model_calls": 2}})["model_calls"]
        2
        >>> iteration_info({"iteration_info": {"model_calls": 1}, "pass_info": {"model_calls": 2}})
        {'model_calls': 1}
    """
    return state.get("iteration_info") or state.get("pass_info") or {}
