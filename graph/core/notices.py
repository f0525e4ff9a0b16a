"""The deferred-notice queue: what the loop tells the model, delivered safely.

Notices are queued in graph state (``pending_notices``), tagged with the run that
queued them, and drained by the model node right before its next call into ONE
``HumanMessage(name="loop_warning")`` placed after the ToolMessages. They are
never written between an AIMessage with tool calls and its ToolMessages.

Example:
    >>> q = queue_notice([], run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    >>> q = queue_notice(q, run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    >>> len(q)
    1
    >>> message, rest = drain(q, run="r1")
    >>> message.name, message.content, rest
    ('loop_warning', 'Stop repeating search.', [])
    >>> drain(queue_notice([], run="old", key="k", text="t", source="s"), run="r2")
    (None, [])
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import HumanMessage

from langgraph_loop.core.state import Notice

__all__ = ["NOTICE_NAME", "drain", "notice_message", "queue_notice"]

NOTICE_NAME = "loop_warning"


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
    return HumanMessage(
        content="\n\n".join(texts),
        name=NOTICE_NAME,
        additional_kwargs={"langgraph_loop": {"kind": "notice", "sources": sources}},
    )


def drain(pending: Sequence[Notice] | None, *, run: str) -> tuple[HumanMessage | None, list[Notice]]:
    """Take this run's notices as one message; notices of other runs are dropped."""
    mine = [n for n in (pending or []) if n["run"] == run]
    return notice_message(mine), []
