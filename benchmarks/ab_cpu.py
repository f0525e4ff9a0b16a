"""CPU time per tool round of a few systems, interleaved in one process: a steadier A/B than
wall time on a shared or small machine (another process's work is not counted).

Each repetition runs every system once on the echo task (N clean rounds), in turn; the report
gives each system's median ``time.process_time()`` per round and its ratio to the first system.
The thread pools ``ToolNode`` starts are in the same process, so their CPU time counts too.

Run: ``python -m benchmarks.ab_cpu`` (bare ``ToolNode`` loop, the same loop over ``LoopState``,
langgraph-loop; N=10; no checkpointer); ``--n 50``, ``--saver sqlite``, ``--reps 40``,
``--systems bare_toolnode,create_agent``.

Example:
    >>> rows = ab_cpu(["bare_toolnode", "langgraph-loop"], n=2, saver="none", reps=2)
    >>> [name for name, _, _ in rows], rows[0][2]
    (['bare_toolnode', 'langgraph-loop'], 1.0)
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from benchmarks.scripted import EchoModel, make_echo
from benchmarks.systems import all_systems

__all__ = ["ab_cpu", "main"]

DEFAULT = "bare_toolnode,bare_toolnode_loopstate,langgraph-loop"


def _saver(kind: str) -> Any:
    if kind == "none":
        return None
    if kind == "sqlite":
        return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    raise ValueError(f"saver: none or sqlite, not {kind!r}")


def ab_cpu(names: Sequence[str], *, n: int, saver: str, reps: int) -> list[tuple[str, float, float]]:
    """``(system, median CPU ms per round, ratio to the first system)`` for each system."""
    by_name = {s.name: s for s in all_systems()}
    runs = {name: by_name[name].build(EchoModel(n_rounds=n), [make_echo()], n, _saver(saver))
            for name in names}
    for run in runs.values():  # warm-up
        run("go")
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(reps):
        for name, run in runs.items():
            start = time.process_time()
            run("go")
            times[name].append((time.process_time() - start) / n * 1000)
    medians = {name: statistics.median(values) for name, values in times.items()}
    first = medians[names[0]]
    return [(name, medians[name], round(medians[name] / first, 3)) for name in names]


def main(argv: list[str] | None = None) -> None:
    """Print one line per system."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--systems", default=DEFAULT, help=f"comma-separated (default {DEFAULT})")
    parser.add_argument("--n", type=int, default=10, help="tool rounds per run")
    parser.add_argument("--saver", default="none", choices=["none", "sqlite"])
    parser.add_argument("--reps", type=int, default=40)
    args = parser.parse_args(argv)
    names = [s for s in args.systems.split(",") if s]
    print(f"N={args.n}, saver {args.saver}, {args.reps} interleaved reps, CPU ms per round (median)")
    for name, ms, ratio in ab_cpu(names, n=args.n, saver=args.saver, reps=args.reps):
        print(f"  {name:26s} {ms:.3f}  x{ratio:.3f}")


if __name__ == "__main__":
    main()
