"""Our loop layers one by one, and the loop rules users pick instead, over recorded runs.

``python -m benchmarks.rivals --data ../shared/data`` prints two tables, overall and per source:
the **ablation** (what each layer of our defaults adds alone, and what each opt-in layer would
add) and the **rivals** (each family's best setting that meets our false-stop limits beside our
defaults). Runs are replayed as ``real_traces`` replays them, without a graph (``engine_replay``:
the engine's own decisions; ``real_traces`` checks they match the graph's).

Each rule reads a run's recorded calls and results in order and says where it would have ended the
run; a warning does not change the recorded replies (the replay's worst case, the same for every
rule), so a rule that warns first and stops on a second strike simply stops later. Families, each
swept over its thresholds by :func:`rival_points`:

- **N in a row** (Gemini CLI, Cline, Roo Code, opencode): the calls, one after the other, end in a
  block of ``cycle`` calls or fewer repeated ``n`` times (``cycle=1``: the same call ``n`` times in
  a row). One strike stops; two strikes warn and start counting again, and the next one stops.
- **OpenHands' stuck detector** (``openhands/controller/stuck.py``): over the last events, the same
  action and observation ``n`` times in a row, the same action answered by an error ``n - 1`` times,
  or an A-B alternation of ``n + 2`` action-observation pairs (``n=4`` is OpenHands' own: 4, 3, 6). It
  looks after the observation came back, so the run ends before the next model call.
- **LangChain's limits**: ``ToolCallLimitMiddleware(run_limit=R, exit_behavior="end")`` ends the run
  at the reply whose calls would pass ``R``; ``ModelCallLimitMiddleware(run_limit=R)`` ends it
  before the model call after the ``R``-th.
- **deer-flow**: the same set of calls in ``hard`` responses of the last ``window`` (``systems.py``).

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from benchmarks.real_traces import RecordedRun
    >>> ask = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]) for i in range(5)]
    >>> run = RecordedRun("u", ask, {(i, 0): "same" for i in range(5)})
    >>> in_a_row(run, n=3, cycle=1, strikes=1), in_a_row(run, n=3, cycle=1, strikes=2)
    (2, None)
    >>> openhands(run, n=4), tool_call_limit(run, 3), model_call_limit(run, 3)
    (4, 3, 3)
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from benchmarks.real_traces import (
    SHARED,
    ReplayFn,
    Source,
    deerflow,
    engine_replay,
    find_loops,
    load_sources,
    rule_replay,
    summarize,
)
from langgraph_loop import LoopDetection
from langgraph_loop.core.config import DEFAULT_LAYERS, LAYERS

RIVAL_FAMILIES = ("N in a row (Gemini CLI, Cline, Roo Code, opencode)", "OpenHands stuck detector",
                  "LangChain ToolCallLimitMiddleware", "LangChain ModelCallLimitMiddleware", "deer-flow")
FALSE_STOPS = 0.005
"""The false-stop limits every compared point must meet: no stop cutting new work in a solved
run, and stops in at most this share of solved runs."""


class Run(Protocol):
    """What a rule reads of a recorded run (``real_traces.RecordedRun``)."""

    replies: Sequence[Any]

    def calls(self, start: int = 0, end: int | None = None) -> list[tuple[int, Any]]: ...
    def result(self, reply: int, call_id: str) -> str: ...
    def failed(self, reply: int, call_id: str) -> bool: ...


def call_key(call: Mapping[str, Any]) -> str:
    """A call's identity for these rules: its name and its whole arguments, keys sorted."""
    return f"{call['name']}({json.dumps(call['args'], sort_keys=True, default=str)})"


def _steps(run: Run) -> Iterator[tuple[int, str, str, bool]]:
    """``(reply, call key, result, failed)`` of every recorded call, in order."""
    for reply, call in run.calls():
        ident = str(call["id"])
        yield reply, call_key(call), run.result(reply, ident), run.failed(reply, ident)


def _ends_in_cycle(keys: Sequence[str], n: int, cycle: int) -> bool:
    """Do ``keys`` end in a block of at most ``cycle`` keys repeated ``n`` times?"""
    for period in range(1, cycle + 1):
        span = period * n
        if len(keys) >= span and all(keys[-i] == keys[-i - period] for i in range(1, span - period + 1)):
            return True
    return False


def in_a_row(run: Run, *, n: int, cycle: int, strikes: int) -> int | None:
    """The reply at which the N-in-a-row rule ends the run (the call completing the ``n``-th
    repetition is not run), or None."""
    keys: list[str] = []
    left = strikes
    for reply, key, _result, _failed in _steps(run):
        keys.append(key)
        if _ends_in_cycle(keys, n, cycle):
            left -= 1
            if left == 0:
                return reply
            keys = []  # warned: count again from here
    return None


def openhands(run: Run, *, n: int) -> int | None:
    """The reply OpenHands' stuck detector ends the run before (it checks once a reply's
    observations came back; the next model call is not made), or None."""
    pairs: list[tuple[str, str, bool]] = []
    steps = list(_steps(run))
    for i, (reply, key, result, failed) in enumerate(steps):
        pairs.append((key, result, failed))
        reply_done = i + 1 == len(steps) or steps[i + 1][0] != reply
        if reply_done and reply + 1 < len(run.replies) and _stuck(pairs, n):
            return reply + 1
    return None


