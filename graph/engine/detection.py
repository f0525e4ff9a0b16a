"""Loop detection, the engine's core: pure decisions over a run's replies and their results.

Read top-down: normalization → the detector's state (derived from the run's transcript, never
checkpointed; short hashes and small ints, bounded by the windows) → the layers → the ladder
(warn → block → stop) → the findings and their texts. What counts as a loop, the layers, the
ladder and per-tool policies: ``docs/loop-detection.md``.

Example:
    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> def ask(i):
    ...     return AIMessage("", tool_calls=[{"name": "test", "args": {}, "id": f"c{i}"}])
    >>> det, results, rungs = {}, [], []
    >>> for i in range(4):
    ...     obs = observe(det, ask(i), results, LoopDetection())
    ...     rungs.append([w.layer for w in obs.warnings] or (obs.stop or {}).get("layer"))
    ...     det, results = obs.state, [ToolMessage("1 failed", tool_call_id=f"c{i}")]
    >>> rungs
    [None, None, ['no_progress'], 'no_progress']
    >>> content_hash("Ran 4 tests in 0.012s") == content_hash("Ran 4 tests in 0.398s")
    True
    >>> text_loop("Wait, I replaced it with itself. " * 12), text_loop("a b c d e f " * 3)
    (True, False)
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import Any, NotRequired

from langchain_core.messages import AIMessage, ToolMessage
from typing_extensions import TypedDict

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import call_label, clip, digest, is_blocked, is_cut, reply_text
from langgraph_loop.core.stop import Guard, guard
from langgraph_loop.engine.normalize import VOLATILE, normalize
from langgraph_loop.engine.text_loop import SHORTEST_LOOP, text_loop

__all__ = ["RANK", "TEXT_CUTS", "VOLATILE", "CallRecord", "DetectorState", "Finding", "LoopWarning",
           "Observation", "Response", "SignedCall", "absorb", "args_text", "block_text",
           "call_signature", "canonical_args", "content_hash", "cycle_of", "is_empty", "normalize", "observe",
           "path_keys", "push", "response_sig", "response_signature", "result_text", "same_result", "scaled",
           "sign_calls", "stop_guard", "text_cut", "text_cut_text", "text_loop_text"]


# --- results and calls: a result's identity, the paths a call names, signatures ---

HASH_LEN = 8  # hex digits: no collision in practice among the window's few dozen results

_MARKUP = re.compile(r"<[^>\n]{1,40}>")
_BLANK = re.compile(r"\s*(?:" + _MARKUP.pattern + r"\s*)*")
_PATH = re.compile(r"(?:[\w.-]*/)+[\w.-]*\w|\b[\w-]+\.(?:py|pyi|java|kt|js|ts|tsx|jsx|go|rs|rb|c|h"
                   r"|cc|cpp|hpp|cs|php|sh|xml|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|html|css"
                   r"|gradle|properties|lock|sql|csv)\b")


def _without_ids(value: Any) -> Any:
    """Content blocks (dicts in a list) without their ``id``, at any depth."""
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    return value


def result_text(content: Any) -> str:
    """A ToolMessage's content as text: a string as it is, blocks as JSON without their ids."""
    if isinstance(content, str):
        return content
    return json.dumps(_without_ids(content), sort_keys=True, default=str, ensure_ascii=False)


def content_hash(content: Any, *, normalized: bool = True) -> str:
    """A short hash of a tool result, equal for the same result once normalized (memoized)."""
    text = content if isinstance(content, str) else result_text(content)
    if not normalized:
        return digest(text, HASH_LEN)
    key = text if len(text) <= MEMO_CHARS else (len(text), hash(text), text[:64], text[-64:])
    with _MEMO_LOCK:
        found = _MEMO.get(key)
        if found is not None:
            _MEMO.move_to_end(key)
            return found
    found = digest(normalize(text), HASH_LEN)
    with _MEMO_LOCK:
        _MEMO[key] = found
        if len(_MEMO) > MEMO_RESULTS:
            _MEMO.popitem(last=False)
    return found


MEMO_CHARS, MEMO_RESULTS = 4096, 256
_MEMO: OrderedDict[str | tuple[int, int, str, str], str] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def same_result(a: str, b: str, normalized: bool = True) -> bool:
    """Equal texts, or (``normalized``) equal once their volatile parts are replaced; normalized
    only when the line counts match (normalization keeps them), so distinct large outputs never are."""
    if a is b or a == b:
        return True
    return normalized and a.count("\n") == b.count("\n") and content_hash(a) == content_hash(b)


def is_empty(content: Any) -> bool:
    """No content: nothing but markup, whitespace and a zero exit status."""
    text = content if isinstance(content, str) else "" if not content else result_text(content)
    if text and text[0] not in "<0" and not text[0].isspace():  # content from its first character
        return False
    # what ``_MARKUP.sub("", text).strip()`` drops before the first content (``_BLANK`` matches
    # everywhere, maybe empty): a large result is read no further than its first line of content
    end = _BLANK.match(text).end()  # type: ignore[union-attr]
    if end < len(text) and text[end] == "0":
        end = _BLANK.match(text, end + 1).end()  # type: ignore[union-attr]
    return end == len(text)


