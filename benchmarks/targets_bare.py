"""The performance targets of issue 24, evaluated on one run of the overhead benchmark.

Issue 24 measures langgraph-loop against the bare two-node LangGraph loop with ``ToolNode``
(``bare_toolnode``) and against ``create_agent`` and ``create_react_agent``, every ratio
between runs of the same saver × N × mode (sync ``invoke`` / async ``ainvoke``) in one run.
A target covers one or more such cells: its measured value is the worst cell, and it passes when
every measured cell does. The cells a run did not measure are counted, not guessed; a target
with none is ``not measured``. This is a report, not a test: nothing here asserts.

* ms per round ≤ 1.05× ``bare_toolnode`` at N=10, with no checkpointer and with SqliteSaver;
* ≤ 1.0× ``bare_toolnode`` from N=50 on every saver;
* faster (< 1.0×) than ``create_agent`` and than ``create_react_agent`` in every cell;
* stored bytes after 200 rounds ≤ 0.05× ``create_agent`` (sync runs: what is stored does not
  depend on the mode);
* in-loop latency, last 10 rounds over the first 10, ≤ 1.1 at N=200 on every saver;
* the loop detector's decision per reply flat from 25 to 10,000 rounds, read here as: the
  longest thread's cost ≤ 1.1× the shortest's (:mod:`benchmarks.detector_cost`).

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=10, case="none", mode="sync", ms_per_round=v, ms_per_round_samples=[v])
    ...         for s, v in (("bare_toolnode", 2.0), ("create_agent", 2.2), ("langgraph-loop", 2.0))]
    >>> first = evaluate(rows)[0]
    >>> first.label, first.measured, first.verdict
    ('no checkpointer, N=10, sync: ms/round ×bare_toolnode', 1.0, 'PASS')
    >>> [r.verdict for r in evaluate(rows) if r.label.startswith("every cell")]
    ['PASS', 'not measured']
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from benchmarks.report import BASELINE, FLOOR, MODES, OURS, Lookup

__all__ = ["REACT", "TARGETS", "Cell", "Target", "TargetResult", "evaluate", "format_targets"]

REACT = "create_react_agent"
SAVERS = (("none", "no checkpointer"), ("memory", "InMemorySaver"), ("sqlite", "SqliteSaver"),
          ("postgres", "PostgresSaver"))
LABELS = dict(SAVERS)
NS = (10, 50, 200)
Metric = Literal["time", "bytes", "growth", "detector"]
Verdict = Literal["PASS", "FAIL", "not measured"]
Cell = tuple[str, int, str]
"""(case, N, mode)."""


@dataclass(frozen=True)
class Target:
    """Every cell's ``metric`` must be at most ``limit`` (below it when ``strict``)."""

    label: str
    metric: Metric
    limit: float
    cells: tuple[Cell, ...] = ()
    against: str | None = None
    """The system a time or bytes ratio is taken to."""
    strict: bool = False


@dataclass
class TargetResult:
    """A target with this run's worst measured cell."""

    label: str
    limit: float
    strict: bool
    measured: float | None
    verdict: Verdict
    worst: str | None
    measured_cells: int
    passed_cells: int
    total_cells: int
    paired: list[float] | None = field(default=None)
    """Time targets: the worst cell's ratio in every repetition (the systems took turns)."""


def _cells(cases: Sequence[str], ns: Sequence[int]) -> tuple[Cell, ...]:
    return tuple((case, n, mode) for case in cases for n in ns for mode in MODES)


def _targets() -> list[Target]:
    """Issue 24's list, in its order."""
    speed = f"ms/round ×{FLOOR}"
    targets = [
        Target(f"{LABELS[case]}, N=10, {mode}: {speed}", "time", 1.05, ((case, 10, mode),), FLOOR)
        for case in ("none", "sqlite") for mode in MODES
    ]
    targets += [
        Target(f"{label}, N ≥ 50: {speed}", "time", 1.0, _cells([case], (50, 200)), FLOOR)
        for case, label in SAVERS
    ]
    every = _cells([case for case, _ in SAVERS], NS)
    targets += [
        Target(f"every cell: ms/round ×{peer} (faster)", "time", 1.0, every, peer, strict=True)
        for peer in (BASELINE, REACT)
    ]
    targets += [
        Target(f"{label}: stored bytes after 200 rounds ×{BASELINE}", "bytes", 0.05,
               ((case, 200, "sync"),), BASELINE)
        for case, label in SAVERS[1:]
    ]
    targets += [
        Target(f"{label}, N=200: in-loop last10/first10", "growth", 1.1, _cells([case], (200,)))
        for case, label in SAVERS
    ]
    targets.append(Target("detector decision per reply: longest thread ÷ 25 rounds", "detector", 1.1))
    return targets