def _stuck(pairs: Sequence[tuple[str, str, bool]], n: int) -> bool:
    last = pairs[-20:]  # OpenHands reads the recent history only
    same = last[-n:]
    if len(same) == n and all(p[:2] == same[0][:2] for p in same):
        return True  # the same action and observation n times
    errors = last[-(n - 1):]
    if len(errors) == n - 1 and all(p[0] == errors[0][0] and p[2] for p in errors):
        return True  # the same action answered by an error n - 1 times
    alt = last[-(n + 2):]
    return (len(alt) == n + 2 and alt[0][:2] != alt[1][:2]
            and all(alt[i][:2] == alt[i - 2][:2] for i in range(2, n + 2)))


def tool_call_limit(run: Run, limit: int) -> int | None:
    """The reply whose calls would pass ``limit`` tool calls in the run, or None."""
    count = 0
    for index, ai in enumerate(run.replies):
        count += len(ai.tool_calls)
        if count > limit:
            return index
    return None


def model_call_limit(run: Run, limit: int) -> int | None:
    """The reply that would be the ``limit + 1``-th model call (not made), or None."""
    return limit if limit < len(run.replies) else None


def rival_points() -> dict[str, dict[str, ReplayFn]]:
    """Every family's settings, each a replay: ``{family: {point: replay}}``."""
    rows: dict[str, dict[str, ReplayFn]] = {family: {} for family in RIVAL_FAMILIES}
    row, oh, tools, models, deer = (rows[f] for f in RIVAL_FAMILIES)
    for n in range(3, 21):
        for cycle in (1, 5):
            for strikes in (1, 2):
                row[f"N={n}, cycle<={cycle}, strikes={strikes}"] = rule_replay(
                    lambda r, n=n, c=cycle, s=strikes: in_a_row(r, n=n, cycle=c, strikes=s))
    for n in range(3, 13):
        oh[f"{n} same, {n - 1} errors, {n + 2} alternating"] = rule_replay(
            lambda r, n=n: openhands(r, n=n), spares_request=True)
    for limit in (5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200, 300):
        tools[f"run_limit={limit}"] = rule_replay(lambda r, k=limit: tool_call_limit(r, k))
        models[f"run_limit={limit}"] = rule_replay(lambda r, k=limit: model_call_limit(r, k),
                                                   spares_request=True)
    for hard in range(3, 16):
        for window in (10, 20, 30, 50):
            deer[f"stop {hard} in {window}"] = deerflow(hard, window)
    return rows


# --- measuring and printing -----------------------------------------------------------------

PerSource = dict[str, Counter[str]]
"""One point's counts (``real_traces.COUNTS``) per source."""


def evaluate(sources: Sequence[Source], replay: ReplayFn) -> PerSource:
    """One point's counts on every source."""
    return {s.name: summarize("", s.conversations, [replay(c) for c in s.conversations], s.loops).n
            for s in sources}


def total(per: PerSource) -> Counter[str]:
    """The counts summed over the sources."""
    out: Counter[str] = Counter()
    for n in per.values():
        out.update(n)
    return out


def fits(n: Mapping[str, int]) -> bool:
    """Does a point meet the false-stop limits (:data:`FALSE_STOPS`)?"""
    return n["solved_cut_new"] == 0 and n["solved_stopped"] <= FALSE_STOPS * n["solved_runs"]


COLUMNS = (("failed_saved", "failed: calls saved"), ("failed_tokens", "failed: input tokens saved"),
           ("stuck_failed_stopped", "failed: stuck loops, run stopped"),
           ("stuck_failed_refused", "failed: stuck loops, stopped or refused"),
           ("solved_stopped", "solved: false stops"), ("solved_cut_new", "solved: stops cutting new work"),
           ("solved_warned", "solved: runs warned"), ("solved_blocked", "solved: calls refused"))


def _row(label: str, n: Mapping[str, int], signed: bool = False) -> str:
    cells = [f"{n[k]:+d}" if signed else str(n[k]) for k, _ in COLUMNS]
    return f"| {label} | " + " | ".join(cells) + " |"


def _header(first: str) -> list[str]:
    return [f"| {first} | " + " | ".join(title for _, title in COLUMNS) + " |",
            "|---" * (len(COLUMNS) + 1) + "|"]


def _short(source: str) -> str:
    return source.removeprefix("legit_").split("_swebench")[0][:28]


