"""The graph state (public keys, the nodes' own), the records kept in it, the stream events, and the
pure helpers that build them. Messages (and the per-run call log) live in a ``DeltaChannel``: a
checkpoint stores only a step's new ones, so storage grows linearly with the thread.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.callbacks import BaseCallbackManager, dispatch_custom_event
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.channels.delta import DeltaChannel
from langgraph.managed import RemainingSteps
from langgraph.runtime import Runtime
from pydantic import Field
from typing_extensions import TypedDict

from langgraph_loop.core.compat import messages_delta_reducer, streams_messages
from langgraph_loop.core.messages import Notice, digest
from langgraph_loop.core.stop import Guard, StopReason

__all__ = ["ApprovalAutoEvent", "BudgetPressureEvent", "CallRecord", "CompactionEvent", "Event",
           "IterationEndEvent", "IterationInfo", "IterationRecord", "IterationStartEvent",
           "IterationsOverrides", "LimitsOverrides", "LoggedCall", "LoopAllowed", "LoopBlockEvent",
           "LoopContext", "LoopDetectionOverrides", "LoopInput", "LoopOutput", "LoopState",
           "LoopWarningEvent", "Notice", "Review", "RunInfo", "StopEvent", "ThreadBudget", "Todo",
           "ToolCallEvent", "Usage", "add_usage", "ashow_messages", "build_record", "calls_of_iteration",
           "emit", "executed_calls", "iteration_info", "latest_answer", "new_iteration", "new_usage",
           "show_messages", "usage_of"]

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


class LoopAllowed(TypedDict):
    """Loops a person let go on at the loop question (``LoopDetection(ask_human=True)``) in the run
    ``run`` (its request message id): finding key → its count then. The same at both front doors."""

    run: str | None
    allowed: dict[str, int]


class RunInfo(TypedDict, total=False):
    """Per-run bookkeeping (``state["run"]``), reset by ``prepare``."""

    id: str
    started_at: float
    request_id: str | None
    auto_rounds: int
    finalized: bool
    """No final-answer call follows the stop (made, skipped, or not needed)."""
    pressure_queued: bool
    budget_extra: int
    """Tokens a person added to this run's ``token_budget`` at a check-in."""
    overrides: dict[str, Any]
    """The run's per-run overrides (its ``context=``), so every resume enforces them."""
    decision: dict[str, Any]
    """The model node's ``DecisionRecord`` on the newest reply, when it acts, for ``loop_detector``."""


class ThreadBudget(TypedDict, total=False):
    """The token budget's per-thread record, kept across runs: what earlier runs spent and what
    people added at their check-ins (folded in by ``prepare``; ``budget_scope="thread"`` counts them)."""

    spent: int
    extra: int


class IterationInfo(TypedDict, total=False):
    """Bookkeeping of the current iteration (``state["iteration_info"]``)."""

    model_calls: int
    started_at: float
    usage: Usage
    start_id: str | None
    compacted: int
    offered: list[str] | None
    predicate: dict[str, Any] | None


class Review(TypedDict):
    """The approval decisions for one reply (``state["review"]``), by call id."""

    message_id: str | None
    decisions: dict[str, dict[str, Any]]


class CallRecord(TypedDict):
    """One tool execution (or refusal), as in ``iterations[i]["tool_calls"]``."""

    name: str
    args: dict[str, Any]
    status: str
    duration_s: float
    iteration: NotRequired[int]


class LoggedCall(CallRecord):
    """A call record in the run's call log: its iteration and a digest of its result."""

    result_hash: NotRequired[str]
    """A digest of its result: of the result with its volatile parts replaced when the run
    detects stalls (they compare results across iterations), else of the text as it is."""
    executed: NotRequired[int]
    """Tool executions of the run so far, this call's batch included."""


class IterationRecord(TypedDict, total=False):
    """One iteration of the agent."""

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
    """An iteration starts."""

    event: Literal["iteration_start"]
    iteration: int


class IterationEndEvent(TypedDict):
    """An iteration ended; its record."""

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


class LoopBlockEvent(TypedDict):
    """The loop detector answered repeated calls with an error instead of running them."""

    event: Literal["loop_block"]
    call_ids: list[str]
    texts: list[str]


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
         | LoopBlockEvent | BudgetPressureEvent | ApprovalAutoEvent | CompactionEvent)
