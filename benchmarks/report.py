"""Markdown tables for the overhead benchmark; every ratio compares runs of the same run.

The first table has one row per saver × N × mode (sync ``invoke`` / async ``ainvoke``): every
system's ms per tool round and langgraph-loop's ratios to the bare ``ToolNode`` loop and to
``create_agent`` (issue 24). The others are by system, with ratios to ``create_agent``:
time and storage for sync runs, the in-loop latency growth for both modes, peak memory.

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=10, case="none", mode="sync", ms_per_round=v, rounds_ok=True)
    ...         for s, v in (("bare_toolnode", 1.0), ("create_agent", 2.0), ("langgraph-loop", 1.5))]
    >>> Lookup(rows).ratio("langgraph-loop", 10, "none", "ms_per_round", against="bare_toolnode")
    1.5
    >>> print(cell_table(Lookup(rows)).splitlines()[-1])
    | no checkpointer | 10 | sync | 1.00 | 2.00 | 1.50 | 1.50× | 0.75× | yes |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BASELINE", "FLOOR", "OURS", "Lookup", "cell_table", "format_tables"]

BASELINE = "create_agent"
FLOOR = "bare_toolnode"
"""The bare two-node loop with LangGraph's ``ToolNode``: issue 24's yardstick."""
OURS = "langgraph-loop"
MODES = ("sync", "async")
TIMED = (("none", "no checkpointer"), ("memory", "InMemorySaver"), ("sqlite", "SqliteSaver"),
         ("sqlite_2k", "SqliteSaver, 2 KB out"), ("postgres", "PostgresSaver"),
         ("postgres_2k", "PostgresSaver, 2 KB out"))
STORED = (("memory", "InMemorySaver"), ("sqlite", "SQLite blobs"), ("postgres", "PostgreSQL"),
          ("memory_2k", "2 KB out: InMemorySaver"), ("sqlite_2k", "2 KB out: SQLite blobs"),
          ("postgres_2k", "2 KB out: PostgreSQL"))


def _mode(m: Any) -> str:
    return str(getattr(m, "mode", "sync"))


class Lookup:
    """Index of the measurements by (system, N, case, mode), with ratios between systems."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.by = {(m.system, m.n, m.case, _mode(m)): m for m in results}
        order: dict[str, int] = {}
        for m in results:
            order.setdefault(m.system, len(order))
        self.systems = list(order)
        self.rows = sorted({(m.system, m.n) for m in results}, key=lambda k: (k[1], order[k[0]]))
        self.ns = sorted({m.n for m in results})
        self.cases = {m.case for m in results}
        self.modes = [mode for mode in MODES if any(_mode(m) == mode for m in results)]
        self.results = results

    def get(self, system: str, n: int, case: str, name: str, mode: str = "sync") -> Any:
        """Attribute ``name`` of one measurement, or None when it was not measured."""
        m = self.by.get((system, n, case, mode))
        return None if m is None else getattr(m, name, None)

    def ratio(
        self, system: str, n: int, case: str, name: str, mode: str = "sync", against: str = BASELINE
    ) -> float | None:
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


def _with_ratio(value: str, ratio: float | None) -> str:
    if value == "–":
        return value
    return value if ratio is None else f"{value} ({ratio:.2f}×)"


