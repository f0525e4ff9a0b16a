"""Loop detection over call signatures and their results (pure, O(window) per step).

``observe(detector, ai, results, config)`` takes the detector's state (a small dict
kept in graph state under ``detector``), the new AIMessage and the ToolMessages of
the previous round, and returns the new detector state, the warnings to queue and
a stop guard (or None). Four layers look at the last ``window`` responses that
called tools; their findings are ordered cycle, no progress, repeat, per tool:

- **cycle**: the sequence of response signatures ends in a repeating block of
  period 2-4 (A,B,A,B,A...). Repetitions count a started round, so A,B,A,B,A is 3:
  the cycle is named no later than the exact-repeat count of its members would be.
- **no progress**: a call asked for again although its own last results were
  identical ``streak`` times in a row and nothing changed in between
  (``no_progress_warn_after``/``no_progress_stop_after``, lower than the repeat
  thresholds, so true stagnation is stopped earliest). What counts as a change is
  judged per call (``nodes/detector_state.py``): errors, empty results (a ``think``
  scratchpad) and read-only tools never excuse another call's retry.
- **repeat**: one call signature present in ``warn_after``/``stop_after`` responses
  of the window. When the call's own results keep changing (progress: polling a job
  that advances) the thresholds are ``progress_factor`` times higher (capped by the
  window): still bounded, but not stopped like stagnation.
- **per tool**: ``per_tool={"fetch": 30}`` allows that many calls of a tool name
  (any arguments) within the window; reaching it warns, exceeding it stops.

One warning per signature (or cycle, or tool) while it stays in the window. The
detector state (``DetectorState``, ``nodes/detector_state.py``) holds short hashes and
small ints only, bounded by the window.

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import call_label
from langgraph_loop.core.stop import Guard, guard
from langgraph_loop.nodes.detector_state import (
    DetectorState,
    absorb,
    args_of,
    compact,
    makes_progress,
    push,
    response_sig,
    sign_calls,
    streak,
)

__all__ = ["Finding", "LoopWarning", "Observation", "cycle_of", "observe", "scaled", "stop_guard",
           "warning_text"]

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

    state: DetectorState
    warnings: list[LoopWarning] = field(default_factory=list)
    stop: Guard | None = None


# --- what the detector says: findings, warning texts, the stop guard ----------------------

@dataclass(frozen=True)
class Finding:
    """One layer's conclusion: warn or stop, on what, how often, against which limit."""

    layer: str
    severity: str
    key: str
    count: int
    threshold: int
    sigs: tuple[str, ...]
    tool: str
    args: str | None
    calls: tuple[str, ...]
    seen: int
    progressing: bool = False


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _items(findings: Sequence[Finding], describe: Any) -> str:
    if len(findings) == 1:
        return str(describe(findings[0]))
    return "\n" + "\n".join(f"- {describe(f)}" for f in findings) + "\n"


def _repeat_text(findings: Sequence[Finding]) -> str:
    if all(f.progressing for f in findings):
        what = _items(findings, lambda f: f"{f.calls[0]} {_times(f.count)} in your last "
                                          f"{f.seen} tool-using turns")
        return (f"Loop warning: you have called {what}. The results are still changing, but "
                "this is a lot of repetition. If you are waiting for something to finish, stop "
                "polling and report where it stands; otherwise use what you already have and "
                f"give your final answer. At {findings[0].threshold} such calls the run will be "
                "stopped.")
    what = _items(findings, lambda f: f"{f.calls[0]} with the same arguments {_times(f.count)} "
                                      f"in your last {f.seen} tool-using turns")
    return (f"Loop warning: you have called {what}. Repeating a call will not tell you anything "
            "new. Do not call it again with these arguments: use the result you already have, "
            "change the arguments or try a different approach, or give your final answer. "
            f"At {findings[0].threshold} such calls the run will be stopped.")


def _no_progress_text(findings: Sequence[Finding]) -> str:
    what = _items(findings, lambda f: f"{f.calls[0]} returned the same result the last "
                                      f"{f.count} times you called it")
    return (f"Loop warning: {what}, and nothing else changed in between, so calling it again "
            "will return the same thing. Do not call it again with these arguments: use that "
            "result, try a different tool or different arguments, or give your final answer. "
            "If you keep calling it, the run will be stopped.")


def _cycle_text(findings: Sequence[Finding]) -> str:
    what = _items(findings, lambda f: f"the same {len(f.calls)} steps ("
                                      + " → ".join(f.calls) + f") have repeated {f.count} times "
                                      "in a row")
    return (f"Loop warning: you are going in circles: {what}. Break the cycle: decide with the "
            "results you already have, try something different, or give your final answer. "
            "If the cycle continues, the run will be stopped.")


def _per_tool_text(findings: Sequence[Finding]) -> str:
    what = _items(findings, lambda f: f"{f.tool} {_times(f.count)} in your last {f.seen} "
                                      "tool-using turns, which is its limit")
    return (f"Loop warning: you have used {what}. Any further call to it will stop the run: "
            "finish with the results you already have.")


_TEXTS = {"repeat": _repeat_text, "no_progress": _no_progress_text, "cycle": _cycle_text,
          "per_tool": _per_tool_text}


def warning_text(findings: Sequence[Finding]) -> str:
    """One warning for the findings of one layer (all of the same layer)."""
    return _TEXTS[findings[0].layer](findings)


