"""Where a clean round's time goes, by library (``python -m benchmarks --profile``).

``cProfile`` around ``invoke`` only, one profiler per thread the run starts, merged. Self time goes
to the bucket of the defining module (stdlib, pydantic, drivers: ``other``); *charged* moves
``other`` time up the call graph to the library that called it, in proportion to the caller edges'
time (as gprof does). Lock waits are a line of their own. Shares are of the profiled time, scaled to
the unprofiled median: a split, not exact costs.

Example:
    >>> bucket_of("/x/site-packages/langgraph/pregel/main.py", "langgraph.pregel.main")
    'langgraph'
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Profile", "bucket_of", "format_profiles", "profiling", "split"]

OURS, LANGGRAPH, CHECKPOINT = "langgraph_loop (ours)", "langgraph", "langgraph checkpoint+serde"
CORE, LANGCHAIN, HARNESS = "langchain-core", "langchain (agents)", "harness (scripted model, echo)"
OTHER, WAIT = "other", "lock waits"
BUCKETS = (OURS, LANGGRAPH, CHECKPOINT, CORE, LANGCHAIN, HARNESS, OTHER, WAIT)
OWNERS = {OURS, LANGGRAPH, CHECKPOINT, CORE, LANGCHAIN, HARNESS}
PREFIXES = (("langgraph_loop", OURS), ("langgraph.checkpoint", CHECKPOINT), ("langgraph", LANGGRAPH),
            ("langchain_core", CORE), ("langchain", LANGCHAIN), ("benchmarks", HARNESS))
Func = tuple[str, int, str]


def bucket_of(filename: str, module: str | None) -> str:
    """The bucket of code in ``filename`` (defining ``module``, when known)."""
    parts = Path(filename).with_suffix("").parts
    names = [module] if module else []
    if "site-packages" in parts:
        names.append(".".join(parts[parts.index("site-packages") + 1:]))
    return next((bucket for name in names for prefix, bucket in PREFIXES
                 if filename != "~" and (name == prefix or name.startswith(prefix + "."))), OTHER)


@contextmanager
def profiling() -> Iterator[list[cProfile.Profile]]:
    """Profile the current thread and every thread started inside the block."""
    profilers = [cProfile.Profile()]
    lock = threading.Lock()

    def start_in_thread(*_: Any) -> None:
        profiler = cProfile.Profile()
        with lock:
            profilers.append(profiler)
        profiler.enable()  # replaces this hook in the new thread

    threading.setprofile(start_in_thread)
    profilers[0].enable()
    try:
        yield profilers
    finally:
        profilers[0].disable()
        threading.setprofile(None)  # type: ignore[arg-type]


@dataclass
class Profile:
    """One system's split: seconds per run and bucket (self and charged), top functions of ours."""

    system: str
    ms_per_round: float
    profiled_ms_per_round: float
    self_s: dict[str, float]
    charged_s: dict[str, float]
    top: list[tuple[str, float, float]]


def split(system: str, profilers: list[cProfile.Profile], runs: int, n: int, ms_per_round: float,
          profiled_s: float, top: int = 10) -> Profile:
    """Merge the profilers of ``runs`` runs of ``n`` rounds and split their time into buckets."""
    merged: pstats.Stats | None = None
    for profiler in profilers:
        profiler.create_stats()
        if profiler.stats:  # type: ignore[attr-defined]
            merged = pstats.Stats(profiler) if merged is None else merged.add(profiler)
    assert merged is not None
    stats: dict[Func, Any] = merged.stats  # type: ignore[attr-defined]
    index = {}
    for name, module in list(sys.modules.items()):
        if file := getattr(module, "__file__", None):
            index[file] = index[str(Path(file).resolve())] = name
    buckets = {f: WAIT if f[0] == "~" and "acquire' of '_thread" in f[2]
               else bucket_of(f[0], index.get(f[0])) for f in stats}
    memo: dict[Func, dict[str, float]] = {}

    def shares(func: Func, active: frozenset[Func] = frozenset()) -> dict[str, float]:
        """Fractions of ``func``'s time per owning bucket, up the caller graph (memoized)."""
        if buckets.get(func, OTHER) in OWNERS:
            return {buckets[func]: 1.0}
        if func in memo:
            return memo[func]
        callers = stats[func][4] if func in stats else {}
        total = sum(edge[2] for edge in callers.values())
        if not callers or total <= 0 or func in active or len(active) > 50:
            return {OTHER: 1.0}
        out: dict[str, float] = defaultdict(float)
        for caller, edge in callers.items():
            for owner, part in shares(caller, active | {func}).items():
                out[owner] += part * edge[2] / total
        memo[func] = dict(out)
        return memo[func]

    self_s: dict[str, float] = defaultdict(float)
    charged: dict[str, float] = defaultdict(float)
    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        self_s[buckets[func]] += tt / runs
        for owner, part in ({WAIT: 1.0} if buckets[func] == WAIT else shares(func)).items():
            charged[owner] += tt * part / runs
    ours = sorted((f for f in stats if buckets[f] == OURS), key=lambda f: -stats[f][2])[:top]
    return Profile(system, ms_per_round, profiled_s * 1e3 / n / runs, dict(self_s), dict(charged),
                   [(f"{Path(f[0]).name}:{f[1]}({f[2]})", stats[f][2] / runs, stats[f][3] / runs)
                    for f in ours])


def format_profiles(profiles: list[Profile], title: str) -> str:
    """Markdown: per bucket, ms/round and % for each system, self and charged; top functions of ours."""
    head = ["bucket", *(f"{p.system} {view} ms/round (%)" for p in profiles for view in ("self", "charged"))]
    lines = [f"### Where a clean round's time goes ({title})", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for bucket in BUCKETS:
        cells = [bucket]
        for p in profiles:
            for view in (p.self_s, p.charged_s):
                share = view.get(bucket, 0.0) / (sum(view.values()) or 1.0)
                cells.append(f"{share * p.ms_per_round:.3f} ({share:.0%})")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(f"- {p.system}: {p.ms_per_round:.3f} ms/round unprofiled, {p.profiled_ms_per_round:.3f}"
                    " ms/round under cProfile" for p in profiles)]
    for p in profiles:
        lines += ["", f"Top functions of langgraph_loop in {p.system} (ms per run: self, cumulative):",
                  *(f"- {name}: {tt * 1e3:.2f}, {ct * 1e3:.2f}" for name, tt, ct in p.top)] if p.top else []
    return "\n".join(lines)