def _header(title: str, columns: Sequence[str]) -> list[str]:
    return [title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def cell_table(t: Lookup) -> str:
    """Per saver × N × mode: every system's ms per tool round and langgraph-loop's ratios."""
    systems = [s for s in t.systems if any(m.system == s for m in t.results if m.case in dict(TIMED))]
    lines = _header(
        f"### Time per tool round, every system (ms = wall time / N, median; {OURS} ÷ {FLOOR} "
        f"and ÷ {BASELINE} in the same cell)",
        ["saver", "N", "mode", *systems, f"÷ {FLOOR}", f"÷ {BASELINE}", "rounds ok"],
    )
    for key, label in TIMED:
        for n in t.ns:
            for mode in t.modes:
                cell = [m for m in t.results if m.case == key and m.n == n and _mode(m) == mode]
                if not cell:
                    continue
                times = [t.get(s, n, key, "ms_per_round", mode) for s in systems]
                ratios = [t.ratio(OURS, n, key, "ms_per_round", mode, base) for base in (FLOOR, BASELINE)]
                ok = "yes" if all(m.rounds_ok for m in cell) else "NO"
                lines.append(
                    f"| {label} | {n} | {mode} | "
                    + " | ".join("–" if v is None else f"{v:.2f}" for v in times)
                    + f" | {' | '.join(_times(r) for r in ratios)} | {ok} |"
                )
    return "\n".join(lines)


def _time_table(t: Lookup) -> list[str]:
    cases = [(key, label) for key, label in TIMED if key in t.cases]
    lines = _header(
        "### Time per tool round by system (sync invoke; ms = wall time / N, median; (×create_agent))",
        ["system", "N", *(label for _, label in cases), "rounds ok"],
    )
    for s, n in t.rows:
        cells = []
        for key, _ in cases:
            ms = t.get(s, n, key, "ms_per_round")
            cells.append(_with_ratio("–" if ms is None else f"{ms:.2f}", t.ratio(s, n, key, "ms_per_round")))
        ok = all(m.rounds_ok for m in t.results if m.system == s and m.n == n)
        lines.append(f"| {s} | {n} | {' | '.join(cells)} | {'yes' if ok else 'NO'} |")
    return lines


def _growth_table(t: Lookup) -> list[str]:
    cases = [(key, label) for key, label in TIMED if key in t.cases]
    lines = _header(
        "### In-loop latency between model calls: first 10 → last 10 rounds, ms (last10/first10)",
        ["system", "N", "mode", *(label for _, label in cases)],
    )
    for s, n in t.rows:
        for mode in t.modes:
            cells = []
            for key, _ in cases:
                first, last = t.get(s, n, key, "first10_ms", mode), t.get(s, n, key, "last10_ms", mode)
                growth = t.growth(s, n, key, mode)
                missing = first is None or growth is None
                cells.append("–" if missing else f"{first:.2f} → {last:.2f} ({growth:.2f})")
            if any(c != "–" for c in cells):
                lines.append(f"| {s} | {n} | {mode} | {' | '.join(cells)} |")
    return lines


def _storage_table(t: Lookup) -> list[str]:
    cases = [(key, label) for key, label in STORED if key in t.cases]
    lines = _header(
        "### Checkpoint storage after N rounds (MB (×create_agent); files: SQLite after "
        "wal_checkpoint(TRUNCATE), PostgreSQL tables with TOAST and indexes)",
        ["system", "N", "checkpoints", *(label for _, label in cases), "SQLite file", "PostgreSQL tables"],
    )
    for s, n in t.rows:
        if all(t.get(s, n, key, "bytes") is None for key, _ in cases):
            continue
        count = next((t.get(s, n, key, "checkpoints") for key, _ in cases
                      if t.get(s, n, key, "checkpoints") is not None), None)
        cells = [_with_ratio(_mb(t.get(s, n, key, "bytes")), t.ratio(s, n, key, "bytes")) for key, _ in cases]
        lines.append(
            f"| {s} | {n} | {'–' if count is None else count} | {' | '.join(cells)}"
            f" | {_mb(t.get(s, n, 'sqlite', 'file_bytes'))} | {_mb(t.get(s, n, 'postgres', 'file_bytes'))} |"
        )
    return lines


def _memory_table(t: Lookup) -> list[str]:
    lines = _header(
        "### Peak memory during one run (tracemalloc, MB)",
        ["system", "N", "no checkpointer", "InMemorySaver", "InMemorySaver, 2 KB out"],
    )
    for s, n in t.rows:
        lines.append(
            f"| {s} | {n} | {_mb(t.get(s, n, 'none', 'peak_bytes'))}"
            f" | {_mb(t.get(s, n, 'memory', 'peak_bytes'))}"
            f" | {_mb(t.get(s, n, 'memory_2k', 'peak_bytes'))} |"
        )
    return lines


def format_tables(results: Sequence[Any]) -> str:
    """Markdown tables: every system per cell, time by system, latency growth, storage, memory."""
    table = Lookup(results)
    parts = [_growth_table(table)]
    if "sync" in table.modes:
        parts = [_time_table(table), *parts, _storage_table(table)]
    if any(getattr(m, "peak_bytes", None) is not None for m in results):
        parts.append(_memory_table(table))
    return "\n\n".join([cell_table(table), *("\n".join(p) for p in parts)])