def _detail(f: Finding) -> str:
    if f.layer == "cycle":
        return (f"the loop detector's cycle layer fired: the steps {' → '.join(f.calls)} "
                f"repeated {f.count} times in a row (limit {f.threshold})")
    if f.layer == "no_progress":
        return (f"the loop detector's no-progress layer fired: {f.calls[0]} was requested "
                f"again after returning the same result {f.count} times in a row "
                f"(limit {f.threshold})")
    if f.layer == "per_tool":
        return (f"the loop detector's per-tool cap fired: {f.tool} was called {f.count} times "
                f"in the last {f.seen} tool-using turns (cap {f.threshold})")
    changing = ", although its results were changing" if f.progressing else ""
    return (f"the loop detector's repeat layer fired: the same call {f.calls[0]} was requested "
            f"{f.count} times in the last {f.seen} tool-using turns{changing} "
            f"(limit {f.threshold})")


def stop_guard(f: Finding) -> Guard:
    """The guard of a loop stop (``run["guard"]`` and the iteration record's ``guard``)."""
    return guard("loop_detector", "loop_detected", layer=f.layer, tool=f.tool, args=f.args,
                 calls=list(f.calls), count=f.count, threshold=f.threshold, turns=f.seen,
                 progressing=f.progressing, detail=_detail(f))


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


def _cycle(det: DetectorState, config: LoopDetection) -> list[Finding]:
    win = det["window"]
    period, length = _cycle_run([response_sig(e) for e in win])
    if not period:
        return []
    reps = -(-length // period)
    block = win[len(win) - length :][:period]  # the first round, in the model's order
    latest = det.get("changed_at")  # progressing: a change in the last round of the cycle
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
                    tuple(" + ".join(step) for step in steps), len(win), progressing)]


def _label(det: DetectorState, sig: str) -> str:
    rec = det["calls"][sig]
    return call_label(rec["tool"], args_of(rec))


def _call_finding(det: DetectorState, layer: str, sig: str, stop: bool, count: int,
                  threshold: int, progressing: bool = False) -> Finding:
    rec = det["calls"][sig]
    return Finding(layer, "stop" if stop else "warn", f"call:{sig}", count, threshold, (sig,),
                   rec["tool"], args_of(rec), (_label(det, sig),), len(det["window"]), progressing)


def _no_progress(det: DetectorState, sigs: Sequence[str], config: LoopDetection) -> list[Finding]:
    """Calls asked for again after identical results, with nothing changed since."""
    out = []
    for sig in sigs:
        same = streak(det["calls"][sig])  # 0 when something changed since it last ran
        if same >= config.no_progress_warn_after:
            stop = same >= config.no_progress_stop_after
            out.append(_call_finding(det, "no_progress", sig, stop, same,
                                     config.no_progress_stop_after))
    return out


def _repeat(det: DetectorState, sigs: Sequence[str], config: LoopDetection) -> list[Finding]:
    """Calls present in many responses of the window (relaxed while their results move)."""
    out = []
    for sig in sigs:
        count = sum(1 for e in det["window"] if sig in e["calls"])
        progressing = makes_progress(det["calls"][sig])
        warn, stop = config.warn_after, config.stop_after
        if progressing:
            warn, stop = scaled(warn, stop, config.progress_factor, config.window)
        if count >= warn:
            out.append(_call_finding(det, "repeat", sig, count >= stop, count, stop, progressing))
    return out


def _per_tool(det: DetectorState, names: Sequence[str], config: LoopDetection) -> list[Finding]:
    out = []
    for name in names:
        cap = config.per_tool.get(name)
        if cap is None:
            continue
        count = sum(1 for e in det["window"] for s in e["calls"]
                    if det["calls"][s]["tool"] == name)
        if count >= cap:
            out.append(Finding("per_tool", "stop" if count > cap else "warn", f"tool:{name}",
                               count, cap, (), name, None, (), len(det["window"])))
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


def observe(
    detector: Mapping[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
) -> Observation:
    """Absorb the previous round's results, then run the layers on the new response.

    Args:
        detector: the detector state (``{}`` at the start of a run); never mutated.
        ai: the new model reply.
        results: the ToolMessages of the round before it.
        config: thresholds, argument policies and read-only tools.

    Returns:
        The new state, the warnings to queue and the stop guard (or None).
    """
    obs = _observe(detector, ai, results, config)
    obs.state = compact(obs.state)
    return obs


def _observe(
    detector: Mapping[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
) -> Observation:
    det = absorb(detector or {}, results, config)
    calls = sign_calls(ai, config)
    if not calls:
        return Observation(state=det)
    det = push(det, calls, config.window)
    sigs = list(dict.fromkeys(c.sig for c in calls))
    names = list(dict.fromkeys(c.name for c in calls))
    findings = [*_cycle(det, config), *_no_progress(det, sigs, config),
                *_repeat(det, sigs, config), *_per_tool(det, names, config)]
    warned = list(det.get("warned") or [])
    stops = [f for f in findings if f.severity == "stop" and _may_stop(f, warned)]
    if stops:
        first = min(stops, key=lambda f: (LAYERS.index(f.layer), -f.count))
        return Observation(state=det, stop=stop_guard(first))
    warnings = _warnings(findings, warned)
    det["warned"] = warned
    return Observation(state=det, warnings=warnings)
