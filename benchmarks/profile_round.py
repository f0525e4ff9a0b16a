"""Where the time of a clean tool round goes: our code vs LangGraph vs langchain-core vs the rest.

Runs the overhead benchmark's echo task (N clean rounds, no limit fires) for each system:
first unprofiled (median ms/round over ``--reps`` runs, after a warm-up), then under
``cProfile`` with one profiler per thread (``threading.setprofile`` starts one in every thread
the run creates, e.g. a tool thread pool), merged. Every function's self time goes to a bucket
by the module that defines it:

* ``self``: the module's own bucket; Python's stdlib, builtins, pydantic, database drivers and
  the like are ``other``;
* ``charged``: ``other`` time is charged up the call graph to the library that called it (in
  proportion to the caller edges' self time, as gprof does), so a ``deepcopy`` that LangGraph
  makes counts as LangGraph's.

Lock waits (``_thread.lock.acquire``: one thread waiting for another) are listed on their own
line in both views, as they overlap with the work of the thread being waited for. Percentages
are of the profiled time; ms/round scales them to the unprofiled time (cProfile slows
call-heavy code more, so read these as a split, not exact costs).

Run: ``python -m benchmarks.profile_round`` (N = 50, no checkpointer, langgraph-loop and
create_agent); ``--saver sqlite``, ``--n 200``, ``--systems langgraph-loop``, ``--top 20``.

Example:
    >>> bucket_of("/x/site-packages/langgraph/pregel/main.py", "langgraph.pregel.main")
    'langgraph'
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.overhead import PAYLOAD_2K, PROMPT
from benchmarks.savers import SaverKind, Savers
from benchmarks.scripted import EchoModel, make_echo
from benchmarks.systems import System, all_systems

__all__ = ["Profile", "bucket_of", "main", "profile_system"]

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
    if filename == "~":
        return OTHER
    names = [module] if module else []
    parts = Path(filename).with_suffix("").parts
    if "site-packages" in parts:
        names.append(".".join(parts[parts.index("site-packages") + 1:]))
    for name in names:
        for prefix, bucket in PREFIXES:
            if name == prefix or name.startswith(prefix + "."):
                return bucket
    return OTHER


def _module_index() -> dict[str, str]:
    """Source file → module name, for every loaded module."""
    index = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file:
            index[file] = name
            index[str(Path(file).resolve())] = name
    return index


@contextmanager
def profiling() -> Iterator[list[cProfile.Profile]]:
    """Profile the current thread and every thread started inside the block."""
    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_in_thread(*_: Any) -> None:
        profiler = cProfile.Profile()
        with lock:
            profilers.append(profiler)
        profiler.enable()  # replaces this hook in the new thread

    main = cProfile.Profile()
    profilers.append(main)
    threading.setprofile(start_in_thread)
    main.enable()
    try:
        yield profilers
    finally:
        main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]


@dataclass
class Profile:
    """One system's split: seconds per bucket (self and charged), timing, top functions."""

    system: str
    ms_per_round: float
    profiled_ms_per_round: float
    self_s: dict[str, float]
    charged_s: dict[str, float]
    top: list[tuple[str, float, float]]


class _Charger:
    """Charges ``other`` self time to the owning library up the caller graph (memoized)."""

    def __init__(self, stats: dict[Func, Any], buckets: dict[Func, str]) -> None:
        self.stats, self.buckets = stats, buckets
        self.memo: dict[Func, dict[str, float]] = {}

    def shares(self, func: Func, active: frozenset[Func] = frozenset()) -> dict[str, float]:
        """Fractions of ``func``'s time per owning bucket."""
        bucket = self.buckets.get(func, OTHER)
        if bucket in OWNERS:
            return {bucket: 1.0}
        if func in self.memo:
            return self.memo[func]
        callers = self.stats[func][4] if func in self.stats else {}
        total = sum(edge[2] for edge in callers.values())
        if not callers or total <= 0 or func in active or len(active) > 50:
            return {OTHER: 1.0}
        shares: dict[str, float] = defaultdict(float)
        for caller, edge in callers.items():
            for owner, part in self.shares(caller, active | {func}).items():
                shares[owner] += part * edge[2] / total
        self.memo[func] = dict(shares)
        return self.memo[func]


def _split(stats: dict[Func, Any]) -> tuple[dict[str, float], dict[str, float], dict[Func, str]]:
    index = _module_index()
    buckets = {f: bucket_of(f[0], index.get(f[0])) for f in stats}
    for func in stats:
        if func[0] == "~" and "acquire' of '_thread" in func[2]:
            buckets[func] = WAIT
    self_s: dict[str, float] = defaultdict(float)
    charged: dict[str, float] = defaultdict(float)
    charger = _Charger(stats, buckets)
    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        self_s[buckets[func]] += tt
        if buckets[func] == WAIT:
            charged[WAIT] += tt
            continue
        for owner, part in charger.shares(func).items():
            charged[owner] += tt * part
    return dict(self_s), dict(charged), buckets


