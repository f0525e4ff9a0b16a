"""Loop detection over calls and their results (pure, O(window) per reply).

``observe(detector, ai, results, config)`` takes the detector's state (derived from the
run's transcript, ``nodes/detector_state.py``), the new AIMessage and the ToolMessages of the
round before it, and returns the new state, the warnings to queue, the calls to *block* and a
stop guard (or None). Each finding climbs a ladder: **warn** (a notice), **block** (the
repeated call is answered with an error saying why and not run; the run goes on), **stop**
(``loop_detected``). A layer blocks before it stops only when listed in
``LoopDetection.block``; asking for a blocked call again stops. The layers, ranked:

- **no progress** (per call, across interleaving): a call asked for again after its own last
  ``no_progress_warn_after``/``no_progress_stop_after`` results were the same (normalized),
  whatever ran in between; only its own result changing starts the count again. A call
  touching its paths (a write between two reads) excuses the next repeat; a result without
  content counts from ``no_content_after``; a tool may declare its own thresholds.
- **cycle** (opt-in: ``layers``): the sequence of response signatures ends in a repeating
  block of period 2-4 (A,B,A,B,A...), ``warn_after``/``stop_after`` rounds, relaxed while
  results move.
- **repeat**: one call signature in ``warn_after``/``stop_after`` responses of the window;
  ``progress_factor`` times higher (capped by the window) while its own result moves.
- **same reply**: the same response ``same_reply_stop_after`` times in a row, whatever the
  results (a runaway insertion whose file grows each time).
- **per tool**: ``per_tool={"fetch": 30}`` allows that many calls of a tool in the window;
  reaching it warns, exceeding it stops (or blocks).

A block of the no-progress layer is used only for a repeat that other calls ran before and whose
last result was not an error (``block_only_interleaved``); one back to back, or the same error
again, stops at once.
- **text**: the reply's own text repeats itself (``nodes/fingerprint.py``): a warning; a reply
  cut while it streamed (``nodes/stream_cut.py``) gets a notice, and the run's second one stops.

Example:
    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> def ask(i):
    ...     return AIMessage("", tool_calls=[{"name": "test", "args": {}, "id": f"c{i}"}])
    >>> det, results, rungs = {}, [], []
    >>> for i in range(4):
    ...     obs = observe(det, ask(i), results, LoopDetection())
    ...     rungs.append([w.layer for w in obs.warnings] or (obs.stop or {}).get("layer"))
    ...     det, results = obs.state, [ToolMessage("1 failed", tool_call_id=f"c{i}")]
    >>> rungs
    [None, None, ['no_progress'], 'no_progress']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import call_label, is_cut
from langgraph_loop.core.stop import Guard
from langgraph_loop.nodes.detector_state import (
    CallRecord,
    DetectorState,
    SignedCall,
    absorb,
    args_of,
    push,
    response_sig,
    sign_calls,
)
from langgraph_loop.nodes.findings import (
    Finding,
    LoopWarning,
    block_text,
    stop_guard,
    text_cut,
    text_loop_text,
    warning_text,
)
from langgraph_loop.nodes.fingerprint import reply_text, text_loop

__all__ = ["Finding", "LoopWarning", "Observation", "cycle_of", "observe", "scaled"]

RANK = ("no_progress", "cycle", "repeat", "same_reply", "per_tool", "text")


@dataclass
class Observation:
    """What the detector concluded about one model response."""

    state: DetectorState
    warnings: list[LoopWarning] = field(default_factory=list)
    stop: Guard | None = None
    blocks: dict[str, str] = field(default_factory=dict)
    """Call id → the error result that answers it instead of running it."""
    finding: Finding | None = None
    """The finding behind the stop."""


# --- the layers ------------------------------------------------------------------------------

def scaled(warn: int, stop: int, factor: int, cap: int) -> tuple[int, int]:
    """Thresholds for repetition that makes progress: ``factor`` times higher, capped.

    Example:
        >>> scaled(3, 5, 3, 20), scaled(3, 5, 3, 10), scaled(3, 5, 1, 20)
        ((9, 15), (9, 10), (3, 5))
    """
    high_stop = max(stop, min(stop * factor, cap))
    return max(warn, min(warn * factor, high_stop - 1)), high_stop


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


def _label(det: DetectorState, sig: str) -> str:
    rec = det["calls"][sig]
    return call_label(rec["tool"], args_of(rec))


def _cycle(det: DetectorState, config: LoopDetection) -> list[Finding]:
    win = det["window"]
    period, length = _cycle_run([response_sig(e) for e in win])
    if not period:
        return []
    reps = -(-length // period)
    block = win[len(win) - length :][:period]  # the first round, in the model's order
    latest = det.get("changed_at")  # progressing: a result moved in the last round
    progressing = latest is not None and latest >= det.get("responses", 0) - period
    warn, stop = (config.warn_after, config.stop_after)
    if progressing:
        warn, stop = scaled(warn, stop, config.progress_factor, config.window // period)
    if reps < warn:
        return []
    rot = [response_sig(e) for e in block]
    first = min(range(period), key=lambda i: rot[i:] + rot[:i])
    key = "cycle:" + "+".join(rot[first:] + rot[:first])
    steps = [[_label(det, s) for s in e["calls"]] for e in block]
    sigs = tuple(s for e in block for s in e["calls"])
    return [Finding("cycle", "stop" if reps >= stop else "warn", key, reps, stop, sigs,
                    ", ".join(sorted({det["calls"][s]["tool"] for s in sigs})), None,
                    tuple(" + ".join(step) for step in steps), len(win), progressing,
                    since=det.get("responses", 0) - length + 1)]


def _call_finding(det: DetectorState, layer: str, sig: str, rung: str, count: int,
                  threshold: int, ids: tuple[str, ...], *, progressing: bool = False,
                  since: int = 0) -> Finding:
    rec = det["calls"][sig]
    return Finding(layer, rung, f"call:{sig}", count, threshold, (sig,), rec["tool"],
                   args_of(rec), (_label(det, sig),), len(det["window"]), progressing, since,
                   ids, bool(rec.get("refused")))


def _thresholds(rec: CallRecord, config: LoopDetection) -> tuple[int, int]:
    """The no-progress warn and stop counts for this call (its tool's own, the least count
    for a result without content)."""
    policy = config.policy(rec["tool"])
    warn = (policy.warn_after if policy is not None and policy.warn_after is not None
            else config.no_progress_warn_after)
    stop = (policy.stop_after if policy is not None and policy.stop_after is not None
            else config.no_progress_stop_after)
    if rec.get("empty"):
        return max(warn, config.no_content_after), max(stop, config.no_content_after)
    return warn, stop


def _blocks(rec: CallRecord, config: LoopDetection) -> bool:
    """Is this stagnating call blocked rather than stopped? With ``block_only_interleaved``,
    only when other calls ran since its last request and it did not fail: something the
    detector cannot see may have changed (a repeat back to back, or the same error again,
    is stopped at once)."""
    if "no_progress" not in config.block:
        return False
    return not config.block_only_interleaved or (bool(rec.get("between"))
                                                 and not rec.get("failed"))


def _no_progress(det: DetectorState, asked: Mapping[str, tuple[str, ...]],
                 config: LoopDetection) -> list[Finding]:
    """Calls asked for again after their own identical results (see module docstring)."""
    out = []
    for sig, ids in asked.items():
        rec = det["calls"][sig]
        if rec.get("touched") or "result" not in rec:
            continue  # new, or a call touching its paths ran since: it may read differently
        same = rec.get("same", 0)
        warn, stop = _thresholds(rec, config)
        if rec.get("refused"):
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
        where = [i for i, e in enumerate(win) if sig in e["calls"]]
        rec = det["calls"][sig]
        progressing = bool(rec.get("moved"))
        warn, stop = _repeat_thresholds(rec, config)
        if progressing:
            warn, stop = scaled(warn, stop, config.progress_factor, config.window)
        if len(where) < warn:
            continue
        rung = "warn"
        if len(where) >= stop:
            rung = "block" if "repeat" in config.block and not rec.get("refused") else "stop"
        out.append(_call_finding(det, "repeat", sig, rung, len(where), stop, ids,
                                 progressing=progressing,
                                 since=det.get("responses", 0) - len(win) + where[0] + 1))
    return out


def _repeat_thresholds(rec: CallRecord, config: LoopDetection) -> tuple[int, int]:
    """``warn_after``/``stop_after``, raised for a tool with its own higher thresholds (in
    requests: one more than its identical results)."""
    policy = config.policy(rec["tool"])
    warn, stop = config.warn_after, config.stop_after
    if policy is not None and policy.warn_after is not None:
        warn = max(warn, policy.warn_after + 1)
    if policy is not None and policy.stop_after is not None:
        stop = max(stop, policy.stop_after + 1)
    return warn, max(stop, warn + 1)


def _same_reply(det: DetectorState, calls: Sequence[SignedCall],
                config: LoopDetection) -> list[Finding]:
    limit, count = config.same_reply_stop_after, det.get("same_reply", 0)
    if limit is None or count < limit:
        return []
    return [Finding("same_reply", "stop", f"reply:{det.get('reply')}", count, limit,
                    tuple(c.sig for c in calls), ", ".join(sorted({c.name for c in calls})),
                    None, tuple(c.label for c in calls), len(det["window"]),
                    since=det.get("responses", 0) - count + 1)]


def _per_tool(det: DetectorState, calls: Sequence[SignedCall],
              config: LoopDetection) -> list[Finding]:
    out = []
    for name in dict.fromkeys(c.name for c in calls):
        cap = config.per_tool.get(name)
        if cap is None:
            continue
        mine = [s for e in det["window"] for s in e["calls"] if det["calls"][s]["tool"] == name]
        if len(mine) < cap:
            continue
        refused = any(det["calls"][s].get("refused") for s in mine)
        rung = "warn" if len(mine) == cap else (
            "block" if "per_tool" in config.block and not refused else "stop")
        out.append(Finding("per_tool", rung, f"tool:{name}", len(mine), cap, (), name, None,
                           (), len(det["window"]),
                           ids=tuple(c.id for c in calls if c.name == name)))
    return out


# --- the ladder --------------------------------------------------------------------------------

def _may_act(finding: Finding, warned: Sequence[str]) -> bool:
    """The window layers block or stop only what they warned about first (a relaxed count
    turning strict would otherwise skip the warning)."""
    return finding.layer not in ("repeat", "cycle") or finding.key in warned


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
        out.append(LoopWarning("|".join(f.key for f in fresh), layer,
                               warning_text(fresh, config.block),
                               tuple(c for f in fresh for c in (f.calls or (f.tool,))),
                               max(f.count for f in fresh)))
    return out


def _mark_warned(det: DetectorState, findings: Sequence[Finding]) -> None:
    calls = det["calls"]
    for f in findings:
        if f.layer == "no_progress" and f.rung == "warn":
            calls[f.sigs[0]] = CallRecord(**{**calls[f.sigs[0]], "warned": True})  # type: ignore[typeddict-item]


def _text_warnings(ai: AIMessage, config: LoopDetection) -> list[LoopWarning]:
    if "text" not in config.layers or not text_loop(reply_text(ai.content, ai.additional_kwargs)):
        return []
    return [LoopWarning("text", "text", text_loop_text(), (), 1)]


def _findings(det: DetectorState, calls: Sequence[SignedCall],
              config: LoopDetection) -> list[Finding]:
    asked: dict[str, tuple[str, ...]] = {}
    for c in calls:
        asked[c.sig] = (*asked.get(c.sig, ()), c.id)
    on = config.layers
    return [*(_no_progress(det, asked, config) if "no_progress" in on else []),
            *(_cycle(det, config) if "cycle" in on else []),
            *(_repeat(det, asked, config) if "repeat" in on else []),
            *(_same_reply(det, calls, config) if "same_reply" in on else []),
            *(_per_tool(det, calls, config) if "per_tool" in on else [])]


def _allowed(finding: Finding, allowed: Mapping[str, int] | None) -> bool:
    """Did a human let this loop go on (``continue``) less than a ladder's length ago?"""
    since = (allowed or {}).get(finding.key)
    return since is not None and finding.count < since + finding.threshold