def _per_source(rows: Sequence[tuple[str, PerSource]], sources: Sequence[Source], signed: bool) -> str:
    """A row per point, a cell per source: calls saved / tokens saved / false stops (cutting)."""
    lines = ["| point | " + " | ".join(_short(s.name) for s in sources) + " |",
             "|---" * (len(sources) + 1) + "|"]
    for label, per in rows:
        cells = []
        for s in sources:
            n = per[s.name]
            f = "{:+d}" if signed else "{}"
            cells.append(f"{f.format(n['failed_saved'])} / {f.format(n['failed_tokens'] // 1000)}k"
                         f" / {f.format(n['solved_stopped'])} ({f.format(n['solved_cut_new'])})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _minus(a: PerSource, b: PerSource) -> PerSource:
    return {name: Counter({k: a[name][k] - b[name][k] for k in set(a[name]) | set(b[name])}) for name in a}


def ablation(sources: Sequence[Source], defaults: PerSource) -> tuple[str, str]:
    """What each default layer adds alone (the defaults less the defaults without it) and what
    each opt-in layer would add (the defaults with it less the defaults): overall, per source."""
    rows: list[tuple[str, PerSource]] = []
    for layer in LAYERS:
        if layer == "per_tool":
            continue  # caps only the tools it is given: nothing by default
        on = layer in DEFAULT_LAYERS
        layers = tuple(x for x in DEFAULT_LAYERS if x != layer) if on else (*DEFAULT_LAYERS, layer)
        other = evaluate(sources, engine_replay(LoopDetection(layers=layers)))
        rows.append((f"{layer} ({'default' if on else 'opt-in'})",
                     _minus(defaults, other) if on else _minus(other, defaults)))
    overall = "\n".join([*_header("layer: what it adds"), _row("the defaults", total(defaults)),
                         *(_row(label, total(per), signed=True) for label, per in rows)])
    return overall, _per_source([("the defaults", defaults), *rows], sources, signed=False)


def rivals(sources: Sequence[Source], defaults: PerSource) -> tuple[str, str, list[dict[str, Any]]]:
    """Each family's best points that meet the limits (by calls saved, and by input tokens saved,
    in failed runs), beside our defaults: overall with the ratios, and per source."""
    ours = total(defaults)
    lines = ["| system | best point (by) | calls saved | input tokens saved | stuck loops stopped"
             " (run) | false stops | cutting | ours ÷ calls | ours ÷ tokens |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| langgraph-loop | defaults | {ours['failed_saved']} | {ours['failed_tokens']} |"
             f" {ours['stuck_failed_stopped']}/{ours['stuck_failed']} | {ours['solved_stopped']} |"
             f" {ours['solved_cut_new']} | | |"]
    per_rows: list[tuple[str, PerSource]] = [("langgraph-loop defaults", defaults)]
    records = []
    for family, points in rival_points().items():
        measured = {point: evaluate(sources, replay) for point, replay in points.items()}
        ok = {point: per for point, per in measured.items() if fits(total(per))}
        if not ok:
            lines.append(f"| {family} | no point meets the limits | | | | | | | |")
            continue
        best = {by: max(ok, key=lambda p, k=key: (total(ok[p])[k], total(ok[p])["failed_saved"]))
                for by, key in (("calls", "failed_saved"), ("tokens", "failed_tokens"))}
        for point in dict.fromkeys(best.values()):
            n, by = total(ok[point]), "/".join(b for b, p in best.items() if p == point)
            ratios = [ours[k] / n[k] if n[k] else float("inf") for k in ("failed_saved", "failed_tokens")]
            lines.append(f"| {family} | {point} ({by}) | {n['failed_saved']} | {n['failed_tokens']} |"
                         f" {n['stuck_failed_stopped']}/{n['stuck_failed']} | {n['solved_stopped']} |"
                         f" {n['solved_cut_new']} | {ratios[0]:.2f}× | {ratios[1]:.2f}× |")
            per_rows.append((f"{family}: {point}", ok[point]))
            records.append({"family": family, "point": point, "by": by, **n,
                            "ours_calls_ratio": ratios[0], "ours_tokens_ratio": ratios[1]})
    return "\n".join(lines), _per_source(per_rows, sources, signed=False), records


def main(argv: list[str] | None = None) -> int:
    """Print the ablation and the rivals tables (overall and per source); write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rivals", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, action="append",
                        help="a trajectory file or a directory of them (repeatable; default ../shared/data)")
    parser.add_argument("--limit", type=int, help="only the first N conversations of each source")
    parser.add_argument("--json", type=Path, help="where to write JSON (default: none)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sources = [find_loops(s) for s in load_sources(args.data or [SHARED], args.limit)]
    defaults = evaluate(sources, engine_replay(LoopDetection()))
    print(f"# Loop layers and rival rules on {len(sources)} sources ({total(defaults)['solved_runs']}"
          f" solved runs)\n\nLimits every point must meet: 0 stops cutting new work, false stops"
          f" <= {FALSE_STOPS:.1%} of solved runs.")
    overall, per_source = ablation(sources, defaults)
    print(f"\n## Ablation\n\n{overall}\n\nPer source (calls saved / input tokens saved / false stops"
          f" (cutting)):\n\n{per_source}")
    table, per_source, records = rivals(sources, defaults)
    print(f"\n## Rivals\n\n{table}\n\nPer source (calls saved / input tokens saved / false stops"
          f" (cutting)):\n\n{per_source}")
    print(f"\nbenchmark runtime: {time.perf_counter() - started:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"defaults": {s: dict(n) for s, n in defaults.items()},
                                         "rivals": records}, indent=2) + "\n")
        print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
