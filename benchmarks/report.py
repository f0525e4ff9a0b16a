"""Markdown tables and the targets (issues 14 and 24) of one overhead run; every ratio compares
runs of the same run. A target covers cells (case, N, mode): its value is the worst measured cell,
it passes when every measured cell does; cells not run are counted, not guessed.

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=3, case="none", mode="sync", ms_per_round=v, ms_per_round_samples=[v],
    ...           rounds_ok=True) for s, v in (("bare_toolnode", 1.0), ("create_agent", 2.0),
    ...                                         ("langgraph-loop", 1.5))]
    >>> print(celltable(Lookup(rows)).splitlines()[-1])
    | no checkpointer | 3 | sync | 1.00 | 2.00 | 1.50 | 1.50× | 0.75× | yes |
    >>> at_3 = Target("every cell at N=3", "time", 1.6, (("none", 3, "sync"), ("none", 3, "async")), FLOOR)
    >>> (r,) = evaluate(rows, targets=[at_3])
    >>> r.verdict, r.measured, (r.passed_cells, r.measured_cells, r.total_cells), r.paired
    ('PASS', 1.5, (1, 1, 2), [1.5])
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

BASELINE, FLOOR, OURS, REACT = "create_agent", "bare_toolnode", "langgraph-loop", "create_react_agent"
MODES = ("sync", "async")
LABELS = {"none": "no checkpointer", "memory": "InMemorySaver", "sqlite": "SqliteSaver",
          "sqlite_2k": "SqliteSaver, 2 KB out", "postgres": "PostgresSaver",
          "postgres_2k": "PostgresSaver, 2 KB out", "memory_2k": "InMemorySaver, 2 KB out",
          "none_code": "no checkpointer, 5-50 KB coding out",
          "sqlite_code": "SqliteSaver, 5-50 KB coding out"}
TIMED = ("none", "memory", "sqlite", "sqlite_2k", "postgres", "postgres_2k", "none_code", "sqlite_code")
STORED = ("memory", "sqlite", "postgres", "memory_2k", "sqlite_2k", "postgres_2k")


class Lookup:
    """Index of the measurements by (system, N, case, mode), with ratios between systems."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.by = {(m.system, m.n, m.case, m.mode): m for m in results}
        self.systems = list(dict.fromkeys(m.system for m in results))
        self.ns, self.cases = sorted({m.n for m in results}), {m.case for m in results}
        self.modes = [mode for mode in MODES if any(m.mode == mode for m in results)]
        self.results = results

    def get(self, system: str, n: int, case: str, name: str, mode: str = "sync") -> Any:
        """Attribute ``name`` of one measurement, or None when it was not measured."""
        return getattr(self.by.get((system, n, case, mode)), name, None)

    def ratio(self, system: str, n: int, case: str, name: str, mode: str = "sync",
              against: str = BASELINE) -> float | None:
        """``system``'s value divided by ``against``'s in the same cell."""
        value, base = self.get(system, n, case, name, mode), self.get(against, n, case, name, mode)
        return None if value is None or not base else float(value) / float(base)

    def growth(self, system: str, n: int, case: str, mode: str = "sync") -> float | None:
        """In-loop latency of the last 10 rounds over the first 10 (model-call gaps)."""
        first, last = (self.get(system, n, case, k, mode) for k in ("first10_ms", "last10_ms"))
        return None if first is None or last is None or not first else float(last) / float(first)


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 1e6:.3f}" if value < 1e6 else f"{value / 1e6:.2f}"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return "\n".join([title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
                      *("| " + " | ".join(map(str, row)) + " |" for row in rows)])


def celltable(t: Lookup) -> str:
    """Per saver × N × mode: every system's ms per tool round and langgraph-loop's ratios."""
    systems = [s for s in t.systems if any(m.system == s and m.case in TIMED for m in t.results)]
    rows = []
    for key, n, mode in ((k, n, mode) for k in TIMED for n in t.ns for mode in t.modes):
        if cell := [m for m in t.results if (m.case, m.n, m.mode) == (key, n, mode)]:
            times = [t.get(s, n, key, "ms_per_round", mode) for s in systems]
            rows.append([LABELS[key], n, mode, *("–" if v is None else f"{v:.2f}" for v in times),
                         *(_x(t.ratio(OURS, n, key, "ms_per_round", mode, b)) for b in (FLOOR, BASELINE)),
                         "yes" if all(m.rounds_ok for m in cell) else "NO"])
    return table(f"### Time per tool round, every system (ms = wall or CPU time / N, median; {OURS}"
                  f" ÷ {FLOOR} and ÷ {BASELINE} in the same cell)",
                  ["saver", "N", "mode", *systems, f"÷ {FLOOR}", f"÷ {BASELINE}", "rounds ok"], rows)