def observe(
    detector: Mapping[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
    allowed: Mapping[str, int] | None = None,
) -> Observation:
    """Absorb the previous round's results, then run the layers on the new response.

    Args:
        detector: the detector state (``{}`` at the start of a run); never mutated.
        ai: the new model reply.
        results: the ToolMessages of the round before it.
        config: thresholds, ladders, policies and read-only tools.
        allowed: finding key → its count when a human let that loop go on.

    Returns:
        The new state, the warnings to queue, the calls to block and the stop guard.
    """
    det = absorb(detector or {}, results, config)
    if is_cut(ai):  # cut while it streamed (no calls left): a notice, or the stop
        cuts = det.get("cuts", 0) + 1
        warnings, stop = text_cut(cuts)
        return Observation(state=DetectorState(**{**det, "cuts": cuts}),  # type: ignore[typeddict-item]
                           warnings=warnings, stop=stop)
    text = _text_warnings(ai, config)
    calls = sign_calls(ai, config)
    if not calls:
        return Observation(state=det, warnings=text)
    det = push(det, calls, config)
    findings = [f for f in _findings(det, calls, config) if not _allowed(f, allowed)]
    warned = list(det.get("warned") or [])
    acting = [f for f in findings if f.rung != "warn" and _may_act(f, warned)]
    warnings = [*text, *_warnings(findings, warned, config)]
    det["calls"] = dict(det["calls"])
    _mark_warned(det, findings)
    det["warned"] = warned
    state = det
    stops = [f for f in acting if f.rung == "stop"]
    if stops:
        first = min(stops, key=lambda f: (RANK.index(f.layer), -f.count))
        return Observation(state=state, stop=stop_guard(first), finding=first)
    blocks = {i: block_text(f) for f in acting for i in f.ids}
    return Observation(state=state, warnings=warnings, blocks=blocks)
