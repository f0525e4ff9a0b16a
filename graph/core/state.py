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

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import _messages_delta_reducer
from langgraph.managed import RemainingSteps

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


class IterationRecord(TypedDict, total=False):
    """One pass of the agent."""

    iteration: int
    model_calls: int
    tool_calls: list[CallRecord]
    usage: Usage
    duration_s: float
    feedback: str | None
    verdict: dict[str, Any] | None
    guard: dict[str, Any] | None
    compacted: int
    answer_hash: str | None
    work_hash: str | None


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
    guard: dict[str, Any] | None


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
    _messages_delta_reducer, snapshot_frequency=SNAPSHOT_EVERY  # type: ignore[arg-type]
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

    Public keys (see DESIGN.md): ``messages``, ``stop_reason``, ``iteration``,
    ``iterations``, ``usage``, ``judge_usage``, ``progress``, ``todos``, ``mode``,
    ``pending_notices``, ``verdict``. The rest belong to the nodes.
    """

    run: RunInfo
    pass_info: PassInfo
    call_log: Annotated[list[CallRecord], DeltaChannel(_log_reducer, snapshot_frequency=SNAPSHOT_EVERY)]
    detector: dict[str, Any]
    remaining_steps: RemainingSteps


class LoopContext(TypedDict, total=False):
    """Per-run overrides through LangGraph's runtime context (all optional)."""

    max_iterations: int | None
    max_model_calls: int | None
    max_tool_calls: int | None
    token_budget: int | None
    max_duration_s: float | None
    max_tool_output_chars: int | None
    warn_after: int
    stop_after: int
    window: int
    no_progress_warn_after: int
    no_progress_stop_after: int
    consecutive: int
    tolerance: float
    threshold: float


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