def format_tables(results: Sequence[Any]) -> str:
    """Markdown tables: every system per cell, latency growth, storage, peak memory."""
    t = Lookup(results)
    timed, stored = [k for k in TIMED if k in t.cases], [k for k in STORED if k in t.cases]
    growth = [[s, n, mode, *("–" if (g := t.growth(s, n, k, mode)) is None else
                             f"{t.get(s, n, k, 'first10_ms', mode):.2f} → "
                             f"{t.get(s, n, k, 'last10_ms', mode):.2f} ({g:.2f})" for k in timed)]
              for n in t.ns for s in t.systems for mode in t.modes]
    parts = [celltable(t), table("### In-loop latency between model calls: first 10 → last 10 rounds, ms "
                                   "(last10/first10)", ["system", "N", "mode", *(LABELS[k] for k in timed)],
                                   [row for row in growth if any(c != "–" for c in row[3:])])]
    storage = [[s, n, counts[0], *(f"{_mb(b)} ({_x(t.ratio(s, n, k, 'bytes'))})"
                                   if (b := t.get(s, n, k, "bytes")) is not None else "–" for k in stored),
                _mb(t.get(s, n, "sqlite", "file_bytes")), _mb(t.get(s, n, "postgres", "file_bytes"))]
               for n in t.ns for s in t.systems
               if (counts := [c for k in stored if (c := t.get(s, n, k, "checkpoints")) is not None])]
    if storage:
        parts.append(table("### Checkpoint storage after N rounds (MB (×create_agent); files: SQLite after "
                            "wal_checkpoint(TRUNCATE), PostgreSQL tables with TOAST and indexes)",
                            ["system", "N", "checkpoints", *(LABELS[k] for k in stored), "SQLite file",
                             "PostgreSQL tables"], storage))
    if any(getattr(m, "peak_bytes", None) is not None for m in results):
        memory = ("none", "memory", "memory_2k")
        parts.append(table("### Peak memory during one run (tracemalloc, MB)",
                            ["system", "N", *(LABELS[k] for k in memory)],
                            [[s, n, *(_mb(t.get(s, n, k, "peak_bytes")) for k in memory)]
                             for n in t.ns for s in t.systems]))
    return "\n\n".join(parts)


def format_census(rows: Sequence[dict[str, Any]], low: int, high: int) -> str:
    """Graph steps, checkpoints and node runs per round (slope from N=low to N=high) and per run."""
    out = []
    for r in rows:
        if "steps" not in r:
            out.append([r["system"], "not a graph", *["–"] * 7])
            continue
        nodes = [", ".join(f"{k} {v[i]:g}" for k, v in r["nodes"].items() if v[i]) or "–" for i in (0, 1)]
        out.append([r["system"] + (" (WARNING: checkpoint events ≠ stored)" if r["stored_mismatch"] else ""),
                    f"{r['steps'][0]:g}", f"{r['checkpoints'][0]:g}", f"{r['steps'][1]:g}",
                    f"{r['checkpoints'][1]:g}", *r["at_low"], *nodes])
    return table(f'### Graph steps and checkpoints (counted with stream_mode="debug" at N={low} and '
                  f"N={high})",
                  ["system", "steps/round", "checkpoints/round", "steps per run (fixed)",
                   "checkpoints per run (fixed)", f"steps at N={low}", f"checkpoints at N={low}",
                   "node runs per round", "node runs per run (fixed)"], out)


Metric = Literal["time", "bytes", "growth"]
Cell = tuple[str, int, str]
"""(case, N, mode)."""


@dataclass(frozen=True)
class Target:
    """Every cell's ``metric`` (a ratio to ``against``, or our growth) must be ≤ ``limit`` (< if strict)."""

    label: str
    metric: Metric
    limit: float
    cells: tuple[Cell, ...] = ()
    against: str | None = None
    strict: bool = False


@dataclass
class TargetResult:
    """A target with this run's worst measured cell (time: its ratio in every repetition)."""

    label: str
    metric: Metric
    limit: float
    strict: bool
    measured: float | None
    verdict: Literal["PASS", "FAIL", "not measured"]
    worst: str | None
    measured_cells: int
    passed_cells: int
    total_cells: int
    paired: list[float] | None = None


def _cells(cases: Sequence[str], ns: Sequence[int], modes: Sequence[str] = MODES) -> tuple[Cell, ...]:
    return tuple((case, n, mode) for case in cases for n in ns for mode in modes)


