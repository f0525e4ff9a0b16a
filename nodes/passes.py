"""Passes and their records: pure helpers shared by prepare, router and the guards.

Example:
    >>> p = new_pass("m1", now=100.0)
    >>> p["model_calls"], p["start_id"]
    (0, 'm1')
    >>> build_record(iteration=1, pass_info=p, calls=[], now=101.5)["duration_s"]
    1.5
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_loop.core.records import CallRecord, Guard, IterationRecord, new_usage
from langgraph_loop.core.state import PassInfo
from langgraph_loop.core.text import digest

__all__ = ["answer_text", "build_record", "calls_of_pass", "last_ai", "new_pass"]


def new_pass(start_id: str | None, *, now: float | None = None) -> PassInfo:
    """Fresh counters for a pass starting at message ``start_id``."""
    return {
        "model_calls": 0,
        "started_at": time.time() if now is None else now,
        "usage": new_usage(),
        "start_id": start_id,
        "compacted": 0,
    }


def last_ai(messages: Sequence[BaseMessage]) -> AIMessage | None:
    """The most recent AIMessage (scans back from the end)."""
    for msg in reversed(messages):
        if isinstance(msg, AIMessage):
            return msg
    return None


def answer_text(message: BaseMessage | None) -> str:
    """The text of a model answer (text blocks joined for multimodal content)."""
    if message is None:
        return ""
    content = message.content
    if isinstance(content, str):
        return content
    parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content]
    return "".join(p for p in parts if isinstance(p, str))


def calls_of_pass(log: Sequence[CallRecord], iteration: int) -> list[CallRecord]:
    """The call records of one pass (scans back from the end of the run's log)."""
    out: list[CallRecord] = []
    for record in reversed(log):
        if record.get("iteration") != iteration:
            break
        out.append({k: v for k, v in record.items() if k != "iteration"})  # type: ignore[arg-type,misc]
    out.reverse()
    return out


def _public(call: CallRecord) -> CallRecord:
    return {k: v for k, v in call.items() if k != "result_hash"}  # type: ignore[return-value]


def build_record(
    *,
    iteration: int,
    pass_info: PassInfo,
    calls: list[CallRecord],
    now: float | None = None,
    answer: str = "",
    feedback: str | None = None,
    verdict: dict[str, Any] | None = None,
    guard: Guard | None = None,
) -> IterationRecord:
    """The record of a finished pass (``iterations[i]``)."""
    end = time.time() if now is None else now
    work = sorted(repr((c["name"], c["args"], c.get("result_hash"))) for c in calls)
    return {
        "iteration": iteration,
        "model_calls": pass_info.get("model_calls", 0),
        "tool_calls": [_public(c) for c in calls],
        "usage": dict(pass_info.get("usage") or new_usage()),  # type: ignore[typeddict-item]
        "duration_s": round(end - pass_info.get("started_at", end), 6),
        "feedback": feedback,
        "verdict": verdict,
        "guard": guard,
        "compacted": pass_info.get("compacted", 0),
        "answer_hash": digest(repr(" ".join(answer.split()).lower())) if answer else None,
        "work_hash": digest(repr(work)) if work else None,
    }
