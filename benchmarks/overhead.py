"""Per-round framework overhead, checkpoint storage, graph steps and peak memory.

For every system and every N (tool rounds) the scripted :class:`~benchmarks.scripted.EchoModel`
calls ``echo`` N times and then answers. Measured, all with sync ``invoke``:

* timed cases (median ms/round over ``--reps`` runs after one warm-up per system and case):
  ``none`` (no checkpointer), ``memory`` (``InMemorySaver``), ``sqlite`` (``SqliteSaver``),
  ``postgres`` (``PostgresSaver`` on a throwaway local server), and ``sqlite_2k`` /
  ``postgres_2k`` with 2 KB tool outputs (with a checkpointer, peers other than ``create_agent``
  get 2 runs). The systems take turns within every repetition
  (rotating the order), so a ratio compares runs made at the same time on the same machine;
* per case: the in-loop latency between consecutive model calls (model timestamps; the median
  gap of the first 10 vs the last 10 rounds, median over the runs), and what the checkpointer
  stored (bytes, checkpoints). ``postgres``, ``sqlite_2k`` and ``postgres_2k`` run only for
  ``create_agent`` and ``langgraph-loop``;
* ``memory_2k``: one run with 2 KB tool outputs (storage only);
* peak memory: one extra ``tracemalloc`` run for ``none``, ``memory`` and ``memory_2k``;
* graph steps, node runs and checkpoints per round and per run (:mod:`benchmarks.census`);
* the issue-14 targets, evaluated on this run (:mod:`benchmarks.targets`).

Usage::

    python -m benchmarks                      # N = 10, 50, 200, 5 reps, every system
    python -m benchmarks --quick              # targets only: create_agent and langgraph-loop, 3 reps
    python -m benchmarks --only create_agent,langgraph-loop --cases none,sqlite --ns 10 --reps 9
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks.census import census, format_census
from benchmarks.report import BASELINE, format_tables
from benchmarks.savers import SaverKind, Savers, saver_stats
from benchmarks.scripted import EchoModel, ToolCounter, make_echo
from benchmarks.systems import System, all_systems
from benchmarks.targets import evaluate, format_targets

__all__ = ["CASES", "Case", "Measurement", "main", "measure_case", "run_benchmark"]

PROMPT = "Call echo once per turn until you are done, then answer."
PAYLOAD_2K = 2048
RESULTS = Path(__file__).parent / "results"
TARGET_SYSTEMS = (BASELINE, "langgraph-loop")
PEER_SAVER_REPS = 2
"""Timed runs with a checkpointer for the other peers (context only; the targets get ``--reps``)."""


@dataclass(frozen=True)
class Case:
    """One configuration: checkpointer kind, tool payload, repeated timing or a single run.

    ``peers=False``: only the systems the targets compare (:data:`TARGET_SYSTEMS`) run it, which
    keeps a full run under ten minutes (the other peers store up to 200 MB per run there).
    """

    key: str
    saver: SaverKind
    payload: int = 0
    timed: bool = False
    traced: bool = False
    peers: bool = True


CASES: tuple[Case, ...] = (
    Case("none", "none", timed=True, traced=True),
    Case("memory", "memory", timed=True, traced=True),
    Case("sqlite", "sqlite", timed=True),
    Case("postgres", "postgres", timed=True, peers=False),
    Case("memory_2k", "memory", PAYLOAD_2K, traced=True),
    Case("sqlite_2k", "sqlite", PAYLOAD_2K, timed=True, peers=False),
    Case("postgres_2k", "postgres", PAYLOAD_2K, timed=True, peers=False),
)


@dataclass
class Run:
    """One invocation of one system."""

    seconds: float
    gaps_ms: list[float]
    rounds_ok: bool
    stop_reason: str | None = None
    bytes: int | None = None
    checkpoints: int | None = None
    file_bytes: int | None = None
    peak_bytes: int | None = None


@dataclass
class Measurement:
    """Aggregated result for one (system, N, case)."""

    system: str
    n: int
    case: str
    runs: int
    ms_per_round: float
    ms_per_round_samples: list[float]
    first10_ms: float
    last10_ms: float
    rounds_ok: bool
    stop_reason: str | None = None
    bytes: int | None = None
    checkpoints: int | None = None
    file_bytes: int | None = None
    peak_bytes: int | None = None


def run_once(system: System, n: int, case: Case, savers: Savers, *, trace: bool = False) -> Run:
    """Build a fresh system (not timed) and time one invocation of N rounds."""
    counter = ToolCounter()
    model = EchoModel(n_rounds=n)
    tools = [make_echo(case.payload, counter)]
    with savers.open(case.saver) as saver:
        invoke = system.build(model, tools, n, saver)
        gc.collect()
        if trace:
            tracemalloc.start()
        start = time.perf_counter()
        result = invoke(PROMPT)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] if trace else None
        if trace:
            tracemalloc.stop()
        stats = saver_stats(saver)
    kinds = model.log.kinds
    return Run(
        seconds=seconds,
        gaps_ms=[(b - a) * 1e3 for a, b in itertools.pairwise(model.log.timestamps)],
        rounds_ok=counter.count == n and kinds.count("tool_calls") == n and kinds[-1] == "answer",
        stop_reason=_stop_reason(result),
        bytes=stats.bytes if stats else None,
        checkpoints=stats.checkpoints if stats else None,
        file_bytes=stats.file_bytes if stats else None,
        peak_bytes=peak,
    )


def _stop_reason(result: dict[str, Any]) -> str | None:
    reason = result.get("stop_reason")
    return None if reason is None else str(getattr(reason, "value", reason))


def _aggregate(system: str, n: int, case: Case, runs: list[Run]) -> Measurement:
    """Median over runs; storage numbers come from the last run (they are deterministic)."""
    per_round = [r.seconds * 1e3 / n for r in runs]
    last = runs[-1]
    return Measurement(
        system=system,
        n=n,
        case=case.key,
        runs=len(runs),
        ms_per_round=statistics.median(per_round),
        ms_per_round_samples=[round(v, 4) for v in per_round],
        first10_ms=statistics.median(statistics.median(r.gaps_ms[:10]) for r in runs),
        last10_ms=statistics.median(statistics.median(r.gaps_ms[-10:]) for r in runs),
        rounds_ok=all(r.rounds_ok for r in runs),
        stop_reason=last.stop_reason,
        bytes=last.bytes,
        checkpoints=last.checkpoints,
        file_bytes=last.file_bytes,
    )


def measure_case(
    systems: Sequence[System], n: int, case: Case, reps: int, savers: Savers, *, warm_up: bool = True
) -> list[Measurement]:
    """Measure one (N, case) for every system, the systems taking turns within each repetition."""
    if case.timed and warm_up:
        for system in systems:
            run_once(system, n, case, savers)
    runs: dict[str, list[Run]] = {s.name: [] for s in systems}
    for rep in range(reps if case.timed else 1):
        shift = rep % len(systems)
        for system in [*systems[shift:], *systems[:shift]]:
            if _takes_part(system, case, rep):
                runs[system.name].append(run_once(system, n, case, savers))
    results = []
    for system in systems:
        result = _aggregate(system.name, n, case, runs[system.name])
        if case.traced:
            result.peak_bytes = run_once(system, n, case, savers, trace=True).peak_bytes
        if not result.rounds_ok:
            print(f"  WARNING: {system.name} N={n} {case.key}: did not run exactly {n} rounds")
        results.append(result)
    return results


def _takes_part(system: System, case: Case, rep: int) -> bool:
    """Whether ``system`` runs repetition ``rep`` of ``case`` (see :data:`PEER_SAVER_REPS`)."""
    return case.saver == "none" or system.name in TARGET_SYSTEMS or rep < PEER_SAVER_REPS


def run_benchmark(
    systems: Sequence[System], ns: Sequence[int], reps: int, cases: Sequence[Case], savers: Savers
) -> list[Measurement]:
    """Measure every (N, case, system); progress goes to stderr."""
    results: list[Measurement] = []
    for n in ns:
        for case in cases:
            members = [
                s for s in systems
                if (case.saver == "none" or s.checkpoints) and (case.peers or s.name in TARGET_SYSTEMS)
            ]
            if not members:
                continue
            start = time.perf_counter()
            results += measure_case(members, n, case, reps, savers, warm_up=n == ns[0])
            print(f"  N={n:<4} {case.key:<12} {time.perf_counter() - start:6.1f}s", file=sys.stderr)
    return results


def _versions() -> dict[str, str]:
    packages = ["langgraph", "langgraph-prebuilt", "langchain", "langchain-core",
                "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres",
                "langgraph-loop"]
    found = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _meta(ns: Sequence[int], reps: int, cases: Sequence[Case], seconds: float) -> dict[str, Any]:
    return {
        "ns": list(ns),
        "reps": reps,
        "cases": [asdict(c) for c in cases],
        "python": platform.python_version(),
        "machine": platform.machine(),
        "packages": _versions(),
        "total_seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "baseline": BASELINE,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--ns", default="10,50,200", help="comma-separated tool-round counts")
    parser.add_argument("--reps", type=int, help="timed repetitions, median reported (5; 3 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"only {' and '.join(TARGET_SYSTEMS)} (what the targets compare), 3 reps")
    parser.add_argument("--only", help="comma-separated system names to run")
    parser.add_argument("--cases", help=f"comma-separated cases (all: {','.join(c.key for c in CASES)})")
    parser.add_argument("--json", type=Path, help="where to write the JSON results "
                        "(default benchmarks/results/overhead.json, overhead-quick.json with --quick)")
    return parser.parse_args(argv)


def _select(names: str | None, available: Sequence[Any], what: str) -> list[Any] | None:
    """The members of ``available`` named in ``names`` (all when None); None if one is unknown."""
    if not names:
        return list(available)
    wanted = {v.strip() for v in names.split(",") if v.strip()}
    unknown = wanted - {getattr(a, "name", getattr(a, "key", None)) for a in available}
    if unknown:
        print(f"unknown or unavailable {what}: {', '.join(sorted(unknown))}", file=sys.stderr)
        return None
    return [a for a in available if getattr(a, "name", getattr(a, "key", None)) in wanted]


def _usable_cases(cases: list[Case], savers: Savers) -> list[Case]:
    usable = []
    for case in cases:
        reason = savers.unavailable(case.saver)
        if reason is None:
            usable.append(case)
        else:
            print(f"case {case.key} skipped: {case.saver} unavailable ({reason})")
    return usable


def main(argv: list[str] | None = None) -> int:
    """Run the overhead benchmark, print markdown tables and the targets, write JSON."""
    args = parse_args(argv)
    ns = [int(v) for v in args.ns.split(",") if v.strip()]
    reps = max(1, args.reps or (3 if args.quick else 5))
    only = args.only or (",".join(TARGET_SYSTEMS) if args.quick else None)
    systems = _select(only, all_systems(), "system(s)")
    cases = _select(args.cases, CASES, "case(s)")
    if systems is None or cases is None:
        return 2
    out = args.json or RESULTS / ("overhead-quick.json" if args.quick else "overhead.json")
    start = time.perf_counter()
    with Savers() as savers:
        cases = _usable_cases(cases, savers)
        steps = census(systems, savers)
        results = run_benchmark(systems, ns, reps, cases, savers)
    seconds = time.perf_counter() - start
    targets = evaluate(results)
    print(format_tables(results))
    print("\n" + format_census(steps))
    print("\n" + format_targets(targets))
    print(f"\ntotal {seconds:.0f}s; JSON: {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "meta": _meta(ns, reps, cases, seconds),
        "results": [asdict(m) for m in results],
        "steps": [asdict(s) for s in steps],
        "targets": [asdict(t) for t in targets],
    }
    out.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