def _issue24() -> tuple[Target, ...]:
    """Issue 24: against the bare ToolNode loop, create_agent and create_react_agent, both modes."""
    speed, savers = f"ms/round ×{FLOOR}", ("none", "memory", "sqlite", "postgres")
    out = [Target(f"{LABELS[case]}, N=10, {mode}: {speed}", "time", 1.05, ((case, 10, mode),), FLOOR)
           for case in ("none", "sqlite") for mode in MODES]
    out += [Target(f"{LABELS[case]}, N ≥ 50: {speed}", "time", 1.0, _cells([case], (50, 200)), FLOOR)
            for case in savers]
    out += [Target(f"every cell: ms/round ×{peer} (faster)", "time", 1.0, _cells(savers, (10, 50, 200)),
                   peer, strict=True) for peer in (BASELINE, REACT)]
    out += [Target(f"{LABELS[case]}: stored bytes after 200 rounds ×{BASELINE}", "bytes", 0.05,
                   ((case, 200, "sync"),), BASELINE) for case in savers[1:]]
    out += [Target(f"{LABELS[case]}, N=200: in-loop last10/first10", "growth", 1.1, _cells([case], (200,)))
            for case in savers]
    return tuple(out)  # the detector's decision, flat over thread length: benchmarks.detector_cost


ISSUE24 = _issue24()
ISSUE31 = tuple(Target(f"{LABELS[case]}, N=30: ms/round ×{BASELINE}", "time", limit, ((case, 30, "sync"),),
                       BASELINE) for case, limit in (("none_code", 1.1), ("sqlite_code", 0.8)))
"""Issue 31: rounds whose tool outputs are 5-50 KB (``python -m benchmarks --payload``)."""


def evaluate(results: Sequence[Any], targets: Sequence[Target] = ISSUE24) -> list[TargetResult]:
    """Every target on ``results`` (the overhead measurements)."""
    t, out = Lookup(results), []
    for target in targets:
        def passes(v: float, target: Target = target) -> bool:
            return v < target.limit if target.strict else v <= target.limit

        values: list[tuple[str, float]] = []
        for case, n, mode in target.cells:
            name = "ms_per_round" if target.metric == "time" else "bytes"
            value = (t.growth(OURS, n, case, mode) if target.metric == "growth"
                     else t.ratio(OURS, n, case, name, mode, target.against or BASELINE))
            values += [] if value is None else [(f"{LABELS.get(case, case)}, N={n}, {mode}", value)]
        worst, value = max(values, key=lambda cv: cv[1]) if values else (None, None)
        passed = sum(passes(v) for _, v in values)
        paired = None
        if target.metric == "time" and values:
            case, n, mode = next(c for c in target.cells
                                 if f"{LABELS.get(c[0], c[0])}, N={c[1]}, {c[2]}" == worst)
            ours, base = (t.get(s, n, case, "ms_per_round_samples", mode) for s in (OURS, target.against))
            if ours and base and len(ours) == len(base):
                paired = [round(a / b, 3) for a, b in zip(ours, base, strict=True)]
        out.append(TargetResult(target.label, target.metric, target.limit, target.strict, value,
                                "not measured" if not values else "PASS" if passed == len(values) else "FAIL",
                                worst, len(values), passed, len(target.cells), paired))
    return out


def format_targets(results: Sequence[TargetResult], title: str) -> str:
    """Markdown table: target, limit, worst measured cell, PASS/FAIL, cells passing, paired spread."""
    rows = [[r.label, f"{'<' if r.strict else '≤'} {r.limit:g}",
             "–" if r.measured is None else f"{r.measured:.3f}",
             r.verdict, r.worst or "–", f"{r.passed_cells} / {r.measured_cells} / {r.total_cells}",
             "–" if not r.paired else f"{min(r.paired):.2f} / {statistics.median(r.paired):.2f} / "
             f"{max(r.paired):.2f}"] for r in results]
    missing = sum(r.verdict == "not measured" for r in results)
    partial = sum(0 < r.measured_cells < r.total_cells for r in results)
    columns = ["target", "limit", "measured (worst cell)", "result", "worst cell",
               "cells passing / measured / total", "worst cell, paired per rep: min / median / max"]
    return (table(f"### Targets ({title}, this run)", columns, rows)
            + f"\n\n{sum(r.verdict == 'PASS' for r in results)} of {len(results)} targets met"
            + (f"; {missing} not measured" if missing else "")
            + (f"; {partial} measured on part of their cells only" if partial else ""))
