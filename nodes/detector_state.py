"""The loop detector's state and how results update it (pure, JSON-friendly).

The state lives in graph state under ``detector`` and is written into every checkpoint,
so it holds short hashes and small ints only, bounded by the window:

- ``window``: the last ``window`` responses that called tools (:class:`Response`);
- ``calls``: one :class:`CallRecord` per call signature in the window;
- ``responses``/``changed_at``: responses seen, and the latest whose results changed something;
- ``warned``: keys already warned about (one warning per key while it stays in the window);
- ``pending``: call id → signature for the newest response, until its results arrive.

**Progress is judged per call.** A call's ``streak`` counts its identical results in a row;
it starts again at 1 when the call's own result changes, or when something else changed in
between. A round *changed something* when a call returned a different result than it did
last time (a job that advanced, a file that now reads differently), or when a call made for
the first time succeeded with a non-empty result and is not a read-only tool. So an error, an
empty result (a ``think`` scratchpad) or a read-only lookup (``LoopDetection.read_only_tools``,
or MCP's ``readOnlyHint`` in the tool's metadata) never excuses another call's retry. A call
*makes progress* (its repeat thresholds are relaxed) when its own result moved, or when it was
retried after something else changed and did not fail again: the same error again is never
progress.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> det: DetectorState = {"calls": {"s": {"tool": "book"}}, "pending": {"c1": "s"},
    ...                       "window": [{"calls": ["s"]}]}
    >>> cfg = LoopDetection()
    >>> det = absorb(det, [ToolMessage("Error: no seats", tool_call_id="c1", status="error")], cfg)
    >>> det = absorb({**det, "pending": {"c2": "s"}},
    ...              [ToolMessage("Error: no seats", tool_call_id="c2", status="error")], cfg)
    >>> det["calls"]["s"]["streak"], det["calls"]["s"].get("progress", False)
    (2, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from langchain_core.messages import ToolMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.nodes.signatures import SignedCall, content_hash, response_signature

__all__ = ["LABEL_CHARS", "CallRecord", "DetectorState", "Response", "absorb", "args_of",
           "compact", "makes_progress", "push", "response_sig", "streak"]

LABEL_CHARS = 200


class Response(TypedDict):
    """One tool-calling response in the window."""

    calls: list[str]
    """Its call signatures, sorted (a multiset: parallel calls in any order)."""
    sig: NotRequired[str]
    """The response signature; stored only for several calls (one call: its own signature)."""


class CallRecord(TypedDict):
    """One call signature seen in the window (fields at their default are left out)."""

    tool: str
    args: NotRequired[str]
    """Short arguments text for warnings; kept only while the call is in the window twice."""
    result: NotRequired[str]
    """Hash of its last result (absent until it has one)."""
    streak: NotRequired[int]
    """Identical results in a row with nothing changed in between; dropped when something
    changes elsewhere (its next identical result then starts a new streak)."""
    progress: NotRequired[bool]
    """Present (True) when its last execution made progress: its result moved, or it was
    a retry (not failing again) after something else changed."""
    failed: NotRequired[bool]
    """Present (True) when its last result was an error."""


class DetectorState(TypedDict, total=False):
    """The detector's state (see module docstring)."""

    window: list[Response]
    calls: dict[str, CallRecord]
    responses: int
    """Tool-calling responses seen in this run (numbers them: the newest is ``responses``)."""
    changed_at: int
    """The number of the latest response whose results changed something."""
    warned: list[str]
    pending: dict[str, str]


def response_sig(entry: Response) -> str:
    """The response signature of a window entry."""
    return entry.get("sig") or entry["calls"][0]


def streak(record: CallRecord) -> int:
    """Identical results in a row with nothing changed since (0: none, or excused)."""
    return record.get("streak", 0)


def makes_progress(record: CallRecord) -> bool:
    """Does a retry of this call make progress? Its last execution did, or something changed
    since and its last result was not an error."""
    if record.get("progress"):
        return True
    return "result" in record and "streak" not in record and not record.get("failed")


def args_of(record: CallRecord) -> str:
    """The call's arguments text (empty once it is in the window only once)."""
    return record.get("args", "")


