"""The performance targets of issue 14, evaluated on one run of the overhead benchmark.

Every target compares ``langgraph-loop`` with ``create_agent`` measured in the same run
(``ratio`` of the medians; that decides pass/FAIL), except ``growth``: langgraph-loop's own
in-loop latency of the last 10 rounds over the first 10. Time targets also show the ratios per
repetition (the two systems ran back to back), whose spread shows how noisy the machine was.
A target whose case or N was not measured is reported as such. PostgreSQL gets the SQLite
limits (the issue asks for "the same ratios").

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=10, case="none", ms_per_round=v)
    ...         for s, v in (("create_agent", 2.0), ("langgraph-loop", 1.0))]
    >>> [t.verdict for t in evaluate(rows) if t.case == "none" and t.n == 10]
    ['pass']
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from benchmarks.report import BASELINE, Lookup

__all__ = ["SYSTEM", "TARGETS", "Target", "TargetResult", "evaluate", "format_targets"]

SYSTEM = "langgraph-loop"
Metric = Literal["ms_per_round", "bytes", "growth"]
SAVERS = (("memory", "InMemorySaver"), ("sqlite", "SqliteSaver"), ("postgres", "PostgresSaver"))


@dataclass(frozen=True)
class Target:
    """``metric`` of (``case``, ``n``) must be at most ``limit``."""

    label: str
    case: str
    n: int
    metric: Metric
    limit: float


@dataclass
class TargetResult:
    """A target with what this run measured (None when the case or N was not run)."""

    label: str
    case: str
    n: int
    metric: Metric
    limit: float
    measured: float | None
    verdict: Literal["pass", "FAIL", "not measured"]
    paired: list[float] | None = None
    """Time targets: langgraph-loop / create_agent per repetition (the two ran back to back)."""


SPEED = "ms/round ×create_agent"
STORED = "stored bytes after 200 rounds ×create_agent"


def _targets() -> list[Target]:
    """The issue's list, in its order; PostgreSQL mirrors SQLite."""
    targets = [Target(f"no checkpointer, N={n}: {SPEED}", "none", n, "ms_per_round", 0.6) for n in (10, 50)]
    targets.append(Target(f"no checkpointer, N=200: {SPEED}", "none", 200, "ms_per_round", 0.6))
    for key, label in SAVERS[1:]:
        for n, limit in ((10, 0.85), (200, 0.5)):
            targets.append(Target(f"{label}, N={n}: {SPEED}", key, n, "ms_per_round", limit))
            out2k = f"{label}, 2 KB out, N={n}: {SPEED}"
            targets.append(Target(out2k, f"{key}_2k", n, "ms_per_round", limit))
    targets.append(Target(f"InMemorySaver, N=200: {SPEED}", "memory", 200, "ms_per_round", 0.4))
    for key, label in SAVERS:
        targets.append(Target(f"{label}: {STORED}", key, 200, "bytes", 0.05))
    for key, label in SAVERS:
        targets.append(Target(f"{label}, 2 KB out: {STORED}", f"{key}_2k", 200, "bytes", 0.05))
    for key, label in SAVERS:
        targets.append(Target(f"{label}, N=200: in-loop last10/first10", key, 200, "growth", 1.2))
    return targets


TARGETS: tuple[Target, ...] = tuple(_targets())


def evaluate(results: Sequence[Any], targets: Sequence[Target] = TARGETS) -> list[TargetResult]:
    """Measure every target on ``results`` (the overhead benchmark's measurements)."""
    table = Lookup(results)
    evaluated = []
    for t in targets:
        if t.metric == "growth":
            value = table.growth(SYSTEM, t.n, t.case)
        else:
            value = table.ratio(SYSTEM, t.n, t.case, t.metric)
        verdict: Literal["pass", "FAIL", "not measured"]
        verdict = "not measured" if value is None else "pass" if value <= t.limit else "FAIL"
        result = TargetResult(t.label, t.case, t.n, t.metric, t.limit, value, verdict)
        if t.metric == "ms_per_round":
            result.paired = _paired(table, t)
        evaluated.append(result)
    return evaluated


def _paired(table: Lookup, target: Target) -> list[float] | None:
    """Per-repetition ratios; robust to load that drifts between repetitions."""
    ours = table.get(SYSTEM, target.n, target.case, "ms_per_round_samples")
    base = table.get(BASELINE, target.n, target.case, "ms_per_round_samples")
    if not ours or not base or len(ours) != len(base):
        return None
    return [round(a / b, 3) for a, b in zip(ours, base, strict=True)]


def _spread(values: list[float] | None) -> str:
    if not values:
        return "–"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def format_targets(results: Sequence[TargetResult]) -> str:
    """A compact markdown table: target, limit, measured, pass/FAIL, and a count."""
    lines = ["### Targets (issue 14; langgraph-loop vs create_agent, this run)", "",
             "| target | limit | measured | result | paired per rep: min / median / max |",
             "|---|---|---|---|---|"]
    for r in results:
        measured = "–" if r.measured is None else f"{r.measured:.3f}"
        lines.append(f"| {r.label} | ≤ {r.limit:g} | {measured} | {r.verdict} | {_spread(r.paired)} |")
    met = sum(r.verdict == "pass" for r in results)
    missing = sum(r.verdict == "not measured" for r in results)
    lines.append("")
    lines.append(f"{met} of {len(results)} targets met" + (f"; {missing} not measured" if missing else ""))
    return "\n".join(lines)
