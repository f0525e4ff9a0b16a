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
- the history the input would produce must keep the pairing rules: what can be repaired
  without losing information is, everything else is a ``ValueError`` naming the message
  and the rule (``core/history.py``);
- a ``context=`` that is not a mapping, or holds an invalid override, raises ``ValueError``;
- ``Command(resume=...)`` on a thread that is not paused at an interrupt (it never
  ran, or its last run finished) raises ``ValueError`` saying how to continue.

Nothing is written to the thread in any of these cases. ``update_state`` and a
``Command(update=...)`` check the messages they write the same way. A resume (``None`` or a
``Command``) runs under the overrides its run started with (``run["overrides"]``, stored by
``prepare``): a ``context=`` it brings may add overrides, not change the run's.

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

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.managed import RemainingSteps
from langgraph.types import Command, StateSnapshot
from pydantic import Field

from langgraph_loop.core.compat import messages_delta_reducer
from langgraph_loop.core.history import checked_messages, saved_answers
from langgraph_loop.core.messages import Notice, unanswered_tail
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


def input_problem(input: Mapping[str, Any], stored: StateSnapshot | None) -> str | None:
    """Why a dict input cannot start a run (None when it can).

    ``stored`` is the thread's saved state (None without a thread or checkpoint).
    """
    unknown = sorted(str(k) for k in input if k not in LoopInput.__annotations__)
    if unknown:
        return f"input: unknown key(s) {unknown}; a run accepts {ACCEPTED}"
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


def _thread(config: RunnableConfig | None) -> Any:
    return ((config or {}).get("configurable") or {}).get("thread_id")


def _is_subgraph(config: RunnableConfig | None) -> bool:
    """Called as a node of a parent graph: the parent's state may carry other keys."""
    return bool(((config or {}).get("configurable") or {}).get("checkpoint_ns"))


def _values(stored: StateSnapshot | None) -> dict[str, Any]:
    return dict(stored.values or {}) if stored is not None else {}


class LoopGraph(CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]):
    """A ``CompiledStateGraph`` that checks a run's input first (see module docstring).

    ``check_context`` validates a run's ``context=`` (the builder passes
    ``LoopSettings.overrides``); a resume runs under the run's stored overrides.
    """

    def __init__(self, *, check_context: Callable[[Any], object] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_context = check_context

    def _checked(self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any],
                 stored: StateSnapshot | None, saved: Sequence[ToolMessage]
                 ) -> tuple[Any, dict[str, Any]]:
        """The input and keywords the run starts with: checked (``ValueError``), repaired."""
        if isinstance(input, Command) and input.resume is not None:
            problem = resume_problem(stored, _thread(config))
            if problem is not None:
                raise ValueError(problem)
        context = kwargs.get("context")
        if context is not None and self.check_context is not None:
            self.check_context(context)
        kept = (_values(stored).get("run") or {}).get("overrides")
        if (input is None or isinstance(input, Command)) and kept:  # a resume: the run's win
            kwargs = {**kwargs, "context": {**(context or {}), **kept}}
        if isinstance(input, Command) and input.update is not None:
            input = replace(input, update=self._update(input.update, stored))
        if isinstance(input, Mapping):
            problem = input_problem(input, stored)
            if problem is not None:
                raise ValueError(problem)
            if "messages" in input:
                messages = _values(stored).get("messages") or []
                input = {**input, "messages": checked_messages(input["messages"], messages, saved)}
        return input, kwargs

    def _stored(self, config: RunnableConfig | None) -> StateSnapshot | None:
        try:
            return self.get_state(config or {}) if _thread(config) is not None else None
        except ValueError:  # no checkpointer
            return None

    async def _astored(self, config: RunnableConfig | None) -> StateSnapshot | None:
        try:
            return await self.aget_state(config or {}) if _thread(config) is not None else None
        except ValueError:
            return None

    def _saver(self, input: Any, stored: StateSnapshot | None) -> tuple[Any, list[str]]:
        """The checkpointer and the stored last AIMessage's unanswered calls, when a new
        message continues a thread whose last step did not finish (else no calls)."""
        if not isinstance(input, Mapping) or stored is None or not stored.next:
            return None, []
        _, missing = unanswered_tail(_values(stored).get("messages") or [])
        saver = self.checkpointer
        return (saver, missing) if isinstance(saver, BaseCheckpointSaver) else (None, [])

    def _saved(self, input: Any, stored: StateSnapshot | None) -> list[ToolMessage]:
        saver, missing = self._saver(input, stored)
        if not missing or stored is None:
            return []
        saved = saver.get_tuple(stored.config)
        return saved_answers(saved.pending_writes or [] if saved else [], missing)

    async def _asaved(self, input: Any, stored: StateSnapshot | None) -> list[ToolMessage]:
        saver, missing = self._saver(input, stored)
        if not missing or stored is None:
            return []
        saved = await saver.aget_tuple(stored.config)
        return saved_answers(saved.pending_writes or [] if saved else [], missing)

    def _update(self, values: Any, stored: StateSnapshot | None) -> Any:
        """``update_state`` values with their messages checked (``checked_messages``)."""
        if not isinstance(values, Mapping) or "messages" not in values:
            return values
        messages = _values(stored).get("messages") or []
        return {**values, "messages": checked_messages(values["messages"], messages, update=True)}

    def update_state(self, config: RunnableConfig, values: Any, as_node: str | None = None,
                     task_id: str | None = None) -> RunnableConfig:
        """``CompiledStateGraph.update_state`` after the messages check (``ValueError``)."""
        if not _is_subgraph(config):
            values = self._update(values, self._stored(config))
        return super().update_state(config, values, as_node, task_id)

    async def aupdate_state(self, config: RunnableConfig, values: Any, as_node: str | None = None,
                            task_id: str | None = None) -> RunnableConfig:
        """Async ``update_state``."""
        if not _is_subgraph(config):
            values = self._update(values, await self._astored(config))
        return await super().aupdate_state(config, values, as_node, task_id)

    def stream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
               **kwargs: Any) -> Iterator[Any]:
        """``CompiledStateGraph.stream`` after the input check (``ValueError``)."""
        if not _is_subgraph(config):
            stored = self._stored(config)
            input, kwargs = self._checked(input, config, kwargs, stored, self._saved(input, stored))
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
                **kwargs: Any) -> AsyncIterator[Any]:
        """``CompiledStateGraph.astream`` after the input check (``ValueError``)."""
        return self._astream(input, config, **kwargs)

    async def _astream(self, input: Any, config: RunnableConfig | None,
                       **kwargs: Any) -> AsyncIterator[Any]:
        if not _is_subgraph(config):
            stored = await self._astored(config)
            saved = await self._asaved(input, stored)
            input, kwargs = self._checked(input, config, kwargs, stored, saved)
        async for chunk in super().astream(input, config, **kwargs):
            yield chunk

    @classmethod
    def of(cls, graph: CompiledStateGraph[Any, Any, Any, Any],
           check_context: Callable[[Any], object] | None = None) -> LoopGraph:
        """The same compiled graph, as a ``LoopGraph`` (as ``Pregel.copy`` builds copies)."""
        attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
        return cls(**attrs, check_context=check_context)