"""A ``custom`` stream event: ``{"event": <its name>, ...}``."""


def new_usage() -> Usage:
    """Zero usage."""
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


def add_usage(total: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> Usage:
    """Sum two usage dicts (missing keys count as 0; optional keys kept when present)."""
    out: dict[str, int] = dict(total) if total else new_usage()  # type: ignore[assignment]
    if extra:
        for key, value in extra.items():
            if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
                out[key] = out.get(key, 0) + value
    for key in new_usage():  # the keys every usage has
        out.setdefault(key, 0)
    return out  # type: ignore[return-value]


def usage_of(message: Any) -> Usage | None:
    """The usage a model reported on its AIMessage, flattened (None when unreported)."""
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


# --- building records ------------------------------------------------------------------------

def new_iteration(start_id: str | None, *, now: float | None = None) -> IterationInfo:
    """Fresh counters for an iteration starting at message ``start_id``."""
    return {
        "model_calls": 0,
        "started_at": time.time() if now is None else now,
        "usage": new_usage(),
        "start_id": start_id,
        "compacted": 0,
    }


def latest_answer(state: Mapping[str, Any]) -> str:
    """The text of the iteration's answer: the last reply's text, else the structured answer
    (``response_format``: the reply called an output tool) as JSON."""
    last = next((m for m in reversed(state.get("messages") or []) if isinstance(m, AIMessage)), None)
    text = last.text if last is not None else ""
    response = state.get("structured_response")
    if text or response is None:
        return text
    if hasattr(response, "model_dump_json"):
        return str(response.model_dump_json())
    return json.dumps(response, default=str)


def executed_calls(state: Mapping[str, Any]) -> int:
    """Tool executions of the run so far: the newest call-log entry holds the count."""
    log = state.get("call_log") or []
    return int(log[-1].get("executed", 0)) if log else 0


def calls_of_iteration(log: Sequence[CallRecord], iteration: int) -> list[CallRecord]:
    """The call records of one iteration (scans back from the end of the run's log)."""
    out: list[CallRecord] = []
    for record in reversed(log):
        if record.get("iteration") != iteration:
            break
        out.append({k: v for k, v in record.items() if k != "iteration"})  # type: ignore[arg-type,misc]
    out.reverse()
    return out


def build_record(*, iteration: int, info: IterationInfo, calls: list[CallRecord],
                 now: float | None = None, answer: str = "", feedback: str | None = None,
                 verdict: dict[str, Any] | None = None, guard: Guard | None = None
                 ) -> IterationRecord:
    """The record of a finished iteration (``iterations[i]``)."""
    end = time.time() if now is None else now
    work = sorted(repr((c["name"], c["args"], c.get("result_hash"))) for c in calls)
    return {
        "iteration": iteration,
        "model_calls": info.get("model_calls", 0),
        "tool_calls": [{k: v for k, v in c.items() if k not in ("result_hash", "executed")}  # type: ignore[misc]
                       for c in calls],
        "usage": add_usage(info.get("usage"), None),
        "duration_s": round(end - info.get("started_at", end), 6),
        "feedback": feedback,
        "verdict": verdict,
        "guard": guard,
        "compacted": info.get("compacted", 0),
        "answer_hash": digest(repr(" ".join(answer.split()).lower())) if answer else None,
        "work_hash": digest(repr(work)) if work else None,
    }


def emit(runtime: Runtime[Any] | None, event: Event) -> None:
    """Send a typed event, JSON-friendly, to ``stream_mode="custom"`` and, as a LangChain custom event
    named by its ``event``, to ``astream_events`` and the run's callbacks (none listening: nothing)."""
    writer = runtime.stream_writer if runtime is not None else None
    callbacks = (var_child_runnable_config.get() or {}).get("callbacks")  # the running step's
    listens = (isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None
               and bool(callbacks.handlers))
    if writer is None and not listens:
        return
    data = json.loads(json.dumps(event, default=str))
    if writer is not None:
        writer(data)
    if listens:
        dispatch_custom_event(data["event"], data)


def _show(config: RunnableConfig, messages: Sequence[BaseMessage]) -> Runnable[Any, Any] | None:
    """A step named as the running node that outputs ``messages`` (None: nothing to show).
    Its input is empty: LangGraph takes a node's input messages as already shown."""
    node = (config.get("metadata") or {}).get("langgraph_node")
    if not messages or not isinstance(node, str) or not streams_messages(config):
        return None
    for message in messages:
        if message.id is None:
            message.id = str(uuid.uuid4())  # the node's own output is then not shown twice
    update = {"messages": list(messages)}

    async def ashown(_: Any) -> dict[str, list[BaseMessage]]:
        return update

    return RunnableLambda(lambda _: update, afunc=ashown, name=node)


def show_messages(config: RunnableConfig, messages: Sequence[BaseMessage]) -> None:
    """Hand ``messages`` a node writes to ``stream_mode="messages"`` (while it listens) before the model
    call that follows them: LangGraph shows them when the node ends, after the reply they preceded."""
    step = _show(config, messages)
    if step is not None:
        step.invoke(None, config)


async def ashow_messages(config: RunnableConfig, messages: Sequence[BaseMessage]) -> None:
    """Async ``show_messages``."""
    step = _show(config, messages)
    if step is not None:
        await step.ainvoke(None, config)


# --- the graph state ----------------------------------------------------------------------

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


SNAPSHOT_EVERY = 100
"""A full snapshot of the messages every this many writes (a ten-round turn makes 22): a load
reads one snapshot and at most this many steps after it (each cheap), so it stays near-flat in
the thread's length, while writing a snapshot costs the whole thread (benchmarks/README.md)."""

LOG_SNAPSHOT_EVERY = 10
"""The call log's (small, per run): nearer than the messages', so a load walks back no further."""


class LoopInput(TypedDict, total=False):
    """What a run accepts as input."""

    messages: Annotated[list[AnyMessage],
                        DeltaChannel(messages_delta_reducer, snapshot_frequency=SNAPSHOT_EVERY)]
    mode: str | None
    todos: list[Todo]


def _reason(_old: str | None, new: str | None) -> str | None:
    """Store stop reasons as their plain string value (checkpoint- and JSON-friendly)."""
    return None if new is None else StopReason(new).value


class LoopOutput(LoopInput, total=False):
    """What ``invoke`` returns: the public keys. ``stop_reason`` is the ``StopReason`` value as
    a plain ``str`` (equal to the enum member; unchanged through any checkpointer or JSON)."""

    stop_reason: Annotated[str | None, _reason]
    stop_guard: Guard | None
    """Why the run stopped (``core/stop.py``): which guard, the reason, its details."""
    iteration: int
    iterations: list[IterationRecord]
    usage: Usage
    judge_usage: Usage
    progress: list[str]
    loop_notices: list[Notice]
    loop_allowed: LoopAllowed | None
    verdict: dict[str, Any] | None
    structured_response: Any


class LoopState(LoopOutput, total=False):
    """The compiled graph's state schema: the public keys (README, "State keys") and the nodes' own."""

    run: RunInfo
    iteration_info: IterationInfo
    review: Review | None
    thread_budget: ThreadBudget
    call_log: Annotated[list[LoggedCall], DeltaChannel(_log_reducer, snapshot_frequency=LOG_SNAPSHOT_EVERY)]
    remaining_steps: RemainingSteps


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


class ThresholdOverrides(TypedDict, total=False):
    """A layer's thresholds a run may override (``NoProgress``, ``Repeat``, ``Cycle``)."""

    warn_after: int
    stop_after: int


class CallsOverrides(TypedDict, total=False):
    """``loop_detection.calls`` fields a run may override (``Calls``)."""

    window: int


class LoopDetectionOverrides(TypedDict, total=False):
    """``loop_detection`` fields a run may override (``LoopDetection``), by layer. A run that
    gives an opt-in layer's thresholds (``repeat``, ``cycle``) switches that layer on."""

    no_progress: ThresholdOverrides
    repeat: ThresholdOverrides
    cycle: ThresholdOverrides
    calls: CallsOverrides


class LoopContext(TypedDict, total=False):
    """Per-run overrides through LangGraph's runtime context, nested by group (all optional;
    README, "Per-run overrides"). The one declaration of what a run may override: per-run
    validation (``core/overrides.py``) is derived from it, in-process and on LangGraph Server."""

    iterations: IterationsOverrides
    limits: LimitsOverrides
    loop_detection: LoopDetectionOverrides


def iteration_info(state: LoopState) -> IterationInfo:
    """The current iteration's bookkeeping."""
    return state.get("iteration_info") or {}