def _changes(record: CallRecord | None, message: ToolMessage, digest: str,
             config: LoopDetection) -> bool:
    """Does this result change something we can see?"""
    if record is not None and "result" in record:
        return record["result"] != digest  # the call's own result moved
    text = message.content if isinstance(message.content, str) else str(message.content)
    tool = record["tool"] if record is not None else message.name
    return (message.status != "error" and bool(text.strip())
            and tool not in config.read_only_tools)


def absorb(detector: Mapping[str, Any], results: Sequence[ToolMessage],
           config: LoopDetection) -> DetectorState:
    """Record the results of the newest response's calls (``pending``); see module docstring."""
    det: DetectorState = dict(detector)  # type: ignore[assignment]
    pending = det.get("pending") or {}
    if not pending:
        return det
    calls = dict(det.get("calls") or {})
    mine = [(pending[m.tool_call_id], m, content_hash(m.content)) for m in results
            if m.tool_call_id in pending]
    changed = any(_changes(calls.get(sig), m, digest, config) for sig, m, digest in mine)
    if changed:  # every other call's retry is excused: its streak starts again
        calls = {s: _excused(r) for s, r in calls.items()}
        det["changed_at"] = det.get("responses", 0)
    for sig, message, digest in mine:
        old = calls.get(sig) or CallRecord(tool=message.name or "?")
        same = old.get("result") == digest
        still = same and not changed and streak(old) > 0
        record = CallRecord(tool=old["tool"], result=digest, streak=streak(old) + 1 if still else 1)
        if "args" in old:
            record["args"] = old["args"]
        if message.status == "error":
            record["failed"] = True
        if "result" in old and (not same or (not still and message.status != "error")):
            record["progress"] = True  # the same error again is never progress
        calls[sig] = record
    det["calls"], det["pending"] = calls, {}
    return det


def _excused(record: CallRecord) -> CallRecord:
    if "streak" not in record:
        return record
    return CallRecord(**{k: v for k, v in record.items() if k != "streak"})  # type: ignore[typeddict-item]


def push(det: DetectorState, calls: Sequence[SignedCall], window: int) -> DetectorState:
    """Append the response to the window; prune everything to what the window holds."""
    sigs = [c.sig for c in calls]
    entry = Response(calls=sorted(sigs))
    if len(sigs) != 1:
        entry["sig"] = response_signature(sigs)
    entries = [*(det.get("window") or []), entry][-window:]
    inside = {s for e in entries for s in e["calls"]}
    records = dict(det.get("calls") or {})
    for c in calls:
        records[c.sig] = CallRecord(**{**records.get(c.sig, {}),  # type: ignore[typeddict-item]
                                       "tool": c.name, "args": c.args})
    records = {s: r for s, r in records.items() if s in inside}
    responses = {response_sig(e) for e in entries}
    tools = {r["tool"] for r in records.values()}
    warned = [k for k in det.get("warned") or [] if _relevant(k, inside, responses, tools)]
    return DetectorState(**{**det, "window": entries, "calls": records, "warned": warned,
                            "responses": det.get("responses", 0) + 1,
                            "pending": {c.id: c.sig for c in calls}})


def _relevant(key: str, calls: set[str], responses: set[str], tools: set[str]) -> bool:
    kind, _, ident = key.partition(":")
    if kind == "call":
        return ident in calls
    if kind == "cycle":
        return any(r in responses for r in ident.split("+"))
    return ident in tools


def compact(det: DetectorState) -> DetectorState:
    """The state as stored: arguments only for calls seen twice in the window, cut short.

    Example:
        >>> compact({"window": [{"calls": ["a"]}, {"calls": ["a", "b"]}],
        ...          "calls": {"a": {"tool": "f", "args": "{}"},
        ...                    "b": {"tool": "g", "args": '{"x":1}'}}})["calls"]["b"]
        {'tool': 'g'}
    """
    counts: dict[str, int] = {}
    for entry in det.get("window") or []:
        for sig in entry["calls"]:
            counts[sig] = counts.get(sig, 0) + 1
    calls: dict[str, CallRecord] = {}
    for sig, rec in (det.get("calls") or {}).items():
        args = args_of(rec)[:LABEL_CHARS] if counts.get(sig, 0) >= 2 else ""
        if args == args_of(rec):
            calls[sig] = rec  # records are never changed in place: share it
            continue
        kept = CallRecord(**{k: v for k, v in rec.items() if k != "args"})  # type: ignore[typeddict-item]
        if args:
            kept["args"] = args
        calls[sig] = kept
    return DetectorState(**{**det, "calls": calls})
