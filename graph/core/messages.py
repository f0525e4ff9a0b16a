"""What a provider-valid message list is: pairing, the deferred-notice queue, the loop's tags.

**Pairing.** Every AIMessage with tool calls (valid or malformed) must be followed
immediately by exactly one ToolMessage per call id, with nothing in between; ToolMessages
appear nowhere else; a system message may only come first.

**Deferred notices.** What the loop tells the model is queued in graph state
(``pending_notices``), tagged with the run that queued it, and drained by the model node
right before its next call into ONE ``HumanMessage(name="loop_warning")`` placed after the
ToolMessages, never between an AIMessage with tool calls and its ToolMessages.

**Text.** One helper each for a message's text: a digest, clipping, shortening, and the
``name(args)`` label of a tool call.

**Tags.** Messages the loop writes carry a ``name`` saying what they are (``TAGS``) and,
where a UI may want to hide them, ``additional_kwargs["langgraph_loop"]["kind"]``.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> check_pairing([HumanMessage("hi"), ai, ToolMessage("ok", tool_call_id="c1")])
    []
    >>> check_pairing([HumanMessage("hi"), ai, HumanMessage("warn")])[0]
    "message 1: tool calls ['c1'] not answered before message 2 (human)"
    >>> q = queue_notice([], run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    >>> q = queue_notice(q, run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    >>> message = drain(q, run="r1")
    >>> len(q), message.name, message.content
    (1, 'loop_warning', 'Stop repeating search.')
    >>> drain(queue_notice([], run="old", key="k", text="t", source="s"), run="r2") is None
    True
    >>> shorten("a   lot\\n of   space", 10), clip("abcdef", 4), len(digest("x"))
    ('a lot of …', 'abc…', 16)
    >>> call_label("search", {"q": "café"}), call_label("f", '{"a":1}')
    ('search({"q": "café"})', 'f({"a":1})')
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import TypedDict

from langgraph_loop.core import prompts

__all__ = ["CONTINUE_NAME", "NOTICE_NAME", "PROGRESS_NAME", "RESPOND_NAME", "SUMMARY_NAME", "TAGS",
           "Notice", "StructuredReply", "as_message", "as_structured", "as_text", "call_ids",
           "call_label", "cap_output", "check_pairing", "clip", "digest", "drain", "iteration_messages",
           "loop_message", "notice_message", "queue_notice", "resolve_removals", "shorten", "unanswered_tail",
           "with_unique_call_ids"]

NOTICE_NAME = "loop_warning"
"""Deferred notices delivered to the model (loop warnings, budget pressure, the stop notice)."""
CONTINUE_NAME = "loop_continue"
"""The message that starts the next iteration."""
PROGRESS_NAME = "loop_progress"
"""The progress log sent in a fresh-context request."""
SUMMARY_NAME = "loop_summary"
"""The summary that replaced compacted messages."""
RESPOND_NAME = "loop_respond"
"""The instruction of the structured final turn (never stored)."""
TAGS = (NOTICE_NAME, CONTINUE_NAME, PROGRESS_NAME, SUMMARY_NAME, RESPOND_NAME)
"""Every ``name`` the loop gives the user-role messages it writes."""


class Notice(TypedDict):
    """A message queued for the model's next call (the deferred-notice queue)."""

    run: str
    key: str
    text: str
    source: str


def loop_message(content: str | list[Any], *, name: str, **kwargs: Any) -> HumanMessage:
    """A user-role message the loop writes, tagged with ``name``."""
    return HumanMessage(content, name=name, **kwargs)  # type: ignore[arg-type]


# --- pairing ---------------------------------------------------------------------------------

def call_ids(message: BaseMessage) -> list[str]:
    """Ids of an AIMessage's tool calls, malformed ones (``invalid_tool_calls``) included."""
    if not isinstance(message, AIMessage):
        return []
    ids = [str(c.get("id")) for c in message.tool_calls]
    ids += [str(c.get("id")) for c in message.invalid_tool_calls]
    return ids


def with_unique_call_ids(message: AIMessage) -> AIMessage:
    """The reply with a fresh id for every call whose id is missing or repeats an earlier one
    (valid and malformed calls alike), so the request and the transcript agree.

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "d"},
        ...                                {"name": "f", "args": {"x": 1}, "id": "d"}])
        >>> ids = [c["id"] for c in with_unique_call_ids(ai).tool_calls]
        >>> ids[0], ids[1] != "d", with_unique_call_ids(AIMessage("hi")).content
        ('d', True, 'hi')
    """
    ids = call_ids(message)
    if all(i and i != "None" for i in ids) and len(set(ids)) == len(ids):
        return message
    seen: set[str] = set()

    def fixed(calls: Sequence[Any]) -> list[Any]:
        out = []
        for call in calls:
            cid = call.get("id")
            if not cid or cid in seen:
                cid = f"call_{uuid.uuid4().hex[:24]}"
            seen.add(cid)
            out.append({**call, "id": cid})
        return out

    return message.model_copy(update={"tool_calls": fixed(message.tool_calls),
                                      "invalid_tool_calls": fixed(message.invalid_tool_calls)})


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


