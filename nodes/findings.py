"""What the loop detector says: its findings, their texts, the block answer and the stop guard.

A :class:`Finding` is one layer's conclusion about one reply: its rung (``warn``, ``block``
or ``stop``), on which calls, how often, against which limit, and since which response of
the run the loop runs (``since``). Warnings are merged per layer into one notice; a block
answers the repeated call with an error result (:func:`block_text`); a stop becomes the
run's guard (:func:`stop_guard`).

Example:
    >>> f = Finding("no_progress", "stop", "call:ab", 3, 3, ("ab",), "test", "{}",
    ...             ("test({})",), 4, since=2)
    >>> g = stop_guard(f)
    >>> g["layer"], g["rung"], g["began"], "returning the same result 3 times" in g["detail"]
    ('no_progress', 'stop', {'response': 2}, True)
    >>> block_text(f).startswith("Error: not run: test({}) returned the same result the last 3")
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_loop.core.stop import Guard, guard

__all__ = ["TEXT_CUTS", "Finding", "LoopWarning", "block_text", "stop_guard", "text_cut",
           "text_cut_text", "text_loop_text", "text_stop_guard", "warning_text"]

TEXT_CUTS = 2
"""Replies of one run cut while streaming (their text looped) that stop the run."""


@dataclass(frozen=True)
class Finding:
    """One layer's conclusion: its rung, on what, how often, against which limit."""

    layer: str
    rung: str
    key: str
    count: int
    threshold: int
    sigs: tuple[str, ...]
    tool: str
    args: str | None
    calls: tuple[str, ...]
    seen: int
    progressing: bool = False
    since: int = 0
    """The response of the run (1-based, tool-calling responses) where the loop began."""
    ids: tuple[str, ...] = ()
    """The call ids of the reply this finding is about (the ones a block answers)."""
    refused: bool = False
    """The call was blocked before: this request asks for it again."""


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
    what = _items(findings, lambda f: f"{f.calls[0]} returned the same result the last "
                                      f"{f.count} times you called it")
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


_TEXTS = {"repeat": _repeat_text, "no_progress": _no_progress_text, "cycle": _cycle_text,
          "per_tool": _per_tool_text}


def warning_text(findings: Sequence[Finding], blocks: Sequence[str] = ()) -> str:
    """One warning for the findings of one layer (all of the same layer)."""
    return _TEXTS[findings[0].layer](findings, blocks)


def text_loop_text() -> str:
    """The warning about a reply whose text repeats itself."""
    return ("Loop warning: your last reply repeats the same text over and over. Stop and "
            "look at what you already know, then take one concrete step or give your final "
            "answer.")


def text_cut_text() -> str:
    """The notice after a reply was cut while it streamed (``nodes/stream_cut.py``)."""
    return ("Loop warning: your last reply was cut off because it kept repeating the same text. "
            "Do not repeat it: look at what you already know, then take one concrete step or "
            "give your final answer. If your next reply repeats itself too, the run will be "
            "stopped.")


def text_stop_guard(cuts: int) -> Guard:
    """The guard of the stop at the ``TEXT_CUTS``-th reply cut in a run."""
    return guard("loop_detector", "loop_detected", layer="text", count=cuts, threshold=TEXT_CUTS,
                 rung="stop", detail=(f"the loop detector's text layer fired: {cuts} replies of "
                                      "this run were cut while streaming because their text kept "
                                      f"repeating (limit {TEXT_CUTS})"))


def text_cut(cuts: int) -> tuple[list[LoopWarning], Guard | None]:
    """The run's ``cuts``-th reply cut while streaming: the notice, or the stop at ``TEXT_CUTS``."""
    if cuts >= TEXT_CUTS:
        return [], text_stop_guard(cuts)
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
        return (f"the loop detector's no-progress layer fired: {f.calls[0]} was requested "
                f"again after returning the same result {f.count} times{refused} "
                f"(limit {f.threshold})")
    if f.layer == "per_tool":
        return (f"the loop detector's per-tool cap fired: {f.tool} was called {f.count} times "
                f"in the last {f.seen} tool-using turns (cap {f.threshold})")
    if f.layer == "same_reply":
        return (f"the loop detector's same-reply layer fired: the same calls ({', '.join(f.calls)})"
                f" were requested {f.count} times in a row (limit {f.threshold})")
    changing = ", although its results were changing" if f.progressing else ""
    return (f"the loop detector's repeat layer fired: the same call {f.calls[0]} was requested "
            f"{f.count} times in the last {f.seen} tool-using turns{changing} "
            f"(limit {f.threshold})")


def stop_guard(f: Finding) -> Guard:
    """The guard of a loop stop (``run["guard"]`` and the iteration record's ``guard``)."""
    return guard("loop_detector", "loop_detected", layer=f.layer, tool=f.tool, args=f.args,
                 calls=list(f.calls), count=f.count, threshold=f.threshold, turns=f.seen,
                 progressing=f.progressing, rung="stop", began={"response": f.since},
                 detail=_detail(f))
