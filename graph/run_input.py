"""Checking a run's input before the graph starts, so a bad call writes nothing.

LangGraph drops input keys its input schema does not declare, so a typo such as
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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from langgraph_loop.core.state import LoopContext, LoopInput, LoopOutput, LoopState

__all__ = ["LoopGraph", "input_problem", "resume_problem"]

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


Compiled = CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]


class LoopGraph(Compiled):
    """A ``CompiledStateGraph`` that checks a run's input first (see module docstring)."""

    def _needs_state(self, input: Any, config: RunnableConfig | None) -> bool:
        if _thread(config) is None:
            return False
        if isinstance(input, Command):
            return input.resume is not None
        return isinstance(input, Mapping) and not _has_user_message(input.get("messages") or [])

    def _problem(self, input: Any, config: RunnableConfig | None,
                 stored: StateSnapshot | None) -> str | None:
        if isinstance(input, Command) and input.resume is not None:
            return resume_problem(stored, _thread(config))
        if isinstance(input, Mapping):
            return input_problem(input, stored)
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
        async for chunk in super().astream(input, config, **kwargs):
            yield chunk

    @classmethod
    def of(cls, graph: Compiled) -> LoopGraph:
        """The same compiled graph, as a ``LoopGraph`` (as ``Pregel.copy`` builds copies)."""
        attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
        return cls(**attrs)
