"""The loop detector's state, how results update it, and call signatures (pure).

The state is derived from the run's transcript (``nodes/loop_detector.py``) and never
written to graph state; it holds short hashes and small ints only, bounded by the window:

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

**Signatures.** A *call signature* is a short hash of the tool name and the canonical JSON of its
arguments: key order does not matter, and arguments given as a JSON string or as a
dict give the same signature. ``LoopDetection.arg_policies`` decides which fields
count (``ignore`` a ``timestamp``, or ``keep`` only a ``path``); the policy under the
key ``"*"`` applies to tools without their own. A *response signature* is the
multiset of a response's call signatures, so parallel calls in another order are
the same response. Malformed calls (``invalid_tool_calls``: arguments that are not
valid JSON) are signed from their raw text, so a model repeating the same broken
call is counted like any other repeat.

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

    >>> from langgraph_loop.core.config import ArgPolicy
    >>> call_signature("search", {"q": "x", "page": 1}) == call_signature(
    ...     "search", '{"page": 1, "q": "x"}')
    True
    >>> cfg = LoopDetection(arg_policies={"log": ArgPolicy(ignore=("timestamp",))})
    >>> call_signature("log", {"msg": "hi", "timestamp": 1}, cfg) == call_signature(
    ...     "log", {"msg": "hi", "timestamp": 2}, cfg)
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired

from langchain_core.messages import AIMessage, ToolMessage
from typing_extensions import TypedDict

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import call_label, digest

__all__ = ["LABEL_CHARS", "CallRecord", "DetectorState", "Response", "SignedCall", "absorb",
           "args_of", "args_text", "call_signature", "canonical_args", "compact", "content_hash",
           "makes_progress", "push", "response_sig", "response_signature", "sign_calls", "streak"]

# --- call and response signatures ------------------------------------------------------

SIG_LEN = 8  # hex digits: no collision in practice among the window's few dozen calls
LABEL_ARGS = 100


def _digest(text: str) -> str:
    return digest(text, SIG_LEN)


def canonical_args(args: Any) -> Any:
    """Arguments as a JSON value: a JSON string is parsed, anything else kept.

    Example:
        >>> canonical_args('{"b": 1, "a": 2}')
        {'b': 1, 'a': 2}
        >>> canonical_args("not json")
        'not json'
    """
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _apply_policy(name: str, value: Any, config: LoopDetection | None) -> Any:
    if config is None or not isinstance(value, dict):
        return value
    policy = config.arg_policies.get(name) or config.arg_policies.get("*")
    if policy is None:
        return value
    if policy.keep is not None:
        return {k: v for k, v in value.items() if k in policy.keep}
    return {k: v for k, v in value.items() if k not in policy.ignore}


def _str_keys(value: Any) -> Any:
    """``value`` with every mapping key a string (JSON's own rule), so any keys sort."""
    if isinstance(value, Mapping):
        return {str(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_str_keys(v) for v in value]
    return value


def _dump(value: Any) -> str:
    """Canonical JSON of any value (keys sorted; other objects as ``str``), for hashing."""
    try:
        return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"),
                          ensure_ascii=False)
    except TypeError:  # keys of mixed or non-JSON types
        return json.dumps(_str_keys(value), sort_keys=True, default=str,
                          separators=(",", ":"), ensure_ascii=False)


def call_signature(
    name: str | None, args: Any, config: LoopDetection | None = None, *, malformed: bool = False
) -> str:
    """Tool name + canonical JSON of its (policy-filtered) arguments, hashed."""
    value = canonical_args(args)
    if malformed:
        value = {"__malformed__": value if isinstance(value, str) else _dump(value)}
    else:
        value = _apply_policy(str(name), value, config)
    return _digest(_dump([name, value]))


def args_text(args: Any, *, malformed: bool = False) -> str:
    """The arguments as short compact JSON, for warning texts and records.

    Example:
        >>> args_text('{"b": 1, "a": 2}'), args_text("{oops", malformed=True)
        ('{"a":2,"b":1}', '<invalid JSON arguments: {oops>')
    """
    value = canonical_args(args)
    text = _dump(value) if not isinstance(value, str) else value
    if len(text) > LABEL_ARGS:
        text = text[: LABEL_ARGS - 1] + "…"
    return f"<invalid JSON arguments: {text}>" if malformed else text


def response_signature(sigs: Sequence[str]) -> str:
    """The multiset of call signatures, hashed (order of parallel calls ignored).

    Example:
        >>> response_signature(["b", "a"]) == response_signature(["a", "b"])
        True
    """
    return _digest("|".join(sorted(sigs)))


def content_hash(content: Any) -> str:
    """A short hash of a tool result (a ToolMessage's content).

    Content blocks are hashed without their ``id`` (MCP adapters give every block of every
    result a fresh random one), so identical results hash the same.

    Example:
        >>> content_hash([{"type": "text", "text": "x", "id": "lc_1"}]) == content_hash(
        ...     [{"type": "text", "text": "x", "id": "lc_2"}])
        True
    """
    if isinstance(content, str):
        return _digest(content)
    if isinstance(content, list):
        content = [{k: v for k, v in b.items() if k != "id"} if isinstance(b, dict) else b
                   for b in content]
    return _digest(_dump(content))


@dataclass(frozen=True)
class SignedCall:
    """One call of a response with its signature."""

    id: str
    sig: str
    name: str
    args: str
    malformed: bool = False

    @property
    def label(self) -> str:
        """``tool(args)``, as warnings show it."""
        return call_label(self.name, self.args)


def sign_calls(ai: AIMessage, config: LoopDetection | None = None) -> list[SignedCall]:
    """Every call of a response (valid, then malformed) with its signature.

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "1"}],
        ...                invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "2",
        ...                                     "error": "bad json", "type": "invalid_tool_call"}])
        >>> [(c.name, c.malformed) for c in sign_calls(ai)]
        [('f', False), ('f', True)]
    """
    out = [SignedCall(str(c.get("id")), call_signature(c["name"], c["args"], config),
                      c["name"], args_text(c["args"])) for c in ai.tool_calls]
    for bad in ai.invalid_tool_calls:
        name = bad.get("name") or "?"
        raw = bad.get("args") or ""
        out.append(SignedCall(str(bad.get("id")), call_signature(name, raw, malformed=True),
                              name, args_text(raw, malformed=True), malformed=True))
    return out


# --- the detector state ------------------------------------------------------------------

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


def _changes(record: CallRecord | None, message: ToolMessage, result: str,
             config: LoopDetection) -> bool:
    """Does this result change something we can see?"""
    if record is not None and "result" in record:
        return record["result"] != result  # the call's own result moved
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
    changed = any(_changes(calls.get(sig), m, result, config) for sig, m, result in mine)
    if changed:  # every other call's retry is excused: its streak starts again
        calls = {s: _excused(r) for s, r in calls.items()}
        det["changed_at"] = det.get("responses", 0)
    for sig, message, result in mine:
        old = calls.get(sig) or CallRecord(tool=message.name or "?")
        same = old.get("result") == result
        still = same and not changed and streak(old) > 0
        record = CallRecord(tool=old["tool"], result=result, streak=streak(old) + 1 if still else 1)
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