def _run(system: System, n: int, saver_kind: SaverKind, payload: int, savers: Savers) -> float:
    """Seconds of one run (graph built outside the timed region)."""
    with savers.open(saver_kind) as saver:
        invoke = system.build(EchoModel(n_rounds=n), [make_echo(payload)], n, saver)
        start = time.perf_counter()
        invoke(PROMPT)
        return time.perf_counter() - start


def _name(func: Func) -> str:
    return f"{Path(func[0]).name}:{func[1]}({func[2]})"


def profile_system(system: System, n: int, saver: SaverKind, payload: int, reps: int, savers: Savers,
                   top: int = 10) -> Profile:
    """Time ``reps`` runs unprofiled, then profile ``reps`` runs and split their time."""
    _run(system, n, saver, payload, savers)  # warm-up
    plain = statistics.median(_run(system, n, saver, payload, savers) for _ in range(reps))
    profiled = 0.0
    merged: pstats.Stats | None = None
    for _ in range(reps):
        with profiling() as profilers:
            profiled += _run(system, n, saver, payload, savers)
        for profiler in profilers:
            profiler.create_stats()
            if not profiler.stats:  # type: ignore[attr-defined]
                continue
            if merged is None:
                merged = pstats.Stats(profiler)
            else:
                merged.add(profiler)
    assert merged is not None
    stats: dict[Func, Any] = merged.stats  # type: ignore[attr-defined]
    self_s, charged, buckets = _split(stats)
    ours = sorted((f for f in stats if buckets[f] == OURS), key=lambda f: -stats[f][2])[:top]
    per_run = 1.0 / reps
    return Profile(
        system=system.name,
        ms_per_round=plain * 1e3 / n,
        profiled_ms_per_round=profiled * 1e3 / n / reps,
        self_s={k: v * per_run for k, v in self_s.items()},
        charged_s={k: v * per_run for k, v in charged.items()},
        top=[(_name(f), stats[f][2] * per_run, stats[f][3] * per_run) for f in ours],
    )


def format_profiles(profiles: list[Profile], n: int, title: str) -> str:
    """Markdown: per bucket, ms/round and % for each system, self and charged; top functions of ours."""
    head = ["bucket"]
    for p in profiles:
        head += [f"{p.system} self ms/round (%)", f"{p.system} charged ms/round (%)"]
    lines = [f"### Where a clean round's time goes ({title})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for bucket in BUCKETS:
        cells = [bucket]
        for p in profiles:
            for split in (p.self_s, p.charged_s):
                share = split.get(bucket, 0.0) / (sum(split.values()) or 1.0)
                cells.append(f"{share * p.ms_per_round:.3f} ({share:.0%})")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for p in profiles:
        lines.append(f"- {p.system}: {p.ms_per_round:.3f} ms/round unprofiled, "
                     f"{p.profiled_ms_per_round:.3f} ms/round under cProfile")
    for p in profiles:
        if p.top:
            lines += ["", f"Top functions of langgraph_loop in {p.system} (ms per run: self, cumulative):"]
            lines += [f"- {name}: {tt * 1e3:.2f}, {ct * 1e3:.2f}" for name, tt, ct in p.top]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: profile the chosen systems and print the split."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_round",
                                     description=__doc__.split(":")[0])
    parser.add_argument("--n", type=int, default=50, help="tool rounds per run")
    parser.add_argument("--saver", default="none", choices=["none", "memory", "sqlite", "postgres"])
    parser.add_argument("--payload-2k", action="store_true", help="2 KB tool outputs")
    parser.add_argument("--reps", type=int, default=3, help="unprofiled and profiled runs each")
    parser.add_argument("--systems", default="langgraph-loop,create_agent")
    parser.add_argument("--top", type=int, default=10, help="top functions of our code to list")
    args = parser.parse_args(argv)
    wanted = [v.strip() for v in args.systems.split(",") if v.strip()]
    by_name = {s.name: s for s in all_systems()}
    missing = [w for w in wanted if w not in by_name or (not by_name[w].checkpoints and args.saver != "none")]
    if missing:
        print(f"unknown or unsuitable system(s): {', '.join(missing)}", file=sys.stderr)
        return 2
    payload = PAYLOAD_2K if args.payload_2k else 0
    with Savers() as savers:
        reason = savers.unavailable(args.saver)
        if reason:
            print(f"{args.saver} unavailable: {reason}", file=sys.stderr)
            return 2
        profiles = [profile_system(by_name[w], args.n, args.saver, payload, args.reps, savers, args.top)
                    for w in wanted]
    title = f"cProfile, N={args.n}, saver {args.saver}{', 2 KB out' if payload else ''}, {args.reps} runs"
    print(format_profiles(profiles, args.n, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