TARGETS: tuple[Target, ...] = tuple(_targets())


def _describe(cell: Cell) -> str:
    case, n, mode = cell
    return f"{LABELS.get(case, case)}, N={n}, {mode}"


def _value(table: Lookup, target: Target, cell: Cell) -> float | None:
    case, n, mode = cell
    if target.metric == "growth":
        return table.growth(OURS, n, case, mode)
    name = "ms_per_round" if target.metric == "time" else "bytes"
    assert target.against is not None
    return table.ratio(OURS, n, case, name, mode, against=target.against)


def _paired(table: Lookup, target: Target, cell: Cell) -> list[float] | None:
    """Per-repetition ratios in one cell (both systems ran every repetition, in turn)."""
    case, n, mode = cell
    assert target.against is not None
    ours = table.get(OURS, n, case, "ms_per_round_samples", mode)
    base = table.get(target.against, n, case, "ms_per_round_samples", mode)
    if not ours or not base or len(ours) != len(base):
        return None
    return [round(a / b, 3) for a, b in zip(ours, base, strict=True)]


def _passes(value: float, target: Target) -> bool:
    return value < target.limit if target.strict else value <= target.limit


def _detector(target: Target, rows: Sequence[dict[str, Any]] | None) -> TargetResult:
    """Cost of one decision on the longest thread over the shortest (minimum µs of each)."""
    if not rows or len(rows) < 2:
        return TargetResult(target.label, target.limit, False, None, "not measured", None, 0, 0, 1)
    value = rows[-1]["us_per_step"] / rows[0]["us_per_step"]
    ok = _passes(value, target)
    worst = f"{rows[-1]['rounds']:,} vs {rows[0]['rounds']:,} rounds"
    verdict: Verdict = "PASS" if ok else "FAIL"
    return TargetResult(target.label, target.limit, False, value, verdict, worst, 1, int(ok), 1)


def evaluate(
    results: Sequence[Any],
    detector_rows: Sequence[dict[str, Any]] | None = None,
    targets: Sequence[Target] = TARGETS,
) -> list[TargetResult]:
    """Every target on ``results`` (the overhead measurements) and the detector's cost rows."""
    table = Lookup(results)
    evaluated = []
    for target in targets:
        if target.metric == "detector":
            evaluated.append(_detector(target, detector_rows))
            continue
        values = [(cell, v) for cell in target.cells if (v := _value(table, target, cell)) is not None]
        passed = sum(_passes(v, target) for _, v in values)
        worst_cell, worst = max(values, key=lambda cv: cv[1]) if values else (None, None)
        verdict: Verdict = "not measured" if not values else "PASS" if passed == len(values) else "FAIL"
        result = TargetResult(
            target.label, target.limit, target.strict, worst, verdict,
            None if worst_cell is None else _describe(worst_cell), len(values), passed, len(target.cells),
        )
        if target.metric == "time" and worst_cell is not None:
            result.paired = _paired(table, target, worst_cell)
        evaluated.append(result)
    return evaluated


def _spread(values: list[float] | None) -> str:
    if not values:
        return "–"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def format_targets(results: Sequence[TargetResult]) -> str:
    """Markdown table: target, limit, worst measured cell, PASS/FAIL, cells passing, paired spread."""
    lines = [
        f"### Targets (issue 24; {OURS} vs the bare ToolNode loop ({FLOOR}), {BASELINE} and {REACT}, "
        "this run)",
        "",
        "| target | limit | measured (worst cell) | result | worst cell | cells passing / measured / total"
        " | worst cell, paired per rep: min / median / max |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        measured = "–" if r.measured is None else f"{r.measured:.3f}"
        limit = f"{'<' if r.strict else '≤'} {r.limit:g}"
        lines.append(
            f"| {r.label} | {limit} | {measured} | {r.verdict} | {r.worst or '–'}"
            f" | {r.passed_cells} / {r.measured_cells} / {r.total_cells} | {_spread(r.paired)} |"
        )
    met = sum(r.verdict == "PASS" for r in results)
    missing = sum(r.verdict == "not measured" for r in results)
    partial = sum(0 < r.measured_cells < r.total_cells for r in results)
    summary = f"{met} of {len(results)} targets met"
    if missing:
        summary += f"; {missing} not measured"
    if partial:
        summary += f"; {partial} measured on part of their cells only"
    return "\n".join([*lines, "", summary])
