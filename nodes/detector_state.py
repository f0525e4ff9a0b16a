"""The loop detector's state, how results update it, and call signatures (pure).

The state is derived from the run's transcript (``nodes/loop_detector.py``) and never
written to graph state; it holds short hashes and small ints only, bounded by the windows:

- ``calls``: one :class:`CallRecord` per call signature requested within the last
  ``LoopDetection.call_window`` calls (or still in the response window);
- ``window``: the last ``window`` responses that called tools (:class:`Response`), for the
  repeat, cycle and per-tool layers;
- ``n``/``responses``: calls and tool-calling responses seen in this run;
- ``reply``/``same_reply``: the newest response signature and how many times in a row it came;
- ``warned``: keys already warned about by the response-level layers;
- ``cuts``: replies cut while streaming because their text looped (``nodes/stream_cut.py``);
- ``pending``: call id → signature for the newest response, until its results arrive.

**Progress is judged per call, from its own results.** A call's ``same`` counts its own
executions in a row that returned the same (normalized, ``nodes/fingerprint.py``) result,
whatever ran in between: other calls' fresh results never excuse it. Only its own result
changing starts the count again; and a call that *touches* it (its arguments name one of the
same paths, a path inside one of its folders, or a folder holding one of its paths: a
``sed -i x.py`` between two ``cat x.py``) excuses its next repeat, which then neither is
judged nor extends the count. Read-only tools (``LoopDetection.read_only_tools`` or MCP's
``readOnlyHint``) touch nothing. A repeat that was *blocked* (answered by the loop detector
instead of run) is remembered as ``refused``.

**Signatures.** A *call signature* is a short hash of the tool name and the canonical JSON of
its arguments: key order does not matter, and arguments given as a JSON string or as a dict
give the same signature. A tool's :class:`ArgPolicy` (``LoopDetection.arg_policies``, or the
tool's ``metadata["loop_key"]``) decides what counts: ``ignore`` a ``timestamp``, ``keep``
only a ``path``, or a ``key`` function of the arguments; the policy under ``"*"`` applies to
tools without their own. A *response signature* is the multiset of a response's call
signatures. Malformed calls (``invalid_tool_calls``) are signed from their raw text.

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> cfg = LoopDetection()
    >>> det: DetectorState = {"calls": {"s": {"tool": "test"}}, "pending": {"c1": "s"}}
    >>> det = absorb(det, [ToolMessage("1 failed in 0.2s", tool_call_id="c1")], cfg)
    >>> det = absorb({**det, "pending": {"c2": "s"}},
    ...              [ToolMessage("1 failed in 0.3s", tool_call_id="c2")], cfg)
    >>> det["calls"]["s"]["same"]
    2

    >>> from langgraph_loop.core.config import ArgPolicy
    >>> call_signature("search", {"q": "x", "page": 1}) == call_signature(
    ...     "search", '{"page": 1, "q": "x"}')
    True
    >>> cfg = LoopDetection(arg_policies={"read": ArgPolicy(keep=("path",))})
    >>> call_signature("read", {"path": "a", "limit": 1}, cfg) == call_signature(
    ...     "read", {"path": "a", "limit": 9}, cfg)
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired

from langchain_core.messages import ToolMessage
from typing_extensions import TypedDict

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import is_blocked
from langgraph_loop.nodes.fingerprint import (
    SignedCall,
    args_text,
    call_signature,
    canonical_args,
    content_hash,
    is_empty,
    response_signature,
    sign_calls,
)

__all__ = ["CallRecord", "DetectorState", "Response", "SignedCall",
           "absorb", "args_of", "args_text", "call_signature", "canonical_args",
           "content_hash", "push", "response_sig", "response_signature",
           "sign_calls"]

# --- the detector state ------------------------------------------------------------------

class Response(TypedDict):
    """One tool-calling response in the window."""

    calls: list[str]
    """Its call signatures, sorted (a multiset: parallel calls in any order)."""
    sig: NotRequired[str]
    """The response signature; stored only for several calls (one call: its own signature)."""


class CallRecord(TypedDict, total=False):
    """One call signature remembered (fields at their default are left out)."""

    tool: str
    args: str
    """Short arguments text for warnings (kept while it may be needed)."""
    last: int
    """The run's call number of its latest request."""
    result: str
    """Hash of its last normalized result (absent until it has one)."""
    same: int
    """Its own executions in a row that returned ``result`` (others never reset it)."""
    since: int
    """The response (of the run, 1-based) whose execution of it began these ``same`` results."""
    moved: bool
    """Its last result differed from the one before, or came after a call touching its paths
    (it may progress: the repeat layer relaxes its thresholds)."""
    empty: bool
    """Its last result had no content."""
    failed: bool
    """Its last result was an error."""
    warned: bool
    """Warned about during this run of identical results."""
    touched: bool
    """A call touching its paths was requested since its last request: its next repeat is
    not judged."""
    refused: bool
    """Its last request was blocked: asking for it again stops."""
    between: bool
    """Other calls were requested between its latest request and the one before."""
    paths: list[str]
    dirs: list[str]


class DetectorState(TypedDict, total=False):
    """The detector's state (see module docstring)."""

    window: list[Response]
    calls: dict[str, CallRecord]
    n: int
    responses: int
    changed_at: int
    """The number of the latest response whose results moved (a call's own result changed)."""
    reply: str
    same_reply: int
    warned: list[str]
    pending: dict[str, str]
    cuts: int
    """Replies of this run cut while streaming because their text looped."""