def iteration_messages(messages: Sequence[BaseMessage], start_id: str | None) -> list[BaseMessage]:
    """The messages of the current iteration: from ``start_id`` to the end (scans back)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == start_id:
            return list(messages[i:])
    return list(messages)


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


def resolve_removals(stored: Sequence[BaseMessage], new: Sequence[Any]) -> list[Any]:
    """``new`` with its ``RemoveMessage``s resolved as LangGraph's ``add_messages`` does.

    ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` removes everything before it (each stored
    message by id: the messages channel stores only the change); removing an id that is
    neither stored nor written before it is a ``ValueError``.

    Example:
        >>> old = [HumanMessage("a", id="1")]
        >>> [m.id for m in resolve_removals(old, [RemoveMessage(id=REMOVE_ALL_MESSAGES),
        ...                                       HumanMessage("b", id="2")])]
        ['1', '2']
        >>> resolve_removals(old, [RemoveMessage(id="9")])
        Traceback (most recent call last):
        ...
        ValueError: Attempting to delete a message with an ID that doesn't exist ('9')
    """
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
    return list(new)


# --- the deferred-notice queue ---------------------------------------------------------------

def queue_notice(
    pending: Sequence[Notice] | None, *, run: str, key: str, text: str, source: str
) -> list[Notice]:
    """Return the queue with a notice added, unless one with the same key is queued."""
    current = list(pending or [])
    if any(n["key"] == key and n["run"] == run for n in current):
        return current
    current.append({"run": run, "key": key, "text": text, "source": source})
    return current


def notice_message(notices: Sequence[Notice]) -> HumanMessage | None:
    """Merge notices (de-duplicated by text, in order) into one tagged message."""
    texts: list[str] = []
    for notice in notices:
        if notice["text"] not in texts:
            texts.append(notice["text"])
    if not texts:
        return None
    sources = sorted({n["source"] for n in notices})
    return loop_message("\n\n".join(texts), name=NOTICE_NAME,
                        additional_kwargs={"langgraph_loop": {"kind": "notice", "sources": sources}})


def drain(pending: Sequence[Notice] | None, *, run: str) -> HumanMessage | None:
    """This run's queued notices as one message (notices of other runs are dropped).

    Draining empties the queue: the caller writes ``pending_notices=[]`` with the message.
    """
    return notice_message([n for n in (pending or []) if n["run"] == run])


# --- model replies ---------------------------------------------------------------------------

class StructuredReply(TypedDict):
    """What ``with_structured_output(..., include_raw=True)`` returns."""

    raw: AIMessage
    parsed: Any
    parsing_error: BaseException | None


def as_message(result: Any, what: str) -> AIMessage:
    """A model's result that must be a reply (``TypeError`` naming ``what`` if not).

    Example:
        >>> as_message(AIMessage("hi"), "model").content
        'hi'
    """
    if not isinstance(result, AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected an AIMessage")
    return result


def as_structured(result: Any, what: str) -> StructuredReply:
    """The result of a structured-output runnable with ``include_raw=True``."""
    if not isinstance(result, dict) or not isinstance(result.get("raw"), AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected "
                        "{'raw': AIMessage, 'parsed': ..., 'parsing_error': ...}")
    return {"raw": result["raw"], "parsed": result.get("parsed"),
            "parsing_error": result.get("parsing_error")}


# --- text ------------------------------------------------------------------------------------

def digest(text: str, length: int = 16) -> str:
    """A short, stable hex digest of ``text`` (SHA-1, first ``length`` characters)."""
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten(text: str, limit: int = 500) -> str:
    """Collapse whitespace and cut to ``limit`` characters with an ellipsis."""
    return clip(" ".join(text.split()), limit)


def as_text(content: Any) -> str:
    """Message content as text: a string as it is, anything else as JSON."""
    return content if isinstance(content, str) else json.dumps(content, default=str)


def call_label(name: object, args: Any) -> str:
    """A tool call as people read it: ``name(args)`` (args already text are kept as they are)."""
    text = args if isinstance(args, str) else json.dumps(args, default=str, ensure_ascii=False)
    return f"{name}({text})"


def cap_output(content: Any, limit: int | None) -> Any:
    """Content cut to ``limit`` characters of text, saying so (strings and content blocks).

    Example:
        >>> [len(b["text"]) for b in cap_output([{"type": "text", "text": "x" * 300}], 100)]
        [100, 59]
    """
    if limit is None:
        return content
    if isinstance(content, str):
        if len(content) <= limit:
            return content
        return content[:limit] + prompts.OUTPUT_TRUNCATED.format(length=len(content), limit=limit)
    if not isinstance(content, list):
        return content
    total = sum(len(str(b.get("text", ""))) if isinstance(b, dict) else len(str(b)) for b in content)
    if total <= limit:
        return content
    out: list[Any] = []
    left = limit
    for block in content:
        text = str(block.get("text", "")) if isinstance(block, dict) else str(block)
        if left <= 0:
            break
        kept = text[:left]
        left -= len(kept)
        out.append({**block, "text": kept} if isinstance(block, dict) else kept)
    note = prompts.OUTPUT_TRUNCATED.format(length=total, limit=limit).strip()
    return [*out, {"type": "text", "text": note}]
