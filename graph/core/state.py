"""The graph state: public keys users read, private keys the nodes own, and the check of
a run's input before anything is written.

Messages live in a ``DeltaChannel``: a checkpoint stores only the new messages of a
step, so storage grows linearly with the thread instead of quadratically. The
per-run log of tool-call records uses one too. Everything else is small.

**Input.** LangGraph drops input keys its input schema does not declare, so a typo such as
``{"message": [...]}`` would start a run with nothing to work on and the model
would be called without a user message. ``LoopGraph`` (the compiled graph
``create_loop_agent`` returns) checks every top-level ``stream``/``astream`` call
(``invoke``, ``ainvoke`` and the event streams go through them) first:

- unknown input keys raise ``ValueError`` naming them and the accepted keys;
- a run whose thread would hold no user message raises ``ValueError``;
- ``Command(resume=...)`` on a thread that is not paused at an interrupt (it never
  ran, or its last run finished) raises ``ValueError`` saying how to continue.

Nothing is written to the thread in any of these cases.

Example:
    >>> input_problem({"message": ["hi"]}, stored=None)
    "input: unknown key(s) ['message']; a run accepts ['messages', 'mode', 'todos']"
    >>> print(input_problem({"messages": ["hi"]}, stored=None))
    None
    >>> from langgraph_loop.core.state import new_usage, add_usage
    >>> add_usage(new_usage(), {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
    {'input_tokens': 3, 'output_tokens': 2, 'total_tokens': 5}
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Annotated, Any, get_type_hints

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from langgraph.types import Command, StateSnapshot
from pydantic import Field
from typing_extensions import TypedDict

from langgraph_loop.core.compat import messages_delta_reducer
from langgraph_loop.core.messages import Notice, resolve_removals
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
    "LoopContext",
    "LoopGraph",
    "LoopInput",
    "LoopOutput",
    "LoopState",
    "Notice",
    "RunInfo",
    "Todo",
    "Usage",
    "add_usage",
    "input_problem",
    "iteration_info",
    "new_usage",
    "resume_problem",
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


def iteration_info(state: LoopState) -> IterationInfo:
    """The current iteration's bookkeeping (from ``pass_info`` on a thread 0.2 paused).

    Example:
        >>> iteration_info({"pass_info": {"model_calls": 2}})["model_calls"]
        2
        >>> iteration_info({"iteration_info": {"model_calls": 1}, "pass_info": {"model_calls": 2}})
        {'model_calls': 1}
    """
    return state.get("iteration_info") or state.get("pass_info") or {}


# --- checking a run's input ------------------------------------------------------------

ACCEPTED = sorted(LoopInput.__annotations__)
NOTHING = ("input: nothing to work on: the run has no user message (pass "
           "{'messages': [HumanMessage(...)]}, or continue a thread that has one)")


def _has_user_message(messages: Any) -> bool:
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        messages = [messages] if messages else []
    try:
        converted: list[BaseMessage] = convert_to_messages(list(messages))
    except (ValueError, TypeError, NotImplementedError):
        return True  # not ours to judge: LangGraph's reducer reports malformed messages
    return any(m.type == "human" for m in converted)


def input_problem(input: Mapping[str, Any], stored: StateSnapshot | None,
                  accepted: Sequence[str] = ACCEPTED) -> str | None:
    """Why a dict input cannot start a run (None when it can).

    ``stored`` is the thread's saved state (None without a thread or checkpoint);
    ``accepted`` the input keys (``LoopInput``'s, plus a user state schema's).
    """
    unknown = sorted(str(k) for k in input if k not in accepted)
    if unknown:
        return f"input: unknown key(s) {unknown}; a run accepts {sorted(accepted)}"
    if _has_user_message(input.get("messages") or []):
        return None
    saved = (stored.values or {}).get("messages") if stored is not None else None
    return None if _has_user_message(saved or []) else NOTHING


def resume_problem(stored: StateSnapshot | None, thread: Any) -> str | None:
    """Why ``Command(resume=...)`` cannot resume this thread (None when it can)."""
    if stored is not None and stored.interrupts:
        return None
    if stored is None or not stored.values:
        state = "has never run"
    elif stored.next:
        state = f"stopped before {list(stored.next)} without an interrupt (an error?)"
    else:
        state = "finished its last run"
    how = ("send a new message with invoke({'messages': [HumanMessage(...)]}, config)"
           if stored is None or not stored.next else "continue it with invoke(None, config)")
    return (f"resume: thread {thread!r} is not paused at an interrupt (it {state}); "
            f"nothing was resumed or written. To go on, {how}.")


def _as_list(messages: Any) -> list[Any]:
    return list(messages) if isinstance(messages, Sequence) and not isinstance(messages, str) else [messages]


def _thread(config: RunnableConfig | None) -> Any:
    return ((config or {}).get("configurable") or {}).get("thread_id")


def _is_subgraph(config: RunnableConfig | None) -> bool:
    """Called as a node of a parent graph: the parent's state may carry other keys."""
    return bool(((config or {}).get("configurable") or {}).get("checkpoint_ns"))




