"""Markdown tables for the overhead benchmark; every ratio is to ``create_agent`` in the same run.

Example:
    >>> from types import SimpleNamespace as M
    >>> rows = [M(system=s, n=10, case="none", ms_per_round=v)
    ...         for s, v in (("create_agent", 2.0), ("x", 1.0))]
    >>> Lookup(rows).ratio("x", 10, "none", "ms_per_round")
    0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BASELINE", "Lookup", "format_tables"]

BASELINE = "create_agent"
TIMED = (("none", "no checkpointer"), ("memory", "InMemorySaver"), ("sqlite", "SqliteSaver"),
         ("sqlite_2k", "SqliteSaver, 2 KB out"), ("postgres", "PostgresSaver"),
         ("postgres_2k", "PostgresSaver, 2 KB out"))
STORED = (("memory", "InMemorySaver"), ("sqlite", "SQLite blobs"), ("postgres", "PostgreSQL"),
          ("memory_2k", "2 KB out: InMemorySaver"), ("sqlite_2k", "2 KB out: SQLite blobs"),
          ("postgres_2k", "2 KB out: PostgreSQL"))


class Lookup:
    """Index of the measurements by (system, N, case), with ratios to the baseline."""

    def __init__(self, results: Sequence[Any]) -> None:
        self.by = {(m.system, m.n, m.case): m for m in results}
        order: dict[str, int] = {}
        for m in results:
            order.setdefault(m.system, len(order))
        self.rows = sorted({(m.system, m.n) for m in results}, key=lambda k: (k[1], order[k[0]]))
        self.cases = {m.case for m in results}
        self.results = results

    def get(self, system: str, n: int, case: str, name: str) -> Any:
        """Attribute ``name`` of one measurement, or None when it was not measured."""
        m = self.by.get((system, n, case))
        return None if m is None else getattr(m, name, None)

    def ratio(self, system: str, n: int, case: str, name: str) -> float | None:
        """``system``'s value divided by the baseline's for the same N and case."""
        value, base = self.get(system, n, case, name), self.get(BASELINE, n, case, name)
        return None if value is None or not base else float(value) / float(base)

    def growth(self, system: str, n: int, case: str) -> float | None:
        """In-loop latency of the last 10 rounds over the first 10 (model-call gaps)."""
        first, last = self.get(system, n, case, "first10_ms"), self.get(system, n, case, "last10_ms")
        return None if first is None or not first else float(last) / float(first)


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 1e6:.3f}" if value < 1e6 else f"{value / 1e6:.2f}"


def _with_ratio(value: str, ratio: float | None) -> str:
    if value == "–":
        return value
    return value if ratio is None else f"{value} ({ratio:.2f}×)"


def _header(title: str, columns: Sequence[str]) -> list[str]:
    return [title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def _time_table(t: Lookup) -> list[str]:
    cases = [(key, label) for key, label in TIMED if key in t.cases]
    lines = _header(
        "### Time per tool round (sync invoke; ms = wall time / N, median; (×create_agent))",
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
        ["system", "N", *(label for _, label in cases)],
    )
    for s, n in t.rows:
        cells = []
        for key, _ in cases:
            first, last = t.get(s, n, key, "first10_ms"), t.get(s, n, key, "last10_ms")
            growth = t.growth(s, n, key)
            missing = first is None or growth is None
            cells.append("–" if missing else f"{first:.2f} → {last:.2f} ({growth:.2f})")
        lines.append(f"| {s} | {n} | {' | '.join(cells)} |")
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
    """Markdown tables: time, in-loop latency growth, storage, peak memory."""
    table = Lookup(results)
    parts = [_time_table(table), _growth_table(table), _storage_table(table), _memory_table(table)]
    return "\n\n".join("\n".join(p) for p in parts)
