"""The history a run's input would produce, checked before anything is written.

``LoopGraph`` (``core/state.py``) passes every new run's ``messages`` through
``checked_messages``: the input is merged with the stored thread as LangGraph's messages
channel would merge it, and the result must keep the pairing rules (``core/messages.py``).

Repaired, the same way every time (nothing is lost):

- a call of an input AIMessage left without a ToolMessage is answered ``not_executed``
  right after that AIMessage's ToolMessages (the call belonged to an old turn);
- a HumanMessage at the end of the input that is already stored (same id, same content:
  the same object sent again, since LangGraph writes the id into it) is a new turn: it is
  added under a fresh id instead of replacing the stored one;
- the calls of the stored thread's last AIMessage that a crashed or abandoned step finished
  (LangGraph saved their results as task writes) keep those results (``saved_answers``).

``update_state`` through ``LoopGraph`` is checked the same way, without the fresh id (editing
a message by id is what it is for) and leaving the calls it ends on open for the tools.

Rejected with a ``ValueError`` naming the input message (its index), the rule, and saying
nothing was written: a message LangChain cannot read (an unknown role), a ToolMessage that
answers no open call, a system message anywhere but first, tool calls sharing an id.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> [m.type for m in checked_messages([HumanMessage("a"), ai, HumanMessage("b")], [])]
    ['human', 'ai', 'tool', 'human']
    >>> try:
    ...     checked_messages([HumanMessage("a"), ToolMessage("3", tool_call_id="ghost")], [])
    ... except ValueError as exc:
    ...     print(str(exc)[:57])
    input: message 1 (tool '3'): a tool message must answer a
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langgraph.types import Command

from langgraph_loop.core.compat import messages_delta_reducer
from langgraph_loop.core.messages import (
    Problem,
    answer_unanswered,
    as_text,
    pairing_problems,
    shorten,
)

__all__ = ["RULES", "checked_messages", "saved_answers"]

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
    """The messages a run writes for the input ``value`` on a thread holding ``stored``,
    repaired, or a ``ValueError`` (see the module docstring). ``saved``: results a crashed
    step saved for the stored last AIMessage's calls (``saved_answers``). ``update``: the
    messages of an ``update_state`` (edits by id are its purpose, and calls it ends on stay
    open for the tools)."""
    given = _as_messages(value)
    messages = given if update else _fresh_turn(given, stored)
    where = {id(m): i for i, m in enumerate(messages)}  # the caller's index of each message
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    messages = answer_unanswered([*(m for m in saved if m.tool_call_id not in answered),
                                  *messages], open_end=update)
    merged = messages_delta_reducer(list(stored), [messages])
    wrong = [_explain(p, merged[p.at], where[id(merged[p.at])]) for p in pairing_problems(merged)
             if p.rule != "unanswered" and id(merged[p.at]) in where]
    if wrong:
        raise ValueError(f"input: {'; '.join(wrong)}; nothing was written")
    return messages


def saved_answers(writes: Iterable[Any], ids: Sequence[str]) -> list[ToolMessage]:
    """The ToolMessages among a checkpoint's pending writes (a step's saved task results,
    however nested) that answer the calls ``ids``, one per call, in the order of ``ids``.

    Example:
        >>> saved_answers([{"message": ToolMessage("r", tool_call_id="c1")}], ["c1", "c2"])
        [ToolMessage(content='r', tool_call_id='c1')]
    """
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
