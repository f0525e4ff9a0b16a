"""Loop detection over call signatures and their results (pure, O(window) per step).

``observe(detector, ai, results, config)`` takes the detector's state (a small dict
kept in graph state under ``detector``), the new AIMessage and the ToolMessages of
the previous round, and returns the new detector state, the warnings to queue and
a stop guard (or None). Four layers look at the last ``window`` responses that
called tools; their findings are ordered cycle, no progress, repeat, per tool:

- **cycle**: the sequence of response signatures ends in a repeating block of
  period 2-4 (A,B,A,B,A...). Repetitions count a started round, so A,B,A,B,A is 3:
  the cycle is named no later than the exact-repeat count of its members would be.
- **no progress**: a call asked for again although its last results were identical
  ``streak`` times in a row and nothing else produced a new result in between
  (``no_progress_warn_after``/``no_progress_stop_after``, lower than the repeat
  thresholds, so true stagnation is stopped earliest).
- **repeat**: one call signature present in ``warn_after``/``stop_after`` responses
  of the window. When the results keep changing (progress: polling a job that
  advances) the thresholds are ``progress_factor`` times higher (capped by the
  window): still bounded, but not stopped like stagnation.
- **per tool**: ``per_tool={"fetch": 30}`` allows that many calls of a tool name
  (any arguments) within the window; reaching it warns, exceeding it stops.

One warning per signature (or cycle, or tool) while it stays in the window. The
detector state holds short hashes only: the window of responses (``win``: response
signature, call signatures, whether its results brought anything new), labels of
the calls in the window, the last result per call signature, and warned keys.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> ai = AIMessage("", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "1"}])
    >>> det, cfg = {}, LoopDetection(warn_after=2, stop_after=3)
    >>> for _ in range(3):
    ...     obs = observe(det, ai, [], cfg)
    ...     det = obs.state
    >>> obs.stop["layer"], obs.stop["tool"], obs.stop["count"]
    ('repeat', 'search', 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.nodes.loop_texts import Finding, stop_guard, warning_text
from langgraph_loop.nodes.signatures import SignedCall, content_hash, response_signature, sign_calls

__all__ = ["LoopWarning", "Observation", "absorb", "cycle_of", "observe", "scaled"]

LAYERS = ("cycle", "no_progress", "repeat", "per_tool")


@dataclass(frozen=True)
class LoopWarning:
    """A warning to queue: one per layer and response, naming every offending call."""

    key: str
    layer: str
    text: str
    calls: tuple[str, ...]
    count: int


@dataclass
class Observation:
    """What the detector concluded about one model response."""

    state: dict[str, Any]
    warnings: list[LoopWarning] = field(default_factory=list)
    stop: dict[str, Any] | None = None


def scaled(warn: int, stop: int, factor: int, cap: int) -> tuple[int, int]:
    """Thresholds for repetition that makes progress: ``factor`` times higher, capped.

    Example:
        >>> scaled(3, 5, 3, 20), scaled(3, 5, 3, 10), scaled(3, 5, 1, 20)
        ((9, 15), (9, 10), (3, 5))
    """
    high_stop = max(stop, min(stop * factor, cap))
    return max(warn, min(warn * factor, high_stop - 1)), high_stop


def absorb(detector: dict[str, Any], results: Sequence[ToolMessage]) -> dict[str, Any]:
    """Record the results of the newest response's calls (``detector["last"]``).

    A result is *new* when its call signature did not return it last time. ``epoch``
    counts rounds that brought something new; a call's ``streak`` (identical results
    in a row) grows only while no result at all was new since its previous execution,
    this round's parallel calls included; otherwise it starts again at 1.

    Example:
        >>> det = {"last": {"c1": "s"}, "win": [{"r": "x", "c": ["s"], "p": None}]}
        >>> det = absorb(det, [ToolMessage("same", tool_call_id="c1")])
        >>> det = absorb({**det, "last": {"c2": "s"}}, [ToolMessage("same", tool_call_id="c2")])
        >>> det["res"]["s"][1], det["win"][-1]["p"]
        (2, False)
    """
    last = detector.get("last") or {}
    det = dict(detector)
    if not last:
        return det
    res: dict[str, list[Any]] = dict(det.get("res") or {})
    mine = [(last[m.tool_call_id], content_hash(m.content)) for m in results
            if m.tool_call_id in last]
    before = int(det.get("epoch", 0))
    new = any(res.get(sig) is None or res[sig][0] != digest for sig, digest in mine)
    epoch = before + (1 if new else 0)
    for sig, digest in mine:
        rec = res.get(sig)
        still = not new and rec is not None and rec[2] == before
        streak = int(rec[1]) + 1 if still and rec is not None else 1
        res[sig] = [digest, streak, epoch, 1 + (0 if rec is None else int(rec[3]))]
    win = [dict(e) for e in det.get("win") or []]
    if win:
        win[-1]["p"] = new
    det.update(res=res, epoch=epoch, win=win, last={})
    return det


def _push(det: dict[str, Any], calls: Sequence[SignedCall], window: int) -> dict[str, Any]:
    """Append the response to the window; prune everything to what the window holds."""
    sigs = [c.sig for c in calls]
    entry: dict[str, Any] = {"c": sorted(sigs), "p": None}
    if len(sigs) != 1:
        entry["r"] = response_signature(sigs)  # a one-call response is its call's signature
    win = [*(det.get("win") or []), entry]
    win = win[-window:]
    inside = {s for e in win for s in e["c"]}
    labels = {**(det.get("labels") or {}), **{c.sig: [c.name, c.args] for c in calls}}
    labels = {s: v for s, v in labels.items() if s in inside}
    res = {s: v for s, v in (det.get("res") or {}).items() if s in inside}
    responses = {rsig(e) for e in win}
    tools = {v[0] for v in labels.values()}
    warned = [k for k in det.get("warned") or [] if _relevant(k, inside, responses, tools)]
    return {**det, "win": win, "labels": labels, "res": res, "warned": warned,
            "last": {c.id: c.sig for c in calls}}


def _relevant(key: str, calls: set[str], responses: set[str], tools: set[str]) -> bool:
    kind, _, ident = key.partition(":")
    if kind == "call":
        return ident in calls
    if kind == "cycle":
        return any(r in responses for r in ident.split("+"))
    return ident in tools


def cycle_of(seq: Sequence[str]) -> tuple[int, int]:
    """``(period, repetitions)`` of the repeating block the sequence ends in, or (0, 0).

    A started round counts: A,B,A,B,A repeats the block A,B 3 times. Blocks made of
    one repeated element are not cycles (the repeat layer counts those).

    Example:
        >>> cycle_of("ABABA"), cycle_of("XABCABC"), cycle_of("AAAA"), cycle_of("ABCD")
        ((2, 3), (3, 2), (0, 0), (0, 0))
    """
    period, length = _cycle_run(seq)
    return period, -(-length // period) if period else 0


def _cycle_run(seq: Sequence[str]) -> tuple[int, int]:
    """The period (2-4) with the most repetitions and the length of its periodic tail."""
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
    return best[0], best[1]


def _periodic(block: Sequence[str], d: int) -> bool:
    return len(block) % d == 0 and all(block[i] == block[i - d] for i in range(d, len(block)))


def _cycle(det: dict[str, Any], config: LoopDetection) -> list[Finding]:
    win = det["win"]
    period, length = _cycle_run([rsig(e) for e in win])
    if not period:
        return []
    reps = -(-length // period)
    block = win[len(win) - length :][:period]  # the first round, in the model's order
    progressing = any(e.get("p") for e in win[-period - 1 : -1])
    warn, stop = (config.warn_after, config.stop_after)
    if progressing:
        warn, stop = scaled(warn, stop, config.progress_factor, config.window // period)
    if reps < warn:
        return []
    rot = [rsig(e) for e in block]
    first = min(range(period), key=lambda i: rot[i:] + rot[:i])
    key = "cycle:" + "+".join(rot[first:] + rot[:first])
    steps = [[_label(det, s) for s in e["c"]] for e in block]
    sigs = tuple(s for e in block for s in e["c"])
    return [Finding("cycle", "stop" if reps >= stop else "warn", key, reps, stop, sigs,
                    ", ".join(sorted({det["labels"][s][0] for s in sigs})), None,
                    tuple(" + ".join(step) for step in steps), len(win), progressing)]


def _label(det: dict[str, Any], sig: str) -> str:
    name, args = det["labels"][sig]
    return f"{name}({args})"


def _call_finding(det: dict[str, Any], layer: str, sig: str, stop: bool, count: int,
                  threshold: int, progressing: bool = False) -> Finding:
    name, args = det["labels"][sig]
    return Finding(layer, "stop" if stop else "warn", f"call:{sig}", count, threshold, (sig,),
                   name, args, (_label(det, sig),), len(det["win"]), progressing)


def _no_progress(det: dict[str, Any], sigs: Sequence[str], config: LoopDetection) -> list[Finding]:
    out = []
    for sig in sigs:
        rec = det["res"].get(sig)
        streak = 0 if rec is None else int(rec[1])
        if streak >= config.no_progress_warn_after:
            stop = streak >= config.no_progress_stop_after
            out.append(_call_finding(det, "no_progress", sig, stop, streak,
                                     config.no_progress_stop_after))
    return out


def _repeat(det: dict[str, Any], sigs: Sequence[str], config: LoopDetection) -> list[Finding]:
    out = []
    for sig in sigs:
        count = sum(1 for e in det["win"] if sig in e["c"])
        rec = det["res"].get(sig)
        progressing = rec is not None and int(rec[3]) >= 2 and int(rec[1]) == 1
        warn, stop = config.warn_after, config.stop_after
        if progressing:
            warn, stop = scaled(warn, stop, config.progress_factor, config.window)
        if count >= warn:
            out.append(_call_finding(det, "repeat", sig, count >= stop, count, stop, progressing))
    return out


def _per_tool(det: dict[str, Any], names: Sequence[str], config: LoopDetection) -> list[Finding]:
    out = []
    for name in names:
        cap = config.per_tool.get(name)
        if cap is None:
            continue
        count = sum(1 for e in det["win"] for s in e["c"] if det["labels"][s][0] == name)
        if count >= cap:
            out.append(Finding("per_tool", "stop" if count > cap else "warn", f"tool:{name}",
                               count, cap, (), name, None, (), len(det["win"])))
    return out


def _may_stop(finding: Finding, warned: Sequence[str]) -> bool:
    """Stop only on what was warned about first (a per-tool cap stops at once).

    A loop normally warns before it stops, since counts grow by one per response;
    this keeps it so when a relaxed count (progress) turns strict (stagnation).
    """
    return finding.layer == "per_tool" or finding.key in warned


def _warnings(findings: Sequence[Finding], warned: list[str]) -> list[LoopWarning]:
    """One warning per layer, for findings not warned yet; marks them warned (in place)."""
    out = []
    for layer in LAYERS:
        fresh = [f for f in findings if f.layer == layer and f.key not in warned]
        if not fresh:
            continue
        for f in fresh:
            warned.append(f.key)
            if f.layer == "cycle":  # the cycle's calls are covered by this warning
                warned.extend(k for k in (f"call:{s}" for s in f.sigs) if k not in warned)
        out.append(LoopWarning("|".join(f.key for f in fresh), layer, warning_text(fresh),
                               tuple(c for f in fresh for c in (f.calls or (f.tool,))),
                               max(f.count for f in fresh)))
    return out


LABEL_CHARS = 200


def rsig(entry: dict[str, Any]) -> str:
    """The response signature of a window entry (stored only for multi-call responses)."""
    return str(entry.get("r") or entry["c"][0])


def compact(det: dict[str, Any]) -> dict[str, Any]:
    """The state as stored: arguments only for calls seen twice in the window, cut short.

    The detector state is written at every step (SQLite stores it in every checkpoint),
    so it keeps what the next steps need: a call seen once only needs its tool name.

    Example:
        >>> compact({"win": [{"c": ["a"]}, {"c": ["a", "b"]}],
        ...          "labels": {"a": ["f", "{}"], "b": ["g", '{"x":1}']}})["labels"]
        {'a': ['f', '{}'], 'b': ['g', '']}
    """
    counts: dict[str, int] = {}
    for entry in det.get("win") or []:
        for sig in entry["c"]:
            counts[sig] = counts.get(sig, 0) + 1
    labels = {
        sig: [name, args[:LABEL_CHARS] if counts.get(sig, 0) >= 2 else ""]
        for sig, (name, args) in (det.get("labels") or {}).items()
    }
    return {**det, "labels": labels}


def observe(
    detector: dict[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
) -> Observation:
    """Absorb the previous round's results, then run the layers on the new response."""
    obs = _observe(detector, ai, results, config)
    obs.state = compact(obs.state)
    return obs


def _observe(
    detector: dict[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
) -> Observation:
    det = absorb(detector or {}, results)
    calls = sign_calls(ai, config)
    if not calls:
        return Observation(state=det)
    det = _push(det, calls, config.window)
    sigs = list(dict.fromkeys(c.sig for c in calls))
    names = list(dict.fromkeys(c.name for c in calls))
    findings = [*_cycle(det, config), *_no_progress(det, sigs, config),
                *_repeat(det, sigs, config), *_per_tool(det, names, config)]
    warned = list(det["warned"])
    stops = [f for f in findings if f.severity == "stop" and _may_stop(f, warned)]
    if stops:
        first = min(stops, key=lambda f: (LAYERS.index(f.layer), -f.count))
        return Observation(state=det, stop=stop_guard(first))
    warnings = _warnings(findings, warned)
    det["warned"] = warned
    return Observation(state=det, warnings=warnings)
