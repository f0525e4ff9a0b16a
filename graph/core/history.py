"""A run's input, checked before anything is written: ``LoopGraph`` and the history check.

``LoopGraph`` (what ``create_loop_agent`` returns; built as ``Pregel.copy`` builds copies,
since LangGraph runs no user code before it saves an input) checks ``stream``/``astream``
and ``update_state``/``bulk_update_state`` calls first. A run's ``messages`` are merged with
the stored thread as the messages channel would merge them, and the result must keep the
pairing rules (``core/messages.py``). What is repaired and what is a ``ValueError``:
docs/reliability.md ("What the loop repairs, what it rejects", "Edits keep the thread
valid"); one run at a time per thread in a process (``ThreadBusyError``): docs/deployment.md.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StateUpdate

from langgraph_loop.core import prompts
from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.drive import Io, Steps, adrive, aperform, drive, perform
from langgraph_loop.core.messages import (
    Problem,
    as_text,
    call_ids,
    describe,
    encodable,
    newest_reply,
    pairing_problems,
    shorten,
)
from langgraph_loop.core.questions import answer_problem
from langgraph_loop.core.state import LoopContext, LoopInput, LoopOutput, LoopState

__all__ = ["LoopGraph", "ThreadBusyError", "checked_messages", "not_executed", "removal_breaks",
           "resolve_removals"]

RULES: dict[str, str] = {
    "system_first": "a system message may only come first in a thread",
    "orphan_tool": ("a tool message must answer a tool call of the AIMessage right before it, "
                    "and tool_call_id {id!r} answers no open call"),
    "duplicate_ids": "the tool calls of one message need distinct ids, got {ids}",
}
"""The rules an input is rejected for (``Problem.rule``), as the error states them."""


def _as_messages(value: Any) -> list[BaseMessage]:
    """The input's messages (a list, or one message-like as LangGraph takes it)."""
    items = value if isinstance(value, list) else [value]
    out: list[BaseMessage] = []
    for i, item in enumerate(items):
        try:
            out += convert_to_messages([item])
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise ValueError(f"input: message {i}: {exc}; nothing was written") from exc
    return out


