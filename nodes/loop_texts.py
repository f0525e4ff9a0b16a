"""What the loop detector says: findings, warning texts and the stop guard (pure).

A ``Finding`` is one layer's conclusion about one signature (a call, a cycle or a
tool name). Warning texts name the repeated tool and arguments and tell the model
what to do instead; the stop guard says which layer fired, on what, how often.

Example:
    >>> f = Finding("repeat", "warn", "call:ab12", 3, 5, ("ab12",), "search", '{"q":"x"}',
    ...             ('search({"q":"x"})',), 3)
    >>> print(warning_text([f]))  # doctest: +ELLIPSIS
    Loop warning: you have called search({"q":"x"}) with the same arguments 3 times in ...
    >>> g = stop_guard(Finding("per_tool", "stop", "tool:fetch", 9, 8, (), "fetch", None, (), 20))
    >>> g["layer"], g["tool"], g["count"], g["reason"]
    ('per_tool', 'fetch', 9, 'loop_detected')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_loop.core.records import Guard

__all__ = ["Finding", "stop_guard", "warning_text"]


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
    """The guard of a loop stop (``run["guard"]`` and the pass record's ``guard``)."""
    return {"guard": "loop_detector", "reason": "loop_detected", "layer": f.layer,
            "tool": f.tool, "args": f.args, "calls": list(f.calls), "count": f.count,
            "threshold": f.threshold, "turns": f.seen, "progressing": f.progressing,
            "detail": _detail(f)}