class LoopGraph(CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]):
    """A ``CompiledStateGraph`` that checks a run's input first (see module docstring)."""

    def _needs_state(self, input: Any, config: RunnableConfig | None) -> bool:
        if _thread(config) is None:
            return False
        if isinstance(input, Command):
            return input.resume is not None
        if not isinstance(input, Mapping):
            return False
        messages = input.get("messages") or []
        return (not _has_user_message(messages)
                or any(isinstance(m, RemoveMessage) for m in _as_list(messages)))

    @staticmethod
    def _resolved(input: Any, stored: StateSnapshot | None) -> Any:
        """The input with its ``RemoveMessage``s resolved against the stored thread."""
        if not isinstance(input, Mapping) or not input.get("messages"):
            return input
        saved = (stored.values or {}).get("messages") or [] if stored is not None else []
        return {**input, "messages": resolve_removals(saved, _as_list(input["messages"]))}

    def _problem(self, input: Any, config: RunnableConfig | None,
                 stored: StateSnapshot | None) -> str | None:
        if isinstance(input, Command) and input.resume is not None:
            return resume_problem(stored, _thread(config))
        if isinstance(input, Mapping):
            return input_problem(input, stored, tuple(self.builder.input_schema.__annotations__))
        return None

    def _stored(self, config: RunnableConfig | None) -> StateSnapshot | None:
        try:
            return self.get_state(config or {})
        except ValueError:  # no checkpointer
            return None

    async def _astored(self, config: RunnableConfig | None) -> StateSnapshot | None:
        try:
            return await self.aget_state(config or {})
        except ValueError:
            return None

    def stream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
               **kwargs: Any) -> Iterator[Any]:
        """``CompiledStateGraph.stream`` after the input check (``ValueError``)."""
        if not _is_subgraph(config):
            stored = self._stored(config) if self._needs_state(input, config) else None
            problem = self._problem(input, config, stored)
            if problem is not None:
                raise ValueError(problem)
            input = self._resolved(input, stored)
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
                **kwargs: Any) -> AsyncIterator[Any]:
        """``CompiledStateGraph.astream`` after the input check (``ValueError``)."""
        return self._astream(input, config, **kwargs)

    async def _astream(self, input: Any, config: RunnableConfig | None,
                       **kwargs: Any) -> AsyncIterator[Any]:
        if not _is_subgraph(config):
            stored = await self._astored(config) if self._needs_state(input, config) else None
            problem = self._problem(input, config, stored)
            if problem is not None:
                raise ValueError(problem)
            input = self._resolved(input, stored)
        async for chunk in super().astream(input, config, **kwargs):
            yield chunk

    @classmethod
    def of(cls, graph: CompiledStateGraph[Any, Any, Any, Any]) -> LoopGraph:
        """The same compiled graph, as a ``LoopGraph`` (as ``Pregel.copy`` builds copies)."""
        attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
        return cls(**attrs)