def response_sig(entry: Response) -> str:
    """The response signature of a window entry."""
    return entry.get("sig") or entry["calls"][0]


def args_of(record: CallRecord) -> str:
    """The call's arguments text (empty when not kept)."""
    return record.get("args", "")


_KEPT = ("tool", "args", "last", "paths", "dirs")


def _absorb_one(old: CallRecord, message: ToolMessage, config: LoopDetection,
                responses: int) -> CallRecord:
    """A call's record after one of its results (``old``: the record as requested, in the
    run's response number ``responses``)."""
    if is_blocked(message):  # not run: nothing learnt, and asking again stops
        return CallRecord(**{**old, "refused": True})  # type: ignore[typeddict-item]
    result = content_hash(message.content, normalized=config.normalize_results)
    repeated = old.get("result") == result
    same = old.get("same", 0) + 1 if repeated else 1
    if repeated and old.get("touched"):
        same = old.get("same", 1)  # a call touching its paths ran in between: no evidence
    record = CallRecord(**{k: v for k, v in old.items() if k in _KEPT})  # type: ignore[typeddict-item]
    record.update(result=result, same=same,
                  since=old.get("since", responses) if repeated else responses)
    if ("result" in old and not repeated) or old.get("touched"):
        record["moved"] = True
    if is_empty(message.content):
        record["empty"] = True
    if message.status == "error":
        record["failed"] = True
    if repeated and old.get("warned"):
        record["warned"] = True  # one warning per run of identical results
    return record


def absorb(detector: Mapping[str, Any], results: Sequence[ToolMessage],
           config: LoopDetection) -> DetectorState:
    """Record the results of the newest response's calls (``pending``); see module docstring."""
    det: DetectorState = dict(detector)  # type: ignore[assignment]
    pending = det.get("pending") or {}
    if not pending:
        return det
    calls = dict(det.get("calls") or {})
    moved = False
    for message in results:
        sig = pending.get(message.tool_call_id)
        if sig is None:
            continue
        old = calls.get(sig) or CallRecord(tool=message.name or "?")
        record = _absorb_one(old, message, config, det.get("responses", 0))
        moved = moved or ("result" in old and record.get("result") != old["result"])
        calls[sig] = record
    if moved:
        det["changed_at"] = det.get("responses", 0)
    det["calls"], det["pending"] = calls, {}
    return det


def touches(paths: Sequence[str], dirs: Sequence[str], their_paths: Sequence[str],
            their_dirs: Sequence[str]) -> bool:
    """Does a call naming ``paths`` (in ``dirs``) name one of ``their_paths``, a folder holding
    one, or a path inside one of ``their_dirs``?"""
    mine = set(paths)
    return not (mine.isdisjoint(their_paths) and mine.isdisjoint(their_dirs)
                and set(dirs).isdisjoint(their_paths))


def _touch(records: dict[str, CallRecord], call: SignedCall) -> None:
    """Mark every other remembered call this one touches (in place)."""
    if not call.paths:
        return
    for sig, record in records.items():
        if sig != call.sig and "result" in record and touches(
                call.paths, call.dirs, record.get("paths", ()), record.get("dirs", ())):
            records[sig] = CallRecord(**{**record, "touched": True})  # type: ignore[typeddict-item]


def push(det: DetectorState, calls: Sequence[SignedCall], config: LoopDetection) -> DetectorState:
    """Count the response's calls in; prune everything to what the windows hold.

    Each call's record gets its call number and arguments; a call that is not read-only
    touches the records naming its paths.
    """
    sigs = [c.sig for c in calls]
    entry = Response(calls=sorted(sigs))
    if len(sigs) != 1:
        entry["sig"] = response_signature(sigs)
    entries = [*(det.get("window") or []), entry][-config.window:]
    records = dict(det.get("calls") or {})
    count = det.get("n", 0)
    for c in calls:
        count += 1
        old = records.get(c.sig) or CallRecord(tool=c.name)
        if c.name not in config.read_only_tools:
            _touch(records, c)
        record = CallRecord(**{**old, "tool": c.name, "args": c.args, "last": count})  # type: ignore[typeddict-item]
        if "last" in old:
            record["between"] = count - old["last"] > 1
        if c.paths:
            record["paths"], record["dirs"] = list(c.paths), list(c.dirs)
        records[c.sig] = record
    inside = {s for e in entries for s in e["calls"]}
    records = {s: r for s, r in records.items()
               if s in inside or r.get("last", 0) > count - config.call_window}
    reply = response_sig(entry)
    same_reply = det.get("same_reply", 0) + 1 if det.get("reply") == reply else 1
    warned = det.get("warned") or []
    if warned:
        responses = {response_sig(e) for e in entries}
        tools = {r["tool"] for r in records.values()}
        warned = [k for k in warned if _relevant(k, inside, responses, tools)]
    return DetectorState(**{**det, "window": entries, "calls": records, "warned": warned,  # type: ignore[typeddict-item]
                            "n": count, "responses": det.get("responses", 0) + 1,
                            "reply": reply, "same_reply": same_reply,
                            "pending": {c.id: c.sig for c in calls}})


def _relevant(key: str, calls: set[str], responses: set[str], tools: set[str]) -> bool:
    kind, _, ident = key.partition(":")
    if kind == "call":
        return ident in calls
    if kind == "cycle":
        return any(r in responses for r in ident.split("+"))
    return ident in tools