def path_keys(args: Any, *, dumped: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The path-like tokens in a call's arguments and the folders holding them, hashed short."""
    text = (_dump(args) if dumped is None else dumped).replace("\\n", "\n")
    if "/" not in text and "." not in text:  # every path token holds one (``_PATH``)
        return (), ()
    tokens = {m.strip("./") for m in _PATH.findall(text) if m.strip("./")}
    if not tokens:
        return (), ()
    folders = {token.rsplit("/", k)[0] for token in tokens for k in range(1, token.count("/") + 1)}
    return (tuple(sorted({digest(token, HASH_LEN) for token in tokens})),
            tuple(sorted({digest(folder, HASH_LEN) for folder in folders if folder})))


SIG_LEN = 8  # hex digits: no collision in practice among the window's few dozen calls
LABEL_ARGS = 100
_JSON: dict[str, Any] = {"sort_keys": True, "default": str, "separators": (",", ":"), "ensure_ascii": False}


def canonical_args(args: Any) -> Any:
    """Arguments as a JSON value: a JSON string is parsed, anything else kept."""
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _apply_policy(name: str, value: Any, config: LoopDetection | None) -> Any:
    policy = config.policy(name) if config is not None and config.calls.arg_policies else None
    if policy is None or not isinstance(value, dict):
        return value
    if policy.key is not None:
        return {"__key__": policy.key(value)}
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


_ENCODER = json.JSONEncoder(**_JSON)  # json.dumps without an encoder built per call


def _dump(value: Any) -> str:
    """Canonical JSON of any value (keys sorted; other objects as ``str``), for hashing."""
    try:
        return _ENCODER.encode(value)
    except TypeError:  # keys of mixed or non-JSON types
        return _ENCODER.encode(_str_keys(value))


def call_signature(name: str | None, args: Any, config: LoopDetection | None = None, *,
                   malformed: bool = False, dumped: str | None = None) -> str:
    """Tool name + canonical JSON of its (policy-filtered) arguments (``dumped``: theirs), hashed."""
    value = canonical_args(args)
    if malformed:
        return digest(_dump([name, {"__malformed__": value if isinstance(value, str) else _dump(value)}]),
                      SIG_LEN)
    kept = _apply_policy(str(name), value, config)
    if kept is value and dumped is not None:  # = _dump([name, value])
        named = encode_basestring(name) if type(name) is str else _ENCODER.encode(name)
        return digest(f"[{named},{dumped}]", SIG_LEN)
    return digest(_dump([name, kept]), SIG_LEN)


def args_text(args: Any, *, malformed: bool = False, dumped: str | None = None) -> str:
    """The arguments as short compact JSON, for warning texts and records."""
    value = canonical_args(args)
    text = clip(value if isinstance(value, str) else dumped if dumped is not None else _dump(value),
                LABEL_ARGS)
    return f"<invalid JSON arguments: {text}>" if malformed else text


def response_signature(sigs: Sequence[str]) -> str:
    """The multiset of call signatures, hashed (order of parallel calls ignored)."""
    return digest("|".join(sorted(sigs)), SIG_LEN)


@dataclass(frozen=True)
class SignedCall:
    """One call of a response with its signature and the paths its arguments name."""

    id: str
    sig: str
    name: str
    args: str
    malformed: bool = False
    paths: tuple[str, ...] = field(default=(), compare=False)
    dirs: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        """``tool(args)``, as warnings show it."""
        return call_label(self.name, self.args)


def sign_calls(ai: AIMessage, config: LoopDetection | None = None) -> list[SignedCall]:
    """Every call of a response (valid, then malformed) with its signature."""
    paths = config is not None and config.no_progress.path_excuse
    out = []
    for c in ai.tool_calls:
        args = canonical_args(c["args"])
        dumped = _dump(args)
        named, folders = path_keys(args, dumped=dumped) if paths else ((), ())
        out.append(SignedCall(str(c.get("id")), call_signature(c["name"], args, config, dumped=dumped),
                              c["name"], args_text(args, dumped=dumped), paths=named, dirs=folders))
    for bad in ai.invalid_tool_calls:
        name = bad.get("name") or "?"
        raw = bad.get("args") or ""
        out.append(SignedCall(str(bad.get("id")), call_signature(name, raw, malformed=True),
                              name, args_text(raw, malformed=True), malformed=True))
    return out


# --- The detector's state, and how results update it ---

class Response(TypedDict):
    """One tool-calling response in the window."""

    calls: list[str]  # its call signatures, sorted (a multiset: parallel calls in any order)
    sig: NotRequired[str]  # the response signature, stored only for several calls (one: its own)


class CallRecord(TypedDict, total=False):
    """One call signature remembered (fields at their default are left out)."""

    tool: str
    args: str  # short arguments text for warnings (kept while it may be needed)
    last: int  # the run's call number of its latest request
    result: str  # its last result's text (absent until it has one)
    same: int  # its own executions in a row that returned ``result`` (others never reset it)
    since: int  # the response (of the run, 1-based) whose execution of it began these ``same`` results
    moved: bool  # its last result changed, or came after a call touching its paths (the repeat layer relaxes)
    empty: bool  # its last result had no content
    failed: bool  # its last result was an error
    warned: bool  # warned about during this run of identical results
    touched: bool  # a call touching its paths came since its last request: its next repeat is not judged
    refused: bool  # its last request was blocked: asking for it again stops
    between: bool  # other calls were requested between its latest request and the one before
    at: int  # the response (of the run, 1-based) of its latest request
    unchanged: bool  # since its previous request: no call new to the run (read-only aside), no result moved
    paths: list[str]
    dirs: list[str]


class DetectorState(TypedDict, total=False):
    """The detector's state: ``window`` the last tool-calling responses; ``n``/``responses`` count
    calls and responses; ``reply``/``same_reply`` the newest response signature and its run;
    ``warned`` keys warned about; ``pending`` call id → signature until its results arrive."""

    window: list[Response]
    calls: dict[str, CallRecord]  # per signature, in order of latest request (``push`` prunes the oldest)
    n: int
    responses: int
    changed_at: int  # the number of the latest response whose results moved (a call's own result changed)
    fresh_at: int  # the number of the latest response holding a call new to the run (read-only tools aside)
    reply: str
    same_reply: int
    warned: list[str]
    pending: dict[str, str]
    cuts: int  # replies of this run cut while streaming because their text looped
    drift: dict[str, list[Any]]
    """Per tool: ``[result, arguments text, results in a row, response it began at, signature]``."""


def response_sig(entry: Response) -> str:
    """The response signature of a window entry."""
    return entry.get("sig") or entry["calls"][0]


_KEPT = ("tool", "args", "last", "at", "paths", "dirs")


def absorb(detector: Mapping[str, Any], results: Sequence[ToolMessage],
           config: LoopDetection) -> DetectorState:
    """Record the results of the newest response's calls (``pending``). A blocked call was not
    run: nothing is learnt, and asking for it again stops."""
    det: DetectorState = dict(detector)  # type: ignore[assignment]
    pending = det.get("pending") or {}
    if not pending:
        return det
    calls = dict(det.get("calls") or {})
    responses, moved, fresh = det.get("responses", 0), False, False
    for message in results:
        sig = pending.get(message.tool_call_id)
        if sig is None:
            continue
        old: CallRecord = calls.get(sig) or {"tool": message.name or "?"}
        if is_blocked(message):
            calls[sig] = {**old, "refused": True}
            continue
        content = message.content
        result = content if isinstance(content, str) else result_text(content)
        repeated = "result" in old and same_result(old["result"], result, config.calls.normalize_results)
        fresh = fresh or _done_something(old, content, result, calls, config)
        same = old.get("same", 0) + 1 if repeated else 1
        if repeated and old.get("touched"):
            same = old.get("same", 1)  # a call touching its paths ran in between: no evidence
        record: CallRecord = {k: old[k] for k in _KEPT if k in old}  # type: ignore[assignment, literal-required]
        record["result"], record["same"] = result, same
        record["since"] = old.get("since", responses) if repeated else responses
        if ("result" in old and not repeated) or old.get("touched"):
            record["moved"] = True
        if is_empty(message.content):
            record["empty"] = True
        if message.status == "error":
            record["failed"] = True
        if repeated and old.get("warned"):
            record["warned"] = True  # one warning per run of identical results
        moved = moved or ("result" in old and not repeated)
        calls[sig] = record
        if "drift" in config.layers and not record.get("empty"):
            drift = det["drift"] = dict(det.get("drift") or {})
            drift[record["tool"]] = _drifted(drift.get(record["tool"]), result, sig,
                                             record.get("args", ""), responses, config)
    if moved:
        det["changed_at"] = responses
    if fresh:
        det["fresh_at"] = responses
    det["calls"], det["pending"] = calls, {}
    return det


def _done_something(old: CallRecord, content: Any, result: str,
                    calls: Mapping[str, CallRecord], config: LoopDetection) -> bool:
    """Does this result show something was done that may change what other calls see: the
    first result of a call new to the run, not read-only, that is empty (a ``sed -i``) or new?"""
    if "result" in old or old.get("tool") in config.calls.read_only_tools:
        return False
    normalized = config.calls.normalize_results
    return is_empty(content) or not any("result" in r and same_result(r["result"], result, normalized)
                                        for r in calls.values())


DRIFT_SIMILARITY = 0.6  # difflib's ratio of two calls' arguments from which the second is a near-repeat


def _drifted(entry: list[Any] | None, result: str, sig: str, args: str, responses: int,
             config: LoopDetection) -> list[Any]:
    """A tool's drift entry after one more result: the run grows while the same result comes
    back to another call whose arguments changed a little; anything else starts a new one."""
    normalized = config.calls.normalize_results
    if (entry is not None and entry[4] != sig and same_result(entry[0], result, normalized)
            and difflib.SequenceMatcher(None, entry[1], args).ratio() >= DRIFT_SIMILARITY):
        return [result, args, entry[2] + 1, entry[3], sig]
    return [result, args, 1, responses, sig]


def _touch(records: dict[str, CallRecord], call: SignedCall) -> None:
    """Mark every other remembered call this one touches (in place): it names one of their
    paths, a folder holding one, or a path inside one of their folders."""
    mine = set(call.paths)
    for sig, record in records.items():
        theirs = record.get("paths", ())
        if sig != call.sig and "result" in record and not (
                mine.isdisjoint(theirs) and mine.isdisjoint(record.get("dirs", ()))
                and set(call.dirs).isdisjoint(theirs)):
            records[sig] = {**record, "touched": True}


def push(det: DetectorState, calls: Sequence[SignedCall], config: LoopDetection) -> DetectorState:
    """Count the response's calls in; prune the records to what the windows hold."""
    sigs = [c.sig for c in calls]
    entry: Response = {"calls": sorted(sigs)}
    if len(sigs) != 1:
        entry["sig"] = response_signature(sigs)
    entries = [*(det.get("window") or []), entry][-config.calls.window:]
    records = dict(det.get("calls") or {})
    count, at, changed_at = det.get("n", 0), det.get("responses", 0) + 1, det.get("changed_at", 0)
    fresh_at = det.get("fresh_at", 0)
    for c in calls:
        count += 1
        old: CallRecord = records.pop(c.sig) if c.sig in records else {"tool": c.name}  # back in last
        if c.paths and c.name not in config.calls.read_only_tools:
            _touch(records, c)
        record: CallRecord = {**old, "tool": c.name, "args": c.args, "last": count, "at": at}
        if "last" in old:
            record["between"] = count - old["last"] > 1
        if "at" in old:  # since its previous request: no new action, no other result moved
            record["unchanged"] = changed_at < old["at"] and fresh_at <= old["at"]
        if c.paths:
            record["paths"], record["dirs"] = list(c.paths), list(c.dirs)
        records[c.sig] = record
    floor = count - config.no_progress.call_window  # older: kept only while in the window
    stale = []  # the records are in the order of their latest request: the old ones come first
    for sig, rec in records.items():
        if rec.get("last", 0) > floor:
            break
        stale.append(sig)
    inside = {s for e in entries for s in e["calls"]}
    for sig in stale:
        if sig not in inside:
            del records[sig]
    reply = response_sig(entry)
    same_reply = det.get("same_reply", 0) + 1 if det.get("reply") == reply else 1
    warned = det.get("warned") or []
    if warned:
        responses = {response_sig(e) for e in entries}
        tools = {r["tool"] for r in records.values()}
        warned = [k for k in warned if _relevant(k, inside, responses, tools)]
    return {**det, "window": entries, "calls": records, "warned": warned, "n": count,
            "responses": det.get("responses", 0) + 1, "reply": reply, "same_reply": same_reply,
            "pending": {c.id: c.sig for c in calls}}


def _relevant(key: str, calls: set[str], responses: set[str], tools: set[str]) -> bool:
    kind, _, ident = key.partition(":")
    if kind == "call":
        return ident in calls
    if kind == "cycle":
        return any(r in responses for r in ident.split("+"))
    return ident in tools

# --- The layers and the ladder ---

RANK = ("no_progress", "drift", "cycle", "repeat", "same_reply", "per_tool", "text")


@dataclass
class Observation:
    """What the detector concluded about one model response."""

    state: DetectorState
    warnings: list[LoopWarning] = field(default_factory=list)
    stop: Guard | None = None
    blocks: dict[str, str] = field(default_factory=dict)  # call id → the error result that answers it
    finding: Finding | None = None  # the finding behind the stop


def scaled(warn: int, stop: int, factor: int, cap: int) -> tuple[int, int]:
    """Thresholds for repetition that makes progress: ``factor`` times higher, capped."""
    high_stop = max(stop, min(stop * factor, cap))
    return max(warn, min(warn * factor, high_stop - 1)), high_stop


def cycle_of(seq: Sequence[str]) -> tuple[int, int]:
    """``(period, repetitions)`` of the repeating block the sequence ends in, or (0, 0); a
    started round counts, a block of one repeated element is no cycle."""
    period, _, reps = _cycle_run(seq)
    return period, reps


def _cycle_run(seq: Sequence[str]) -> tuple[int, int, int]:
    """The period (2-4) with the most repetitions, the length of its periodic tail, the repetitions."""
    best = (0, 0, 0)
    for period in (2, 3, 4):
        block = list(seq[-period:])
        if len(seq) <= period or any(_periodic(block, d) for d in range(1, period)):
            continue
        run, i = 0, len(seq) - 1
        while i - period >= 0 and seq[i] == seq[i - period]:
            run, i = run + 1, i - 1
        reps = -(-(run + period) // period)
        if run and reps > best[2]:
            best = (period, run + period, reps)
    return best


def _periodic(block: Sequence[str], d: int) -> bool:
    return len(block) % d == 0 and all(block[i] == block[i - d] for i in range(d, len(block)))


def _label(det: DetectorState, sig: str) -> str:
    rec = det["calls"][sig]
    return call_label(rec["tool"], rec.get("args", ""))


def _cycle(det: DetectorState, config: LoopDetection) -> list[Finding]:
    win = det["window"]
    period, length, reps = _cycle_run([response_sig(e) for e in win])
    if not period:
        return []
    block = win[len(win) - length :][:period]  # the first round, in the model's order
    latest = det.get("changed_at")  # progressing: a result moved in the last round
    progressing = latest is not None and latest >= det.get("responses", 0) - period
    warn, stop = (config.cycle.warn_after, config.cycle.stop_after)
    if progressing:
        warn, stop = scaled(warn, stop, config.cycle.progress_factor, config.calls.window // period)
    if reps < warn:
        return []
    rot = [response_sig(e) for e in block]
    first = min(range(period), key=lambda i: rot[i:] + rot[:i])
    key = "cycle:" + "+".join(rot[first:] + rot[:first])
    steps = [[_label(det, s) for s in e["calls"]] for e in block]
    sigs = tuple(s for e in block for s in e["calls"])
    return [Finding(layer="cycle", rung="stop" if reps >= stop else "warn", key=key, count=reps,
                    threshold=stop, sigs=sigs,
                    tool=", ".join(sorted({det["calls"][s]["tool"] for s in sigs})),
                    calls=tuple(" + ".join(step) for step in steps), seen=len(win),
                    progressing=progressing, since=det.get("responses", 0) - length + 1)]


def _call_finding(det: DetectorState, layer: str, sig: str, rung: str, count: int,
                  threshold: int, ids: tuple[str, ...], *, progressing: bool = False,
                  since: int = 0) -> Finding:
    rec = det["calls"][sig]
    return Finding(layer=layer, rung=rung, key=f"call:{sig}", count=count, threshold=threshold,
                   sigs=(sig,), tool=rec["tool"], args=rec.get("args", ""), calls=(_label(det, sig),),
                   seen=len(det["window"]), progressing=progressing, since=since, ids=ids,
                   refused=bool(rec.get("refused")),
                   unchanged=bool(rec.get("between") and rec.get("unchanged")))


def _thresholds(rec: CallRecord, config: LoopDetection) -> tuple[int, int]:
    """The no-progress warn and stop counts: its tool's own, at least ``no_content_after`` if empty."""
    policy = config.policy(rec["tool"]) if config.calls.arg_policies else None
    warn = (policy.warn_after if policy is not None and policy.warn_after is not None
            else config.no_progress.warn_after)
    stop = (policy.stop_after if policy is not None and policy.stop_after is not None
            else config.no_progress.stop_after)
    if rec.get("empty"):
        least = config.no_progress.no_content_after
        return max(warn, least), max(stop, least)
    return warn, stop


def _blocks(rec: CallRecord, config: LoopDetection) -> bool:
    """Is this stuck call refused, not stopped (``block_only_interleaved``: if something changed since)?"""
    if not config.no_progress.block:
        return False
    return not config.no_progress.block_only_interleaved or not rec.get("unchanged")


def _no_progress(det: DetectorState, asked: Mapping[str, tuple[str, ...]],
                 config: LoopDetection) -> list[Finding]:
    """Calls asked for again after their own identical results (``docs/loop-detection.md``)."""
    out = []
    for sig, ids in asked.items():
        rec = det["calls"][sig]
        if rec.get("touched") or "result" not in rec:
            continue  # new, or a call touching its paths ran since: it may read differently
        same = rec.get("same", 0)
        warn, stop = _thresholds(rec, config)
        if rec.get("refused"):
            if config.no_progress.block and not rec.get("unchanged"):
                continue  # refused, then something was done as the refusal asked: it runs again
            rung = "stop"
        elif same >= stop:
            rung = "block" if _blocks(rec, config) else "stop"
        elif same >= warn and not rec.get("warned"):
            rung = "warn"
        else:
            continue
        out.append(_call_finding(det, "no_progress", sig, rung, same, stop, ids,
                                 since=rec.get("since", 0)))
    return out


def _repeat(det: DetectorState, asked: Mapping[str, tuple[str, ...]],
            config: LoopDetection) -> list[Finding]:
    """Calls present in many responses of the window (relaxed while their results move)."""
    out = []
    win = det["window"]
    for sig, ids in asked.items():
        rec = det["calls"][sig]
        if "between" not in rec and config.repeat.warn_after > 1:
            continue  # asked for the first time (since its record began): one response holds it
        where = [i for i, e in enumerate(win) if sig in e["calls"]]
        progressing = bool(rec.get("moved"))
        policy = config.policy(rec["tool"]) if config.calls.arg_policies else None
        if progressing and policy is not None and policy.polls:
            continue  # a poll whose result moves is waiting, not looping
        warn, stop = _repeat_thresholds(rec, config)
        if progressing:
            warn, stop = scaled(warn, stop, config.repeat.progress_factor, config.calls.window)
        if len(where) < warn:
            continue
        rung = "warn"
        if len(where) >= stop:
            rung = "block" if config.repeat.block and not rec.get("refused") else "stop"
        out.append(_call_finding(det, "repeat", sig, rung, len(where), stop, ids,
                                 progressing=progressing,
                                 since=det.get("responses", 0) - len(win) + where[0] + 1))
    return out


def _repeat_thresholds(rec: CallRecord, config: LoopDetection) -> tuple[int, int]:
    """``warn_after``/``stop_after``, raised to a tool's own thresholds (plus one: requests)."""
    policy = config.policy(rec["tool"]) if config.calls.arg_policies else None
    warn, stop = config.repeat.warn_after, config.repeat.stop_after
    if policy is not None and policy.warn_after is not None:
        warn = max(warn, policy.warn_after + 1)
    if policy is not None and policy.stop_after is not None:
        stop = max(stop, policy.stop_after + 1)
    return warn, max(stop, warn + 1)


def _drift(det: DetectorState, calls: Sequence[SignedCall], config: LoopDetection) -> list[Finding]:
    """A tool asked for again after the same result to calls whose arguments changed a little."""
    out = []
    for name in dict.fromkeys(c.name for c in calls):
        entry = (det.get("drift") or {}).get(name)
        if entry is None or entry[2] < config.drift.warn_after:
            continue
        mine = [c for c in calls if c.name == name]
        rung = "stop" if entry[2] >= config.drift.stop_after else "warn"
        out.append(Finding(layer="drift", rung=rung, key=f"drift:{name}", count=entry[2],
                           threshold=config.drift.stop_after, tool=name, args=mine[0].args,
                           calls=tuple(c.label for c in mine), seen=len(det["window"]),
                           since=entry[3], ids=tuple(c.id for c in mine)))
    return out


def _same_reply(det: DetectorState, calls: Sequence[SignedCall],
                config: LoopDetection) -> list[Finding]:
    limit, count = config.same_reply.stop_after, det.get("same_reply", 0)
    if limit is None or count < limit or (config.calls.arg_policies and all(
            (p := config.policy(c.name)) is not None and p.polls and det["calls"][c.sig].get("moved")
            for c in calls)):
        return []  # (a reply of polls whose results move is waiting, not a runaway)
    return [Finding(layer="same_reply", rung="stop", key=f"reply:{det.get('reply')}", count=count,
                    threshold=limit, sigs=tuple(c.sig for c in calls),
                    tool=", ".join(sorted({c.name for c in calls})),
                    calls=tuple(c.label for c in calls), seen=len(det["window"]),
                    since=det.get("responses", 0) - count + 1)]


def _per_tool(det: DetectorState, calls: Sequence[SignedCall],
              config: LoopDetection) -> list[Finding]:
    out: list[Finding] = []
    for name in dict.fromkeys(c.name for c in calls):
        cap = config.calls.per_tool.get(name)
        if cap is None:
            continue
        mine = [s for e in det["window"] for s in e["calls"] if det["calls"][s]["tool"] == name]
        if len(mine) < cap:
            continue
        refused = any(det["calls"][s].get("refused") for s in mine)
        rung = "warn" if len(mine) == cap else (
            "block" if config.calls.block_per_tool and not refused else "stop")
        out.append(Finding(layer="per_tool", rung=rung, key=f"tool:{name}", count=len(mine),
                           threshold=cap, tool=name, seen=len(det["window"]),
                           ids=tuple(c.id for c in calls if c.name == name)))
    return out


# --- the ladder --------------------------------------------------------------------------------

def _warnings(findings: Sequence[Finding], warned: list[str],
              config: LoopDetection) -> list[LoopWarning]:
    """One warning per layer, for findings not warned yet; marks them warned (in place)."""
    out = []
    for layer in RANK:
        fresh = [f for f in findings if f.layer == layer and f.rung == "warn"
                 and (layer == "no_progress" or f.key not in warned)]
        if not fresh:
            continue
        for f in fresh:
            warned.append(f.key)
            if f.layer == "cycle":  # the cycle's calls are covered by this warning
                warned.extend(k for k in (f"call:{s}" for s in f.sigs) if k not in warned)
        out.append(LoopWarning("|".join(f.key for f in fresh), layer, _TEXTS[layer](fresh, config.blocking),
                               tuple(c for f in fresh for c in (f.calls or (f.tool,))),
                               max(f.count for f in fresh)))
    return out


def observe(detector: Mapping[str, Any], ai: AIMessage, results: Sequence[ToolMessage],
            config: LoopDetection, allowed: Mapping[str, int] | None = None) -> Observation:
    """Absorb the previous round's ``results``, then run the layers on the reply ``ai``
    (``detector`` is never mutated; ``allowed``: finding key → the count a person let go on)."""
    det = absorb(detector or {}, results, config)
    if is_cut(ai):  # cut while it streamed (no calls left): a notice, or the stop
        cuts = det.get("cuts", 0) + 1
        warnings, stop = text_cut(cuts)
        state: DetectorState = {**det, "cuts": cuts}
        return Observation(state=state, warnings=warnings, stop=stop)
    text = reply_text(ai.content, ai.additional_kwargs) if "text" in config.layers else ""
    looping = len(text) >= SHORTEST_LOOP and text_loop(text)
    warnings = [LoopWarning("text", "text", text_loop_text(), (), 1)] if looping else []
    calls = sign_calls(ai, config)
    if not calls:
        return Observation(state=det, warnings=warnings)
    det = push(det, calls, config)
    asked: dict[str, tuple[str, ...]] = {}
    for c in calls:
        asked[c.sig] = (*asked.get(c.sig, ()), c.id)
    on = config.layers
    findings = [*(_no_progress(det, asked, config) if "no_progress" in on else ()),
                *(_drift(det, calls, config) if "drift" in on else ()),
                *(_cycle(det, config) if "cycle" in on else ()),
                *(_repeat(det, asked, config) if "repeat" in on else ()),
                *(_same_reply(det, calls, config) if "same_reply" in on else ()),
                *(_per_tool(det, calls, config) if "per_tool" in on else ())]
    if allowed:  # a loop a person let go on (``continue``) is judged again a ladder's length later
        findings = [f for f in findings if f.key not in allowed or f.count >= allowed[f.key] + f.threshold]
    if not findings:  # the usual reply: nothing to warn about, block or stop
        return Observation(state=det, warnings=warnings)
    warned = list(det.get("warned") or [])
    # the window layers block or stop only what they warned about first (a relaxed count turning
    # strict would otherwise skip the warning)
    acting = [f for f in findings
              if f.rung != "warn" and (f.layer not in ("repeat", "cycle") or f.key in warned)]
    warnings += _warnings(findings, warned, config)
    warns = [f.sigs[0] for f in findings if f.layer == "no_progress" and f.rung == "warn"]
    if warns:  # one no-progress warning per run of identical results
        records = det["calls"] = dict(det["calls"])
        for sig in warns:
            records[sig] = {**records[sig], "warned": True}
    det["warned"] = warned
    stops = [f for f in acting if f.rung == "stop"]
    if stops:
        first = min(stops, key=lambda f: (RANK.index(f.layer), -f.count))
        return Observation(state=det, stop=stop_guard(first), finding=first)
    blocks = {i: block_text(f) for f in acting for i in f.ids}
    return Observation(state=det, warnings=warnings, blocks=blocks)

# --- Findings and what the loop detector says ---

TEXT_CUTS = 2  # replies of one run cut while streaming (their text looped) that stop the run


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One layer's conclusion: its rung, on what, how often, against which limit."""

    layer: str
    rung: str  # ``warn``, ``block`` or ``stop``
    key: str  # what it is about (``call:<sig>``, ``cycle:<sigs>``, ``reply:<sig>``, ``tool:<name>``)
    count: int
    threshold: int
    tool: str
    seen: int  # tool-using responses in the window
    sigs: tuple[str, ...] = ()
    args: str | None = None
    calls: tuple[str, ...] = ()  # the calls as warnings show them (``tool(args)``)
    progressing: bool = False
    since: int = 0  # the response of the run (1-based, tool-calling responses) where the loop began
    ids: tuple[str, ...] = ()  # the call ids of the reply this finding is about (the ones a block answers)
    refused: bool = False  # the call was blocked before: this request asks for it again
    unchanged: bool = False  # other calls ran since its previous request and no call's own result moved


@dataclass(frozen=True)
class LoopWarning:
    """A warning to queue: one per layer and response, naming every offending call."""

    key: str
    layer: str
    text: str
    calls: tuple[str, ...]
    count: int


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _items(findings: Sequence[Finding], describe: Any) -> str:
    if len(findings) == 1:
        return str(describe(findings[0]))
    return "\n" + "\n".join(f"- {describe(f)}" for f in findings) + "\n"


def _next(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    if findings[0].layer in blocks:
        return "If you ask for it again it will not be run."
    return "If you keep calling it, the run will be stopped."


def _repeat_text(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    limit = f"At {findings[0].threshold} such calls " + (
        "they will not be run." if "repeat" in blocks else "the run will be stopped.")
    if all(f.progressing for f in findings):
        what = _items(findings, lambda f: f"{f.calls[0]} {_times(f.count)} in your last "
                                          f"{f.seen} tool-using turns")
        return (f"Loop warning: you have called {what}. The results are still changing, but "
                "this is a lot of repetition. If you are waiting for something to finish, stop "
                "polling and report where it stands; otherwise use what you already have and "
                f"give your final answer. {limit}")
    what = _items(findings, lambda f: f"{f.calls[0]} with the same arguments {_times(f.count)} "
                                      f"in your last {f.seen} tool-using turns")
    return (f"Loop warning: you have called {what}. Repeating a call will not tell you anything "
            "new. Do not call it again with these arguments: use the result you already have, "
            f"change the arguments or try a different approach, or give your final answer. {limit}")


def _no_progress_text(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    # Decided when the call is asked for again, read after that call ran: say what was seen before.
    what = _items(findings, lambda f: f"{f.calls[0]} returned the same result {_times(f.count)} "
                                      "in a row before you asked for it again")
    return (f"Loop warning: {what}, so calling it again will most likely return the same "
            "thing. Do not call it again with these arguments unless you changed what it "
            "depends on: use that result, try a different tool or different arguments, or give "
            f"your final answer. {_next(findings, blocks)}")


def _cycle_text(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    what = _items(findings, lambda f: f"the same {len(f.calls)} steps ("
                                      + " → ".join(f.calls) + f") have repeated {f.count} times "
                                      "in a row")
    return (f"Loop warning: you are going in circles: {what}. Break the cycle: decide with the "
            "results you already have, try something different, or give your final answer. "
            "If the cycle continues, the run will be stopped.")


def _per_tool_text(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    what = _items(findings, lambda f: f"{f.tool} {_times(f.count)} in your last {f.seen} "
                                      "tool-using turns, which is its limit")
    then = ("will not be run" if "per_tool" in blocks else "will stop the run")
    return (f"Loop warning: you have used {what}. Any further call to it {then}: "
            "finish with the results you already have.")


def _drift_text(findings: Sequence[Finding], blocks: Sequence[str]) -> str:
    what = _items(findings, lambda f: f"{f.tool} returned the same result the last {f.count} times,"
                                      " although its arguments changed each time")
    return (f"Loop warning: {what}. Changing the command a little will not change the outcome: "
            "use the result you have, try a different approach, or give your final answer. "
            "If you keep calling it, the run will be stopped.")


_TEXTS = {"repeat": _repeat_text, "no_progress": _no_progress_text, "cycle": _cycle_text,
          "per_tool": _per_tool_text, "drift": _drift_text}


def text_loop_text() -> str:
    """The warning about a reply whose text repeats itself."""
    return ("Loop warning: your last reply repeats the same text over and over. Stop and "
            "look at what you already know, then take one concrete step or give your final "
            "answer.")


def text_cut_text() -> str:
    """The notice after a reply was cut while it streamed (``graph/engine/text_loop.py``)."""
    return ("Loop warning: your last reply was cut off because it kept repeating the same text. "
            "Do not repeat it: look at what you already know, then take one concrete step or "
            "give your final answer. If your next reply repeats itself too, the run will be "
            "stopped.")


def text_cut(cuts: int) -> tuple[list[LoopWarning], Guard | None]:
    """The run's ``cuts``-th reply cut while streaming: the notice, or the stop at ``TEXT_CUTS``."""
    if cuts >= TEXT_CUTS:
        return [], guard("loop_detector", "loop_detected", layer="text", count=cuts, threshold=TEXT_CUTS,
                         rung="stop", detail=(f"the loop detector's text layer fired: {cuts} replies of "
                                              "this run were cut while streaming because their text "
                                              f"kept repeating (limit {TEXT_CUTS})"))
    return [LoopWarning("text_cut", "text", text_cut_text(), (), cuts)], None


def block_text(f: Finding) -> str:
    """The error result of a blocked call (not run; the run goes on)."""
    if f.layer == "no_progress":
        why = (f"{f.calls[0]} returned the same result the last {f.count} times you called it, "
               "so running it again will not tell you anything new. Change something first "
               "(what it depends on, or its arguments), or try a different approach.")
    elif f.layer == "per_tool":
        why = (f"{f.tool} was called {f.count} times in your last {f.seen} tool-using turns, "
               f"over its limit of {f.threshold}. Finish with the results you already have.")
    else:
        why = (f"{f.calls[0]} was requested {f.count} times in your last {f.seen} tool-using "
               "turns. Use the result you already have, or try a different approach.")
    return f"Error: not run: {why} Asking for this exact call again will stop the run."


def _detail(f: Finding) -> str:
    if f.layer == "cycle":
        return (f"the loop detector's cycle layer fired: the steps {' → '.join(f.calls)} "
                f"repeated {f.count} times in a row (limit {f.threshold})")
    if f.layer == "no_progress":
        refused = ", and after it was refused once" if f.refused else ""
        unchanged = (", and since its previous request no other call's result changed"
                     if f.unchanged and not f.refused else "")
        return (f"the loop detector's no-progress layer fired: {f.calls[0]} was requested "
                f"again after returning the same result {f.count} times{refused}{unchanged} "
                f"(limit {f.threshold})")
    if f.layer == "per_tool":
        return (f"the loop detector's per-tool cap fired: {f.tool} was called {f.count} times "
                f"in the last {f.seen} tool-using turns (cap {f.threshold})")
    if f.layer == "drift":
        return (f"the loop detector's drift layer fired: {f.tool} returned the same result {f.count}"
                f" times in a row to calls whose arguments changed a little each time (limit"
                f" {f.threshold}; the last: {f.calls[0]})")
    if f.layer == "same_reply":
        return (f"the loop detector's same-reply layer fired: the same calls ({', '.join(f.calls)})"
                f" were requested {f.count} times in a row (limit {f.threshold})")
    changing = ", although its results were changing" if f.progressing else ""
    return (f"the loop detector's repeat layer fired: the same call {f.calls[0]} was requested "
            f"{f.count} times in the last {f.seen} tool-using turns{changing} "
            f"(limit {f.threshold})")


def stop_guard(f: Finding) -> Guard:
    """The guard of a loop stop (``state["stop_guard"]`` and the iteration record's ``guard``)."""
    return guard("loop_detector", "loop_detected", layer=f.layer, tool=f.tool, args=f.args,
                 calls=list(f.calls), count=f.count, threshold=f.threshold, turns=f.seen,
                 progressing=f.progressing, rung="stop", began={"response": f.since},
                 detail=_detail(f))
