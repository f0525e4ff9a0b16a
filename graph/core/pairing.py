"""The pairing invariant: what makes a message list provider-valid.

Every AIMessage with tool calls (valid or malformed) must be followed immediately
by exactly one ToolMessage per call id, with nothing in between; ToolMessages
appear nowhere else; a system message may only come first.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> check_pairing([HumanMessage("hi"), ai, ToolMessage("ok", tool_call_id="c1")])
    []
    >>> check_pairing([HumanMessage("hi"), ai, HumanMessage("warn")])[0]
    "message 1: tool calls ['c1'] not answered before message 2 (human)"
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

__all__ = ["call_ids", "check_pairing", "unanswered_tail"]


def call_ids(message: BaseMessage) -> list[str]:
    """Ids of an AIMessage's tool calls, malformed ones (``invalid_tool_calls``) included."""
    if not isinstance(message, AIMessage):
        return []
    ids = [str(c.get("id")) for c in message.tool_calls]
    ids += [str(c.get("id")) for c in message.invalid_tool_calls]
    return ids


def check_pairing(messages: Sequence[BaseMessage]) -> list[str]:
    """Problems that would make a provider reject this message list (empty = valid)."""
    problems: list[str] = []
    waiting: list[str] = []
    owner = -1
    for i, msg in enumerate(messages):
        if isinstance(msg, SystemMessage) and i != 0:
            problems.append(f"message {i}: system message not first")
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id in waiting:
                waiting.remove(msg.tool_call_id)
            else:
                problems.append(f"message {i}: tool message {msg.tool_call_id!r} answers no open call")
            continue
        if waiting:
            problems.append(
                f"message {owner}: tool calls {waiting} not answered before message {i} ({msg.type})"
            )
            waiting = []
        ids = call_ids(msg)
        if ids:
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids {ids}")
            waiting, owner = list(dict.fromkeys(ids)), i
    if waiting:
        problems.append(f"message {owner}: tool calls {waiting} not answered at the end")
    return problems


def unanswered_tail(messages: Sequence[BaseMessage]) -> tuple[int, list[str]]:
    """Index of the last AIMessage and its call ids still unanswered (scans the tail only)."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            answered.add(msg.tool_call_id)
        elif isinstance(msg, AIMessage):
            return i, [c for c in call_ids(msg) if c not in answered]
    return -1, []
