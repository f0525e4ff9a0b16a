"""Markdown tables and the targets (issues 14 and 24) of one overhead run; every ratio compares
runs of the same run.

A target covers cells (saver case, N, mode): its measured value is the worst cell and it passes
when every measured cell does; cells not run are counted, not guessed (``not measured`` when none
was). Time targets also show the worst cell's ratio per repetition (the systems took turns).

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=3, case="none", mode="sync", ms_per_round=v, ms_per_round_samples=[v],
    ...           rounds_ok=True) for s, v in (("bare_toolnode", 1.0), ("create_agent", 2.0),
    ...                                         ("langgraph-loop", 1.5))]
    >>> print(cell_table(Lookup(rows)).splitlines()[-1])
    | no checkpointer | 3 | sync | 1.00 | 2.00 | 1.50 | 1.50× | 0.75× | yes |
    >>> at_3 = Target("every cell at N=3", "time", 1.6, (("none", 3, "sync"), ("none", 3, "async")), FLOOR)
    >>> (r,) = evaluate(rows, targets=[at_3])
    >>> r.verdict, r.measured, (r.passed_cells, r.measured_cells, r.total_cells), r.paired
    ('PASS', 1.5, (1, 1, 2), [1.5])
    >>> [r.verdict for r in evaluate(rows, [{"rounds": 25, "us_per_step": 40.0},
    ...  {"rounds": 10_000, "us_per_step": 41.0}]) if r.metric == "detector"]
    ['PASS']
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["BASELINE", "FLOOR", "ISSUE14", "ISSUE24", "OURS", "Lookup", "Target", "cell_table",
           "evaluate", "format_census", "format_tables", "format_targets"]

BASELINE, FLOOR, OURS, REACT = "create_agent", "bare_toolnode", "langgraph-loop", "create_react_agent"
MODES = ("sync", "async")
LABELS = {"none": "no checkpointer", "memory": "InMemorySaver", "sqlite": "SqliteSaver",
          "sqlite_2k": "SqliteSaver, 2 KB out", "postgres": "PostgresSaver",
          "postgres_2k": "PostgresSaver, 2 KB out", "memory_2k": "InMemorySaver, 2 KB out"}
TIMED = ("none", "memory", "sqlite", "sqlite_2k", "postgres", "postgres_2k")
STORED = ("memory", "sqlite", "postgres", "memory_2k", "sqlite_2k", "postgres_2k")


def _mode(m: Any) -> str:
    return str(getattr(m, "mode", "sync"))


class Lookup:
    """Index of the measurements by (system, N, case, mode), with ratios between systems."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.by = {(m.system, m.n, m.case, _mode(m)): m for m in results}
        self.systems = list(dict.fromkeys(m.system for m in results))
        self.ns = sorted({m.n for m in results})
        self.cases = {m.case for m in results}
        self.modes = [mode for mode in MODES if any(_mode(m) == mode for m in results)]
        self.results = results

    def get(self, system: str, n: int, case: str, name: str, mode: str = "sync") -> Any:
        """Attribute ``name`` of one measurement, or None when it was not measured."""
        return getattr(self.by.get((system, n, case, mode)), name, None)

    def ratio(self, system: str, n: int, case: str, name: str, mode: str = "sync",
              against: str = BASELINE) -> float | None:
        """``system``'s value divided by ``against``'s for the same N, case and mode."""
        value, base = self.get(system, n, case, name, mode), self.get(against, n, case, name, mode)
        return None if value is None or not base else float(value) / float(base)

    def growth(self, system: str, n: int, case: str, mode: str = "sync") -> float | None:
        """In-loop latency of the last 10 rounds over the first 10 (model-call gaps)."""
        first = self.get(system, n, case, "first10_ms", mode)
        last = self.get(system, n, case, "last10_ms", mode)
        return None if first is None or last is None or not first else float(last) / float(first)


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 1e6:.3f}" if value < 1e6 else f"{value / 1e6:.2f}"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _header(title: str, columns: Sequence[str]) -> list[str]:
    return [title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def cell_table(t: Lookup) -> str:
    """Per saver × N × mode: every system's ms per tool round and langgraph-loop's ratios."""
    systems = [s for s in t.systems if any(m.system == s and m.case in TIMED for m in t.results)]
    lines = _header(f"### Time per tool round, every system (ms = wall or CPU time / N, median; {OURS}"
                    f" ÷ {FLOOR} and ÷ {BASELINE} in the same cell)",
                    ["saver", "N", "mode", *systems, f"÷ {FLOOR}", f"÷ {BASELINE}", "rounds ok"])
    for key in TIMED:
        for n in t.ns:
            for mode in t.modes:
                cell = [m for m in t.results if m.case == key and m.n == n and _mode(m) == mode]
                if cell:
                    times = [t.get(s, n, key, "ms_per_round", mode) for s in systems]
                    ratios = [t.ratio(OURS, n, key, "ms_per_round", mode, base) for base in (FLOOR, BASELINE)]
                    lines.append(f"| {LABELS[key]} | {n} | {mode} | "
                                 + " | ".join("–" if v is None else f"{v:.2f}" for v in times)
                                 + f" | {' | '.join(map(_x, ratios))}"
                                 + f" | {'yes' if all(m.rounds_ok for m in cell) else 'NO'} |")
    return "\n".join(lines)


def _growth_table(t: Lookup) -> list[str]:
    cases = [key for key in TIMED if key in t.cases]
    lines = _header("### In-loop latency between model calls: first 10 → last 10 rounds, ms (last10/first10)",
                    ["system", "N", "mode", *(LABELS[key] for key in cases)])
    for n in t.ns:
        for s in t.systems:
            for mode in t.modes:
                cells = []
                for key in cases:
                    first, last = t.get(s, n, key, "first10_ms", mode), t.get(s, n, key, "last10_ms", mode)
                    growth = t.growth(s, n, key, mode)
                    cells.append("–" if first is None or growth is None
                                 else f"{first:.2f} → {last:.2f} ({growth:.2f})")
                if any(c != "–" for c in cells):
                    lines.append(f"| {s} | {n} | {mode} | {' | '.join(cells)} |")
    return lines


def _storage_table(t: Lookup) -> list[str]:
    cases = [key for key in STORED if key in t.cases]
    lines = _header("### Checkpoint storage after N rounds (MB (×create_agent); files: SQLite after "
                    "wal_checkpoint(TRUNCATE), PostgreSQL tables with TOAST and indexes)",
                    ["system", "N", "checkpoints", *(LABELS[key] for key in cases), "SQLite file",
                     "PostgreSQL tables"])
    for n in t.ns:
        for s in t.systems:
            counts = [c for key in cases if (c := t.get(s, n, key, "checkpoints")) is not None]
            if counts:
                cells = [f"{_mb(b)} ({_x(t.ratio(s, n, key, 'bytes'))})"
                         if (b := t.get(s, n, key, "bytes")) is not None else "–" for key in cases]
                lines.append(f"| {s} | {n} | {counts[0]} | {' | '.join(cells)} | "
                             f"{_mb(t.get(s, n, 'sqlite', 'file_bytes'))} | "
                             f"{_mb(t.get(s, n, 'postgres', 'file_bytes'))} |")
    return lines


def _memory_table(t: Lookup) -> list[str]:
    lines = _header("### Peak memory during one run (tracemalloc, MB)",
                    ["system", "N", *(LABELS[key] for key in ("none", "memory", "memory_2k"))])
    lines += [f"| {s} | {n} | " + " | ".join(_mb(t.get(s, n, key, "peak_bytes"))
                                             for key in ("none", "memory", "memory_2k")) + " |"
              for n in t.ns for s in t.systems]
    return lines


def format_tables(results: Sequence[Any]) -> str:
    """Markdown tables: every system per cell, latency growth, storage, peak memory."""
    t = Lookup(results)
    parts = [_growth_table(t)]
    if "sync" in t.modes:
        parts.append(_storage_table(t))
    if any(getattr(m, "peak_bytes", None) is not None for m in results):
        parts.append(_memory_table(t))
    return "\n\n".join([cell_table(t), *("\n".join(p) for p in parts)])


def format_census(rows: Sequence[dict[str, Any]], low: int, high: int) -> str:
    """Graph steps, checkpoints and node runs per round (slope from N=low to N=high) and per run."""
    lines = _header(f'### Graph steps and checkpoints (counted with stream_mode="debug" at N={low} and '
                    f"N={high})",
                    ["system", "steps/round", "checkpoints/round", "steps per run (fixed)",
                     "checkpoints per run (fixed)", f"steps at N={low}", f"checkpoints at N={low}",
                     "node runs per round", "node runs per run (fixed)"])
    for r in rows:
        if "steps" not in r:
            lines.append(f"| {r['system']} | not a graph | – | – | – | – | – | – | – |")
            continue
        (s_round, s_fixed), (c_round, c_fixed) = r["steps"], r["checkpoints"]
        nodes = [", ".join(f"{k} {v[i]:g}" for k, v in r["nodes"].items() if v[i]) or "–" for i in (0, 1)]
        lines.append(f"| {r['system']} | {s_round:g} | {c_round:g} | {s_fixed:g} | {c_fixed:g}"
                     f" | {r['at_low'][0]} | {r['at_low'][1]} | {nodes[0]} | {nodes[1]} |")
        if r["stored_mismatch"]:
            lines.append(f"\nWARNING: {r['system']}: checkpoint events differ from stored checkpoints")
    return "\n".join(lines)


# ---- targets ----------------------------------------------------------------------------------------

Metric = Literal["time", "bytes", "growth", "detector"]
Verdict = Literal["PASS", "FAIL", "not measured"]
Cell = tuple[str, int, str]
"""(case, N, mode)."""


@dataclass(frozen=True)
class Target:
    """Every cell's ``metric`` (a ratio to ``against``, or our own growth) must be ≤ ``limit``
    (below it when ``strict``)."""

    label: str
    metric: Metric
    limit: float
    cells: tuple[Cell, ...] = ()
    against: str | None = None
    strict: bool = False


@dataclass
class TargetResult:
    """A target with this run's worst measured cell."""

    label: str
    metric: Metric
    limit: float
    strict: bool
    measured: float | None
    verdict: Verdict
    worst: str | None
    measured_cells: int
    passed_cells: int
    total_cells: int
    paired: list[float] | None = field(default=None)


def _cells(cases: Sequence[str], ns: Sequence[int], modes: Sequence[str] = MODES) -> tuple[Cell, ...]:
    return tuple((case, n, mode) for case in cases for n in ns for mode in modes)


def _issue14() -> tuple[Target, ...]:
    """Issue 14: langgraph-loop against create_agent (sync runs); PostgreSQL mirrors SQLite."""
    speed, stored = f"ms/round ×{BASELINE}", f"stored bytes after 200 rounds ×{BASELINE}"
    out = [Target(f"no checkpointer, N={n}: {speed}", "time", 0.6, _cells(["none"], [n], ["sync"]), BASELINE)
           for n in (10, 50, 200)]
    out += [Target(f"{LABELS[key]}, N={n}: {speed}", "time", limit, _cells([key], [n], ["sync"]), BASELINE)
            for saver in ("sqlite", "postgres") for n, limit in ((10, 0.85), (200, 0.5))
            for key in (saver, f"{saver}_2k")]
    out.append(Target(f"InMemorySaver, N=200: {speed}", "time", 0.4, _cells(["memory"], [200], ["sync"]),
                      BASELINE))
    out += [Target(f"{LABELS[key]}: {stored}", "bytes", 0.05, _cells([key], [200], ["sync"]), BASELINE)
            for key in ("memory", "sqlite", "postgres", "memory_2k", "sqlite_2k", "postgres_2k")]
    out += [Target(f"{LABELS[key]}, N=200: in-loop last10/first10", "growth", 1.2,
                   _cells([key], [200], ["sync"]))
            for key in ("memory", "sqlite", "postgres")]
    return tuple(out)


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
    out.append(Target("detector decision per reply: longest thread ÷ 25 rounds", "detector", 1.1))
    return tuple(out)


ISSUE14, ISSUE24 = _issue14(), _issue24()


def _value(t: Lookup, target: Target, cell: Cell) -> float | None:
    case, n, mode = cell
    if target.metric == "growth":
        return t.growth(OURS, n, case, mode)
    name = "ms_per_round" if target.metric == "time" else "bytes"
    return t.ratio(OURS, n, case, name, mode, against=target.against or BASELINE)


def _paired(t: Lookup, target: Target, cell: Cell) -> list[float] | None:
    """Per-repetition ratios in one cell (both systems ran every repetition, in turn)."""
    case, n, mode = cell
    ours = t.get(OURS, n, case, "ms_per_round_samples", mode)
    base = t.get(target.against or BASELINE, n, case, "ms_per_round_samples", mode)
    if not ours or not base or len(ours) != len(base):
        return None
    return [round(a / b, 3) for a, b in zip(ours, base, strict=True)]


def evaluate(results: Sequence[Any], detector_rows: Sequence[dict[str, Any]] | None = None,
             targets: Sequence[Target] = ISSUE24) -> list[TargetResult]:
    """Every target on ``results`` (the overhead measurements) and the detector's cost rows."""
    t, out = Lookup(results), []
    for target in targets:
        def passes(v: float, target: Target = target) -> bool:
            return v < target.limit if target.strict else v <= target.limit

        if target.metric == "detector":  # the longest thread's decision over the shortest's (min µs)
            rows = detector_rows or []
            value = rows[-1]["us_per_step"] / rows[0]["us_per_step"] if len(rows) > 1 else None
            ok = value is not None and passes(value)
            verdict: Verdict = "not measured" if value is None else "PASS" if ok else "FAIL"
            worst = f"{rows[-1]['rounds']:,} vs {rows[0]['rounds']:,} rounds" if value is not None else None
            out.append(TargetResult(target.label, target.metric, target.limit, False, value, verdict, worst,
                                    int(value is not None), int(ok), 1))
            continue
        values = [(cell, v) for cell in target.cells if (v := _value(t, target, cell)) is not None]
        passed = sum(passes(v) for _, v in values)
        cell, worst_v = max(values, key=lambda cv: cv[1]) if values else (None, None)
        verdict = "not measured" if not values else "PASS" if passed == len(values) else "FAIL"
        result = TargetResult(target.label, target.metric, target.limit, target.strict, worst_v, verdict,
                              None if cell is None else f"{LABELS[cell[0]]}, N={cell[1]}, {cell[2]}",
                              len(values), passed, len(target.cells))
        if target.metric == "time" and cell is not None:
            result.paired = _paired(t, target, cell)
        out.append(result)
    return out


def _spread(values: list[float] | None) -> str:
    return "–" if not values else (f"{min(values):.2f} / {statistics.median(values):.2f} / "
                                   f"{max(values):.2f}")


def format_targets(results: Sequence[TargetResult], title: str) -> str:
    """Markdown table: target, limit, worst measured cell, PASS/FAIL, cells passing, paired spread."""
    lines = _header(f"### Targets ({title}, this run)",
                    ["target", "limit", "measured (worst cell)", "result", "worst cell",
                     "cells passing / measured / total", "worst cell, paired per rep: min / median / max"])
    for r in results:
        measured = "–" if r.measured is None else f"{r.measured:.3f}"
        lines.append(f"| {r.label} | {'<' if r.strict else '≤'} {r.limit:g} | {measured} | {r.verdict}"
                     f" | {r.worst or '–'} | {r.passed_cells} / {r.measured_cells} / {r.total_cells}"
                     f" | {_spread(r.paired)} |")
    met = sum(r.verdict == "PASS" for r in results)
    missing = sum(r.verdict == "not measured" for r in results)
    partial = sum(0 < r.measured_cells < r.total_cells for r in results)
    summary = f"{met} of {len(results)} targets met"
    summary += f"; {missing} not measured" if missing else ""
    summary += f"; {partial} measured on part of their cells only" if partial else ""
    return "\n".join([*lines, "", summary])