def _fresh_turn(messages: list[BaseMessage], stored: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A stored HumanMessage sent again at the end of the input, as a new turn (fresh id)."""
    last = messages[-1] if messages else None
    if not isinstance(last, HumanMessage) or not last.id:
        return messages
    old = next((m for m in reversed(stored) if m.id == last.id), None)
    if not isinstance(old, HumanMessage) or old.content != last.content:
        return messages
    return [*messages[:-1], last.model_copy(update={"id": None})]


def _explain(problem: Problem, message: BaseMessage, index: int) -> str:
    rule = RULES[problem.rule].format(id=problem.ids[0] if problem.ids else None,
                                      ids=list(problem.ids))
    return f"message {index} ({message.type} {shorten(as_text(message.content), 40)!r}): {rule}"


def checked_messages(value: Any, stored: Sequence[BaseMessage],
                     saved: Sequence[ToolMessage] = (), *, update: bool = False
                     ) -> list[BaseMessage]:
    """The messages a run writes for ``value`` on a thread holding ``stored``, repaired and
    escaped, or a ``ValueError``. ``saved``: ``saved_answers``; ``update``: an ``update_state``'s."""
    given = [encodable(m) for m in _as_messages(value)]  # the model node escapes only new ones
    messages = given if update else _fresh_turn(given, stored)
    where = {id(m): i for i, m in enumerate(messages)}  # the caller's index of each message
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    messages = answer_unanswered([*(m for m in saved if m.tool_call_id not in answered),
                                  *messages], open_end=update)
    merged = cast(list[BaseMessage], add_messages(list(stored), messages))  # type: ignore[arg-type]
    wrong = [_explain(p, merged[p.at], where[id(merged[p.at])]) for p in pairing_problems(merged)
             if p.rule != "unanswered" and id(merged[p.at]) in where]
    if any(isinstance(m, RemoveMessage) for m in given):
        wrong += _results_removed(stored, merged)
    if wrong:
        raise ValueError(f"input: {'; '.join(wrong)}; nothing was written")
    return messages


def _results_removed(stored: Sequence[BaseMessage], merged: Sequence[BaseMessage]) -> list[str]:
    """The removals that leave a call the thread keeps without its stored result."""
    results = {m.tool_call_id: m.id for m in stored if isinstance(m, ToolMessage)}
    kept = {m.tool_call_id for m in merged if isinstance(m, ToolMessage)}
    return [f"removing tool message {results[c]!r} leaves call {c!r} of AIMessage {m.id!r} without "
            "a result (a provider rejects that); remove that AIMessage too (its results go with "
            f"it), or replace the result: a ToolMessage with id {results[c]!r} answering {c!r}"
            for m in merged for c in call_ids(m) if c in results and c not in kept]


def saved_answers(writes: Iterable[Any], ids: Sequence[str]) -> list[ToolMessage]:
    """The ToolMessages among a checkpoint's pending writes (a step's saved task results,
    however nested) that answer the calls ``ids``, one per call, in the order of ``ids``."""
    found: dict[str, ToolMessage] = {}
    stack = list(writes)
    while stack:
        value = stack.pop()
        if isinstance(value, ToolMessage):
            if value.tool_call_id in ids:
                found.setdefault(value.tool_call_id, value)
        elif isinstance(value, Command):
            stack.append(value.update)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return [found[i] for i in ids if i in found]


def not_executed(call_id: str) -> ToolMessage:
    """The answer to a call no run will execute (the one repair of an unanswered call)."""
    return ToolMessage(prompts.CANCELLED, tool_call_id=call_id, status="error")


def answer_unanswered(messages: Sequence[BaseMessage], *, open_end: bool = False
                      ) -> list[BaseMessage]:
    """The list with every unanswered call of its AIMessages answered ``not_executed``,
    right after its AIMessage's ToolMessages (``open_end``: calls it ends on stay open)."""
    out: list[BaseMessage] = []
    waiting: list[str] = []
    for msg in messages:
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id in waiting:
                waiting.remove(msg.tool_call_id)
        else:
            out += [not_executed(c) for c in waiting]
            waiting = list(dict.fromkeys(call_ids(msg)))
        out.append(msg)
    return out if open_end else out + [not_executed(c) for c in waiting]


def resolve_removals(stored: Sequence[BaseMessage], new: Sequence[Any]) -> list[Any]:
    """``new`` with its ``RemoveMessage``s resolved as ``add_messages`` does, each stored one by id
    (the messages channel stores only the change); an unknown id is a ``ValueError``."""
    if not any(isinstance(m, RemoveMessage) for m in new):
        return list(new)
    wipes = [i for i, m in enumerate(new) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES]
    if wipes:
        return [RemoveMessage(id=str(m.id)) for m in stored if m.id] + list(new[wipes[-1] + 1:])
    known = {m.id for m in stored}
    for message in new:
        if isinstance(message, RemoveMessage) and message.id not in known:
            raise ValueError(f"Attempting to delete a message with an ID that doesn't exist "
                             f"('{message.id}')")
        known.add(getattr(message, "id", None))
    return _with_answers_removed(stored, list(new))


def _with_answers_removed(stored: Sequence[BaseMessage], new: list[Any]) -> list[Any]:
    """``new`` with the stored ToolMessages of each removed AIMessage's calls removed too, right
    after it (they would answer no call: the model would be sent an orphan tool result)."""
    removed = {m.id for m in new if isinstance(m, RemoveMessage)}
    out: list[Any] = []
    for message in new:
        out.append(message)
        owner = next((m for m in stored if isinstance(message, RemoveMessage) and m.id == message.id), None)
        calls = set(call_ids(owner)) if owner is not None else set()
        answers = [m for m in stored if isinstance(m, ToolMessage) and m.tool_call_id in calls
                   and m.id not in removed]
        out += [RemoveMessage(id=str(m.id)) for m in answers]
        removed.update(m.id for m in answers)
    return out


def removal_breaks(stored: Sequence[BaseMessage], new: Sequence[Any]) -> list[str]:
    """The pairing rules ``new`` (a messages update, removals resolved) would break in ``stored``."""
    after = cast(list[BaseMessage], add_messages(list(stored), list(new)))  # type: ignore[arg-type]
    held = {(p.rule, p.ids) for p in pairing_problems(stored)}
    return [describe(p, after) for p in pairing_problems(after) if (p.rule, p.ids) not in held]


# --- checking a run's input ------------------------------------------------------------

NOTHING = ("input: nothing to work on: the run has no user message (pass "
           "{'messages': [HumanMessage(...)]}, or continue a thread that has one)")


def _has_user_message(messages: Any) -> bool:
    try:
        converted: list[BaseMessage] = convert_to_messages(_as_list(messages) if messages else [])
    except (ValueError, TypeError, NotImplementedError):
        return True  # not ours to judge: LangGraph's reducer reports malformed messages
    return any(m.type == "human" for m in converted)


def input_problem(input: Mapping[str, Any], stored: StateSnapshot | None,
                  accepted: Sequence[str]) -> str | None:
    """Why a dict input cannot start a run (None when it can); ``stored``: the thread's state."""
    unknown = sorted(str(k) for k in input if k not in accepted)
    if unknown:
        return f"input: unknown key(s) {unknown}; a run accepts {sorted(accepted)}"
    given, saved = input.get("messages"), _values(stored).get("messages")
    return None if _has_user_message(given) or _has_user_message(saved) else NOTHING


def new_user_messages(input: Any) -> bool:
    """Is ``input`` new user messages only (no ids)? Checking them needs nothing of the stored
    thread: they match no stored id, break no pairing and answer no call, so a run with such
    an input loads the thread once (LangGraph's own load), not twice."""
    if not isinstance(input, Mapping) or not input.get("messages"):
        return False
    try:
        messages = _as_messages(input["messages"])
    except ValueError:
        return False  # the full check names the fault
    return all(isinstance(m, HumanMessage) and m.id is None for m in messages)


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


EMPTY_COMMAND = ("resume: the Command carries no answer (resume=None, and no update or goto); "
                 "nothing was resumed or written. Resume a pause with the answer it asks for "
                 "(its __interrupt__ value says which, e.g. Command(resume={'decisions': "
                 "[{'type': 'approve'}]})), or continue the thread with invoke(None, config).")


def _as_list(messages: Any) -> list[Any]:
    return list(messages) if isinstance(messages, Sequence) and not isinstance(messages, str) else [messages]


def _thread(config: RunnableConfig | None) -> Any:
    return ((config or {}).get("configurable") or {}).get("thread_id")


def _is_subgraph(config: RunnableConfig | None) -> bool:
    """Called as a node of a parent graph: the parent's state may carry other keys."""
    return bool(((config or {}).get("configurable") or {}).get("checkpoint_ns"))


def _escaped(input: Any) -> Any:
    """A parent graph's input (not checked) with its messages ``encodable``."""
    if not isinstance(input, Mapping) or not input.get("messages"):
        return input
    return {**input, "messages": [encodable(m) if isinstance(m, BaseMessage) else m
                                  for m in _as_list(input["messages"])]}


def _values(stored: StateSnapshot | None) -> dict[str, Any]:
    return dict(stored.values or {}) if stored is not None else {}


def _merged(state: Mapping[str, Any], values: Mapping[str, Any]) -> list[BaseMessage]:
    """The thread's messages once ``values`` (an update with messages) is written."""
    return cast(list[BaseMessage], add_messages(  # type: ignore[arg-type]
        state.get("messages") or [], _as_list(values["messages"])))


def _continued(values: Mapping[str, Any], as_node: str | None, state: Mapping[str, Any]
               ) -> dict[str, Any]:
    """An update made as ``as_node`` on a thread holding ``state``, its open calls sent where the edge
    after ``as_node`` goes, as under ``create_agent``: as ``tools`` the model comes next, so they are
    answered ``not_executed``; as ``model`` on a finished thread the stop is cleared (the tools run them)."""
    open_calls = newest_reply(_merged(state, values)).pending
    if open_calls and as_node == "tools":
        return {**values, "messages": [*_as_list(values["messages"]),
                                       *(not_executed(c) for c in open_calls)]}
    if open_calls and as_node == "model" and state.get("stop_reason") is not None:
        return {**values, "stop_reason": None}
    return dict(values)


class ThreadBusyError(RuntimeError):
    """A run was started on a thread that has a run in progress in this process."""


_RUNNING: set[tuple[int, str]] = set()
"""The threads with a run in progress in this process: (checkpointer, thread_id)."""
_RUNNING_LOCK = threading.Lock()

_CLOSING: set[tuple[int, str]] = set()
"""The running threads whose async run is being closed (its reader left it: ``astream``)."""

ABANDONED_TURNS = 3
"""Event-loop turns an async run waits for a busy thread's run to start closing (the loop
closes an async generator its reader left one or two turns later)."""


def _key(saver: Any, config: RunnableConfig | None) -> tuple[int, str] | None:
    """The config's thread under this checkpointer (None: no thread to guard; no subgraph gets here)."""
    thread = _thread(config)
    if thread is None or not isinstance(saver, BaseCheckpointSaver):
        return None
    return (id(saver), str(thread))


def _claim(saver: Any, config: RunnableConfig | None, *, edit: bool = False
           ) -> tuple[int, str] | None:
    """Mark the config's thread as running (None: no thread to guard), or ``ThreadBusyError``;
    ``edit``: only check that no run works on it."""
    key = _key(saver, config)
    if key is None:
        return None
    with _RUNNING_LOCK:
        if key in _RUNNING and edit:
            raise ThreadBusyError(
                f"thread {key[1]!r} has a run in progress in this process; update_state would "
                "write between two of its steps (a tool call and its result); nothing was "
                "written. Edit the thread once the run has ended or is paused at an interrupt.")
        if key in _RUNNING:
            raise ThreadBusyError(
                f"thread {key[1]!r} already has a run in progress in this process; nothing was "
                "run or written. Wait for that run to end before starting another on this "
                "thread, or use another thread_id.")
        if not edit:
            _RUNNING.add(key)
    return key


async def _aclaim(saver: Any, config: RunnableConfig | None) -> tuple[int, str] | None:
    """``_claim`` for an async run: waits while a run its reader left is closed."""
    turns = 0
    while True:
        try:
            return _claim(saver, config)
        except ThreadBusyError:
            closing = _key(saver, config) in _CLOSING
            if not closing:
                turns += 1
                if turns > ABANDONED_TURNS:
                    raise
            await asyncio.sleep(0.001 if closing else 0)  # a close may wait for a tool: no spin


def _release(key: tuple[int, str] | None) -> None:
    if key is not None:
        with _RUNNING_LOCK:
            _RUNNING.discard(key)
            _CLOSING.discard(key)


class LoopGraph(CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]):
    """A ``CompiledStateGraph`` that checks a run's input first; ``check_context`` validates a
    run's ``context=``, and a resume runs under the run's stored overrides."""

    def __init__(self, *, check_context: Callable[[Any], object] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_context = check_context

    @property
    def _accepted(self) -> tuple[str, ...]:
        """The input schema's keys, and those a user's or middleware's ``state_schema`` adds."""
        state = set(self.builder.state_schema.__annotations__) - set(LoopState.__annotations__)
        return (*self.builder.input_schema.__annotations__, *sorted(state))

    def _checked(self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any],
                 stored: StateSnapshot | None, saved: Sequence[ToolMessage]
                 ) -> tuple[Any, dict[str, Any]]:
        """The input and keywords the run starts with: checked (``ValueError``), repaired."""
        if isinstance(input, Command) and input.resume is None and input.update is None \
                and not input.goto:
            raise ValueError(EMPTY_COMMAND)
        if isinstance(input, Command) and input.resume is not None:
            problem = resume_problem(stored, _thread(config)) or answer_problem(
                [(t.name, i.id, i.value) for t in (stored.tasks if stored else ()) for i in t.interrupts],
                input.resume)
            if problem is not None:
                raise ValueError(problem)
        context = kwargs.get("context")
        if context is not None and self.check_context is not None:
            self.check_context(context)
        values = _values(stored)
        kept = (values.get("run") or {}).get("overrides")
        resume = input is None or isinstance(input, Command)
        if resume and kept and (context is None or isinstance(context, Mapping)):
            kwargs = {**kwargs, "context": {**(context or {}), **kept}}  # the run's win
        if isinstance(input, Command) and input.update is not None:
            input = replace(input, update=self._update(input.update, values.get("messages") or []))
        if isinstance(input, Mapping):
            problem = input_problem(input, stored, self._accepted)
            if problem is not None:
                raise ValueError(problem)
            input = self._update(input, values.get("messages") or [], saved, update=False)
        return input, kwargs

    def _saver(self, config: RunnableConfig | None) -> BaseCheckpointSaver[Any] | None:
        """The checkpointer holding the config's thread (the graph's or a parent's), if any."""
        if _thread(config) is None:
            return None
        return self.checkpointer if isinstance(self.checkpointer, BaseCheckpointSaver) \
            else checkpointer(config)

    def _reads(self, input: Any, config: RunnableConfig | None
               ) -> Steps[tuple[StateSnapshot | None, list[ToolMessage], bool]]:
        """The thread's state (None: none, or not needed: ``new_user_messages``, no pending writes),
        what a crashed step saved for the last AIMessage's open calls, and is there a thread to guard."""
        saver = self._saver(config)
        if saver is None:
            return None, [], False
        if new_user_messages(input):
            head = yield Io(saver.get_tuple, saver.aget_tuple, (config or {},))
            if head is None or not head.pending_writes:
                return None, [], True
        try:
            stored = yield Io(self.get_state, self.aget_state, (config or {},))
        except ValueError:  # no checkpointer after all
            return None, [], False
        missing = newest_reply(_values(stored).get("messages") or []).pending \
            if isinstance(input, Mapping) and stored.next else []
        if not missing or not isinstance(self.checkpointer, BaseCheckpointSaver):
            return stored, [], True
        saved = yield Io(self.checkpointer.get_tuple, self.checkpointer.aget_tuple, (stored.config,))
        return stored, saved_answers(saved.pending_writes or [] if saved else [], missing), True

    def _update(self, values: Any, messages: Sequence[BaseMessage], saved: Sequence[ToolMessage] = (),
                *, update: bool = True) -> Any:
        """Values with their removals resolved and their messages checked (``checked_messages``)."""
        if not isinstance(values, Mapping) or "messages" not in values:
            return values
        given = resolve_removals(messages, _as_list(values["messages"]))
        return {**values, "messages": checked_messages(given, messages, saved, update=update)}

    def _checked_updates(self, supersteps: Sequence[Sequence[StateUpdate]],
                         stored: StateSnapshot | None) -> list[list[StateUpdate]]:
        """The updates, each checked on the thread the ones before it leave (``_continued``)."""
        state = _values(stored)
        checked: list[list[StateUpdate]] = []
        for step in supersteps:
            checked.append([])
            for given, as_node, task_id in step:
                command = given if isinstance(given, Command) else None  # its update is checked
                values = self._update(given if command is None else command.update,
                                      state.get("messages") or [])
                if isinstance(values, Mapping) and "messages" in values:
                    values = _continued(values, as_node, state)
                    state = {**state, **values, "messages": _merged(state, values)}
                elif isinstance(values, Mapping):
                    state = {**state, **values}
                checked[-1].append(StateUpdate(values if command is None else replace(command, update=values),
                                               as_node, task_id))
        return checked

    def bulk_update_state(self, config: RunnableConfig,
                          supersteps: Sequence[Sequence[StateUpdate]]) -> RunnableConfig:
        """Checked first (``ValueError``, ``ThreadBusyError``); ``update_state`` comes here too."""
        if _is_subgraph(config):
            return super().bulk_update_state(config, supersteps)
        _claim(self.checkpointer, config, edit=True)
        stored = drive(self._reads(None, config), perform)[0]
        return super().bulk_update_state(config, self._checked_updates(supersteps, stored))

    async def abulk_update_state(self, config: RunnableConfig,
                                 supersteps: Sequence[Sequence[StateUpdate]]) -> RunnableConfig:
        """Async ``bulk_update_state`` (and so ``aupdate_state``)."""
        if _is_subgraph(config):
            return await super().abulk_update_state(config, supersteps)
        _claim(self.checkpointer, config, edit=True)
        stored = (await adrive(self._reads(None, config), aperform))[0]
        return await super().abulk_update_state(config, self._checked_updates(supersteps, stored))

    def stream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
               **kwargs: Any) -> Iterator[Any]:
        """``stream`` after the input check (``ValueError``, ``ThreadBusyError``)."""
        if _is_subgraph(config):
            return super().stream(_escaped(input), config, **kwargs)
        stored, saved, kept = drive(self._reads(input, config), perform)
        input, kwargs = self._checked(input, config, kwargs, stored, saved)
        chunks = super().stream(input, config, **kwargs)
        return self._alone(chunks, config) if kept else chunks  # no thread kept: nothing to guard

    def _alone(self, chunks: Iterator[Any], config: RunnableConfig | None) -> Iterator[Any]:
        """``chunks`` while no other run of this process works on the thread."""
        key = _claim(self.checkpointer, config)
        try:
            yield from chunks
        finally:
            _release(key)

    async def astream(self, input: Any, config: RunnableConfig | None = None,  # type: ignore[override]
                      **kwargs: Any) -> AsyncIterator[Any]:
        """``astream`` after the input check (``ValueError``, ``ThreadBusyError``)."""
        if _is_subgraph(config):
            async for chunk in super().astream(_escaped(input), config, **kwargs):
                yield chunk
            return
        key = await _aclaim(self.checkpointer, config)
        chunks: AsyncIterator[Any] | None = None
        try:
            stored, saved, _ = await adrive(self._reads(input, config), aperform)
            input, kwargs = self._checked(input, config, kwargs, stored, saved)
            chunks = super().astream(input, config, **kwargs)
            async for chunk in chunks:
                yield chunk
        finally:
            if key is not None:
                _CLOSING.add(key)
            try:  # LangGraph's run ends before the thread is free (``yield from`` does it in sync)
                if chunks is not None:
                    await chunks.aclose()  # type: ignore[attr-defined]
            finally:
                _release(key)

    @classmethod
    def of(cls, graph: CompiledStateGraph[Any, Any, Any, Any],
           check_context: Callable[[Any], object] | None = None) -> LoopGraph:
        """The same compiled graph, as a ``LoopGraph`` (as ``Pregel.copy`` builds copies)."""
        attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
        return cls(**attrs, check_context=check_context)
