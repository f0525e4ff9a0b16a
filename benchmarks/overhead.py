"""Per-round framework overhead, checkpoint storage and peak memory.

For every system and every N (tool rounds) the scripted :class:`~benchmarks.scripted.EchoModel`
calls ``echo`` N times and then answers. Measured, all with sync ``invoke``:

* ``none``: no checkpointer, median ms/round over ``--reps`` runs (one warm-up per system and case), and the
  in-loop latency between consecutive model calls (model timestamps) of the first 10 vs the
  last 10 rounds;
* ``memory``: the same with ``InMemorySaver``, plus the bytes it holds and the checkpoint count;
* ``sqlite``: one run with ``SqliteSaver`` (file in a temp dir): file size and blob bytes;
* ``memory_2k`` / ``sqlite_2k``: one run each with 2 KB tool outputs;
* peak memory: one extra ``tracemalloc`` run for ``none``, ``memory`` and ``memory_2k``.

Usage::

    python -m benchmarks                      # N = 10, 50, 200
    python -m benchmarks --quick              # N = 10, 50 and 2 reps (smoke test)
    python -m benchmarks --only create_agent --ns 50 --reps 3 --json /tmp/o.json
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
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks.savers import SaverKind, open_saver, saver_stats
from benchmarks.scripted import EchoModel, ToolCounter, make_echo
from benchmarks.systems import System, all_systems

__all__ = ["Case", "Measurement", "main", "measure", "run_benchmark"]

PROMPT = "Call echo once per turn until you are done, then answer."
PAYLOAD_2K = 2048
BASELINE = "create_agent"
DEFAULT_JSON = Path(__file__).parent / "results" / "overhead.json"


@dataclass(frozen=True)
class Case:
    """One configuration: checkpointer kind, tool payload, repeated timing or a single run."""

    key: str
    saver: SaverKind
    payload: int = 0
    timed: bool = False
    traced: bool = False


CASES: tuple[Case, ...] = (
    Case("none", "none", timed=True, traced=True),
    Case("memory", "memory", timed=True, traced=True),
    Case("sqlite", "sqlite"),
    Case("memory_2k", "memory", PAYLOAD_2K, traced=True),
    Case("sqlite_2k", "sqlite", PAYLOAD_2K),
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


def run_once(system: System, n: int, case: Case, tmp: Path, *, trace: bool = False) -> Run:
    """Build a fresh system (not timed) and time one invocation of N rounds."""
    counter = ToolCounter()
    model = EchoModel(n_rounds=n)
    tools = [make_echo(case.payload, counter)]
    with open_saver(case.saver, tmp) as saver:
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
    stamps = model.log.timestamps
    kinds = model.log.kinds
    return Run(
        seconds=seconds,
        gaps_ms=[(b - a) * 1e3 for a, b in itertools.pairwise(stamps)],
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
        first10_ms=statistics.median(statistics.fmean(r.gaps_ms[:10]) for r in runs),
        last10_ms=statistics.median(statistics.fmean(r.gaps_ms[-10:]) for r in runs),
        rounds_ok=all(r.rounds_ok for r in runs),
        stop_reason=last.stop_reason,
        bytes=last.bytes,
        checkpoints=last.checkpoints,
        file_bytes=last.file_bytes,
    )


def measure(system: System, n: int, case: Case, reps: int, tmp: Path, *, warm_up: bool = True) -> Measurement:
    """Time ``reps`` runs (timed cases, after a warm-up) or one run, plus a traced run if asked."""
    if case.timed:
        if warm_up:
            run_once(system, n, case, tmp)
        runs = [run_once(system, n, case, tmp) for _ in range(reps)]
    else:
        runs = [run_once(system, n, case, tmp)]
    result = _aggregate(system.name, n, case, runs)
    if case.traced:
        result.peak_bytes = run_once(system, n, case, tmp, trace=True).peak_bytes
    if not result.rounds_ok:
        print(f"  WARNING: {system.name} N={n} {case.key}: did not run exactly {n} rounds")
    return result


def run_benchmark(systems: list[System], ns: list[int], reps: int) -> list[Measurement]:
    """Measure every (system, N, case); progress goes to stderr."""
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="langgraph-loop-bench-") as tmp:
        for system in systems:
            for n in ns:
                for case in CASES:
                    if case.saver != "none" and not system.checkpoints:
                        continue
                    start = time.perf_counter()
                    warm_up = n == ns[0]  # one warm-up per (system, case) is enough
                    results.append(measure(system, n, case, reps, Path(tmp), warm_up=warm_up))
                    elapsed = time.perf_counter() - start
                    print(
                        f"  {system.name:<20} N={n:<4} {case.key:<10} {elapsed:6.1f}s",
                        file=sys.stderr,
                    )
    return results


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 1e6:.3f}" if value < 1e6 else f"{value / 1e6:.2f}"


def _ratio(value: float | None, base: float | None) -> str:
    return "–" if value is None or not base else f"{value / base:.2f}×"


class _Table:
    """Lookup helper over the measurements for the table formatters."""

    def __init__(self, results: list[Measurement]) -> None:
        self.by = {(m.system, m.n, m.case): m for m in results}
        order = {m.system: i for i, m in reversed(list(enumerate(results)))}
        self.rows = sorted({(m.system, m.n) for m in results}, key=lambda k: (k[1], order[k[0]]))
        self.results = results

    def get(self, system: str, n: int, case: str, name: str) -> Any:
        """Attribute ``name`` of one measurement, or None when it was not measured."""
        m = self.by.get((system, n, case))
        return None if m is None else getattr(m, name)

    def ratio(self, system: str, n: int, case: str, name: str) -> str:
        """``system``'s value divided by the baseline's for the same N and case."""
        return _ratio(self.get(system, n, case, name), self.get(BASELINE, n, case, name))


def _time_table(t: _Table) -> list[str]:
    lines = [
        "### Time (sync invoke; ms per round = wall time / N, median)",
        "",
        "| system | N | ms/round | ×create_agent | in-loop first10 → last10 ms"
        " | InMemorySaver ms/round | ×create_agent | SqliteSaver ms/round | rounds ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s, n in t.rows:
        first, last = t.get(s, n, "none", "first10_ms"), t.get(s, n, "none", "last10_ms")
        loop = "–" if first is None else f"{first:.2f} → {last:.2f}"
        ok = all(m.rounds_ok for m in t.results if m.system == s and m.n == n)
        lines.append(
            f"| {s} | {n} | {_fmt(t.get(s, n, 'none', 'ms_per_round'))}"
            f" | {t.ratio(s, n, 'none', 'ms_per_round')} | {loop}"
            f" | {_fmt(t.get(s, n, 'memory', 'ms_per_round'))}"
            f" | {t.ratio(s, n, 'memory', 'ms_per_round')}"
            f" | {_fmt(t.get(s, n, 'sqlite', 'ms_per_round'))} | {'yes' if ok else 'NO'} |"
        )
    return lines


def _storage_table(t: _Table) -> list[str]:
    lines = [
        "### Checkpoint storage after N rounds (MB; SQLite file after wal_checkpoint(TRUNCATE))",
        "",
        "| system | N | checkpoints | InMemorySaver | ×create_agent | SQLite file | SQLite blobs"
        " | 2 KB out: InMemorySaver | ×create_agent | 2 KB out: SQLite file |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s, n in t.rows:
        if t.get(s, n, "memory", "bytes") is None:
            continue
        lines.append(
            f"| {s} | {n} | {t.get(s, n, 'memory', 'checkpoints')}"
            f" | {_mb(t.get(s, n, 'memory', 'bytes'))} | {t.ratio(s, n, 'memory', 'bytes')}"
            f" | {_mb(t.get(s, n, 'sqlite', 'file_bytes'))} | {_mb(t.get(s, n, 'sqlite', 'bytes'))}"
            f" | {_mb(t.get(s, n, 'memory_2k', 'bytes'))} | {t.ratio(s, n, 'memory_2k', 'bytes')}"
            f" | {_mb(t.get(s, n, 'sqlite_2k', 'file_bytes'))} |"
        )
    return lines


def _memory_table(t: _Table) -> list[str]:
    lines = [
        "### Peak memory during one run (tracemalloc, MB)",
        "",
        "| system | N | no checkpointer | InMemorySaver | InMemorySaver, 2 KB out |",
        "|---|---|---|---|---|",
    ]
    for s, n in t.rows:
        lines.append(
            f"| {s} | {n} | {_mb(t.get(s, n, 'none', 'peak_bytes'))}"
            f" | {_mb(t.get(s, n, 'memory', 'peak_bytes'))}"
            f" | {_mb(t.get(s, n, 'memory_2k', 'peak_bytes'))} |"
        )
    return lines


def format_tables(results: list[Measurement]) -> str:
    """Markdown tables (time, storage, peak memory); ratios are to ``create_agent``."""
    table = _Table(results)
    return "\n".join([*_time_table(table), "", *_storage_table(table), "", *_memory_table(table)])


def _meta(ns: list[int], reps: int, seconds: float) -> dict[str, Any]:
    packages = [
        "langgraph",
        "langgraph-prebuilt",
        "langchain",
        "langchain-core",
        "langgraph-checkpoint-sqlite",
    ]
    return {
        "ns": ns,
        "reps": reps,
        "cases": [asdict(c) for c in CASES],
        "python": platform.python_version(),
        "machine": platform.machine(),
        "packages": {p: version(p) for p in packages},
        "total_seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "baseline": BASELINE,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--ns", default="10,50,200", help="comma-separated tool-round counts")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions (median is reported)")
    parser.add_argument("--quick", action="store_true", help="smoke test: N=10,50 and 2 reps")
    parser.add_argument("--only", help="comma-separated system names to run")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the JSON results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the overhead benchmark, print markdown tables and write JSON."""
    args = parse_args(argv)
    ns = [10, 50] if args.quick else [int(v) for v in args.ns.split(",") if v.strip()]
    reps = 2 if args.quick else max(1, args.reps)
    systems = all_systems()
    if args.only:
        wanted = {v.strip() for v in args.only.split(",")}
        unknown = wanted - {s.name for s in systems}
        if unknown:
            print(f"unknown or unavailable system(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        systems = [s for s in systems if s.name in wanted]
    start = time.perf_counter()
    results = run_benchmark(systems, ns, reps)
    seconds = time.perf_counter() - start
    print(format_tables(results))
    print(f"\ntotal {seconds:.0f}s; JSON: {args.json}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": _meta(ns, reps, seconds), "results": [asdict(m) for m in results]}
    args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
