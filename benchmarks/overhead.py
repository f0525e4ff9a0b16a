"""Per-round framework overhead, checkpoint storage, graph steps and peak memory.

For every system and every N (tool rounds) the scripted :class:`~benchmarks.scripted.EchoModel`
calls ``echo`` N times and then answers. Systems (:mod:`benchmarks.systems`): ``plain_loop``
(no graph), the bare two-node LangGraph loops ``bare_direct`` (the tool node calls
``tool.invoke``) and ``bare_toolnode`` (``ToolNode`` + ``tools_condition``),
``create_react_agent``, ``create_agent``, ``create_agent_limits`` and ``langgraph-loop``.
Measured:

* timed cases, each with sync ``invoke`` and async ``ainvoke`` (median ms/round over ``--reps``
  runs after one warm-up per system, case and mode): ``none`` (no checkpointer), ``memory``
  (``InMemorySaver``), ``sqlite`` (``SqliteSaver`` / ``AsyncSqliteSaver``), ``postgres``
  (``PostgresSaver`` / ``AsyncPostgresSaver`` on a throwaway local server); sync only:
  ``sqlite_2k`` / ``postgres_2k`` with 2 KB tool outputs. The systems take turns within every
  repetition (rotating the order), so a ratio compares runs made at the same time on the same
  machine. The compared systems (:data:`COMPARED`: the bare loops, ``create_react_agent``,
  ``create_agent``, ``langgraph-loop``) run every repetition of ``none``, ``memory``, ``sqlite``
  and ``postgres``; ``create_agent_limits`` gets 2 runs with a checkpointer (context only) and
  skips ``postgres``; the 2 KB cases run ``create_agent`` and ``langgraph-loop`` only;
* per case: the in-loop latency between consecutive model calls (model timestamps; the median
  gap of the first 10 vs the last 10 rounds, median over the runs), and (sync runs) what the
  checkpointer stored (bytes, checkpoints);
* ``memory_2k``: one run with 2 KB tool outputs (storage only);
* peak memory: one extra ``tracemalloc`` run for ``none``, ``memory`` and ``memory_2k`` (sync);
* graph steps, node runs and checkpoints per round and per run (:mod:`benchmarks.census`);
* the loop detector's decision per reply on threads of 25 to 10,000 rounds
  (:mod:`benchmarks.detector_cost`);
* the targets of issue 24 (:mod:`benchmarks.targets_bare`) and of issue 14
  (:mod:`benchmarks.targets`), evaluated on this run;
* the machine (CPU model, cores, Python) and its load average at the start and the end.

Usage::

    python -m benchmarks                      # N = 10, 50, 200, 5 reps, every system, sync and async
    python -m benchmarks --quick              # smoke run: N = 10, 2 reps, the compared systems
    python -m benchmarks --only create_agent,langgraph-loop --cases none,sqlite --ns 10 --reps 9
    python -m benchmarks --modes sync --cases none,sqlite --ns 10,200 --reps 9
"""

from __future__ import annotations

import argparse
import asyncio
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
from typing import Any, Literal

from benchmarks import targets_bare
from benchmarks.census import census, format_census
from benchmarks.report import BASELINE, FLOOR, MODES, OURS, format_tables
from benchmarks.savers import SaverKind, Savers, saver_stats
from benchmarks.scripted import EchoModel, ToolCounter, make_echo
from benchmarks.systems import Invoker, System, all_systems
from benchmarks.targets import evaluate, format_targets

__all__ = ["CASES", "COMPARED", "Case", "Measurement", "machine", "main", "measure_case", "run_benchmark"]

PROMPT = "Call echo once per turn until you are done, then answer."
PAYLOAD_2K = 2048
RESULTS = Path(__file__).parent / "results"
COMPARED = ("bare_direct", FLOOR, "create_react_agent", BASELINE, OURS)
"""Issue 24's systems: every repetition of every timed saver case, both modes."""
PAIR = (BASELINE, OURS)
"""The 2 KB cases' systems (issue 14's targets)."""
PEER_SAVER_REPS = 2
"""Timed runs with a checkpointer for the other peers (context only; the compared systems get ``--reps``)."""
QUICK_CASES = "none,memory,sqlite,postgres"
Mode = Literal["sync", "async"]
Scope = Literal["all", "compared", "pair"]


@dataclass(frozen=True)
class Case:
    """One configuration: checkpointer kind, tool payload, repeated timing or a single run.

    ``scope``: which systems run it: ``all``, ``compared`` (:data:`COMPARED`) or ``pair``
    (:data:`PAIR`; the other peers store up to 200 MB per run with 2 KB outputs). ``modes``:
    sync ``invoke`` and/or async ``ainvoke``.
    """

    key: str
    saver: SaverKind
    payload: int = 0
    timed: bool = False
    traced: bool = False
    scope: Scope = "all"
    modes: tuple[Mode, ...] = ("sync", "async")


CASES: tuple[Case, ...] = (
    Case("none", "none", timed=True, traced=True),
    Case("memory", "memory", timed=True, traced=True),
    Case("sqlite", "sqlite", timed=True),
    Case("postgres", "postgres", timed=True, scope="compared"),
    Case("memory_2k", "memory", PAYLOAD_2K, traced=True, modes=("sync",)),
    Case("sqlite_2k", "sqlite", PAYLOAD_2K, timed=True, scope="pair", modes=("sync",)),
    Case("postgres_2k", "postgres", PAYLOAD_2K, timed=True, scope="pair", modes=("sync",)),
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
    mode: str
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


def run_once(
    system: System,
    n: int,
    case: Case,
    savers: Savers,
    *,
    trace: bool = False,
    mode: Mode = "sync",
    runner: asyncio.Runner | None = None,
) -> Run:
    """Build a fresh system (not timed) and time one invocation of N rounds.

    ``mode="async"`` times ``ainvoke`` on ``runner``'s event loop (one loop for the whole
    benchmark, as in a server) with the async checkpointer of the case; it records no storage.
    """
    counter = ToolCounter()
    model = EchoModel(n_rounds=n)
    tools = [make_echo(case.payload, counter)]
    if mode == "async":
        assert runner is not None, "async runs need an event loop"
        seconds, result = runner.run(_atimed(system, model, tools, n, case, savers))
        peak, stats = None, None
    else:
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


async def _atimed(
    system: System, model: EchoModel, tools: list[Any], n: int, case: Case, savers: Savers
) -> tuple[float, dict[str, Any]]:
    """Seconds of one ``ainvoke`` (saver opened and graph built before the clock starts)."""
    async with savers.aopen(case.saver) as saver:
        invoker: Invoker = system.build(model, tools, n, saver)
        gc.collect()
        start = time.perf_counter()
        result = await invoker.ainvoke(PROMPT)
        return time.perf_counter() - start, result


def _stop_reason(result: dict[str, Any]) -> str | None:
    reason = result.get("stop_reason")
    return None if reason is None else str(getattr(reason, "value", reason))


def _aggregate(system: str, n: int, case: Case, mode: Mode, runs: list[Run]) -> Measurement:
    """Median over runs; storage numbers come from the last run (they are deterministic)."""
    per_round = [r.seconds * 1e3 / n for r in runs]
    last = runs[-1]
    return Measurement(
        system=system,
        n=n,
        case=case.key,
        mode=mode,
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
    systems: Sequence[System],
    n: int,
    case: Case,
    reps: int,
    savers: Savers,
    *,
    warm_up: bool = True,
    mode: Mode = "sync",
    runner: asyncio.Runner | None = None,
) -> list[Measurement]:
    """Measure one (N, case, mode) for every system, the systems taking turns within each repetition."""
    if case.timed and warm_up:
        for system in systems:
            run_once(system, n, case, savers, mode=mode, runner=runner)
    runs: dict[str, list[Run]] = {s.name: [] for s in systems}
    for rep in range(reps if case.timed else 1):
        shift = rep % len(systems)
        for system in [*systems[shift:], *systems[:shift]]:
            if _takes_part(system, case, rep):
                runs[system.name].append(run_once(system, n, case, savers, mode=mode, runner=runner))
    results = []
    for system in systems:
        result = _aggregate(system.name, n, case, mode, runs[system.name])
        if case.traced and mode == "sync":
            result.peak_bytes = run_once(system, n, case, savers, trace=True).peak_bytes
        if not result.rounds_ok:
            print(f"  WARNING: {system.name} N={n} {case.key} {mode}: did not run exactly {n} rounds")
        results.append(result)
    return results


def _takes_part(system: System, case: Case, rep: int) -> bool:
    """Whether ``system`` runs repetition ``rep`` of ``case`` (see :data:`PEER_SAVER_REPS`)."""
    return case.saver == "none" or system.name in COMPARED or rep < PEER_SAVER_REPS


def _members(systems: Sequence[System], case: Case) -> list[System]:
    """The systems that run ``case`` (see :attr:`Case.scope`)."""
    able = [s for s in systems if case.saver == "none" or s.checkpoints]
    if case.scope == "compared":
        return [s for s in able if s.name in COMPARED]
    if case.scope == "pair":
        return [s for s in able if s.name in PAIR]
    return able


def run_benchmark(
    systems: Sequence[System],
    ns: Sequence[int],
    reps: int,
    cases: Sequence[Case],
    savers: Savers,
    modes: Sequence[Mode] = ("sync",),
    runner: asyncio.Runner | None = None,
) -> list[Measurement]:
    """Measure every (N, case, mode, system); progress goes to stderr."""
    results: list[Measurement] = []
    for n in ns:
        for case in cases:
            members = _members(systems, case)
            for mode in [m for m in modes if m in case.modes]:
                if not members:
                    continue
                start = time.perf_counter()
                results += measure_case(members, n, case, reps, savers, warm_up=n == ns[0],
                                        mode=mode, runner=runner)
                print(f"  N={n:<4} {case.key:<12} {mode:<5} {time.perf_counter() - start:6.1f}s",
                      file=sys.stderr)
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


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def machine() -> dict[str, Any]:
    """What the run ran on: CPU model, cores (and how many this process may use), memory, OS, Python.

    Example:
        >>> sorted(machine())
        ['cores', 'cpu', 'memory_gib', 'platform', 'python', 'usable_cores']
    """
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def _describe_machine(info: dict[str, Any]) -> str:
    memory = "" if info["memory_gib"] is None else f", {info['memory_gib']} GiB RAM"
    return (f"{info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable){memory}; "
            f"{info['platform']}; {info['python']}")


def _load_note(start: list[float], end: list[float], cores: int | None) -> str:
    """The load averages (1, 5, 15 min) at start and end, and whether the machine was loaded."""
    text = (f"load average at start {' / '.join(f'{v:.2f}' for v in start)}, "
            f"at end {' / '.join(f'{v:.2f}' for v in end)}")
    busiest = max(start[0], end[0])
    if cores and busiest > 0.5 * cores:
        text += (f". The machine was loaded (1-min load {busiest:.2f} on {cores} cores): "
                 "treat these timings as a smoke run, not as final numbers")
    return text


def _meta(
    ns: Sequence[int], reps: int, cases: Sequence[Case], modes: Sequence[Mode], seconds: float,
    info: dict[str, Any], load_start: list[float], load_end: list[float],
) -> dict[str, Any]:
    return {
        "ns": list(ns),
        "reps": reps,
        "cases": [asdict(c) for c in cases],
        "modes": list(modes),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "host": info,
        "packages": _versions(),
        "total_seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "load_average_at_start": load_start,
        "load_average_at_end": load_end,
        "baseline": BASELINE,
        "floor": FLOOR,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    parser.add_argument("--ns", help="comma-separated tool-round counts (10,50,200; 10 with --quick)")
    parser.add_argument("--reps", type=int, help="timed repetitions, median reported (5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run in seconds: {','.join(COMPARED)} and plain_loop, N=10, 2 reps, "
                        f"cases {QUICK_CASES}, both modes, no step census, a short detector run, "
                        "the start-up heap frozen (gc.freeze)")
    parser.add_argument("--only", help="comma-separated system names to run")
    parser.add_argument("--cases", help=f"comma-separated cases (all: {','.join(c.key for c in CASES)})")
    parser.add_argument("--modes", default="sync,async", help="sync (invoke) and/or async (ainvoke)")
    parser.add_argument("--no-detector", action="store_true", help="skip the detector decision's cost")
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


def _detector_rows(quick: bool) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The detector decision's cost per thread length (:mod:`benchmarks.detector_cost`), or why not.

    It imports the library's internals, which may change: any failure is reported, not raised.
    """
    try:
        from benchmarks import detector_cost

        reps = 30 if quick else 300
        detector_cost.measure(detector_cost.LENGTHS[0], reps)  # warm-up: imports, caches
        return [detector_cost.measure(n, reps) for n in detector_cost.LENGTHS], None
    except Exception as exc:  # noqa: BLE001 - a report, not a test
        return None, f"{type(exc).__name__}: {str(exc)[:300]}"


def _modes(text: str) -> list[Mode] | None:
    wanted = [v.strip() for v in text.split(",") if v.strip()]
    if not wanted or any(v not in MODES for v in wanted):
        print(f"unknown mode(s) in {text!r}: use sync and/or async", file=sys.stderr)
        return None
    return [m for m in ("sync", "async") if m in wanted]


def _report(
    results: list[Measurement], steps: list[Any], detector: list[dict[str, Any]] | None, why_not: str | None,
    header: str, footer: str, *, issue14: bool = True,
) -> tuple[list[Any], list[Any]]:
    """Print every table and the targets tables; return the evaluated targets (issue 14, issue 24).

    ``issue14=False`` leaves issue 14's table out of the printout (still evaluated, for the JSON).
    """
    targets = evaluate(results)
    bare = targets_bare.evaluate(results, detector)
    print(header)
    print(format_tables(results))
    if steps:
        print("\n" + format_census(steps))
    print("\n### Loop-detector decision cost per reply vs thread length\n")
    if detector is None:
        print(f"not measured: {why_not}")
    else:
        from benchmarks.detector_cost import table

        print(table(detector))
    if issue14:
        print("\n" + format_targets(targets))
    print("\n" + targets_bare.format_targets(bare))
    print(footer)
    return targets, bare


def main(argv: list[str] | None = None) -> int:
    """Run the overhead benchmark, print markdown tables and the targets, write JSON."""
    args = parse_args(argv)
    ns = [int(v) for v in (args.ns or ("10" if args.quick else "10,50,200")).split(",") if v.strip()]
    reps = max(1, args.reps or (2 if args.quick else 5))
    only = args.only or (",".join(["plain_loop", *COMPARED]) if args.quick else None)
    systems = _select(only, all_systems(), "system(s)")
    cases = _select(args.cases or (QUICK_CASES if args.quick else None), CASES, "case(s)")
    modes = _modes(args.modes)
    if systems is None or cases is None or modes is None:
        return 2
    out = args.json or RESULTS / ("overhead-quick.json" if args.quick else "overhead.json")
    info, load_start = machine(), _load()
    print(f"Machine: {_describe_machine(info)}; load average at start {' / '.join(map(str, load_start))}",
          file=sys.stderr)
    if args.quick:
        # The full collection before every run (not timed) then scans only what the run made:
        # ~0.2 ms instead of ~100 ms. Quick runs only; the full run keeps the whole heap live.
        gc.collect()
        gc.freeze()
    start = time.perf_counter()
    try:
        with Savers() as savers, asyncio.Runner() as runner:
            cases = _usable_cases(cases, savers)
            steps = [] if args.quick else census(systems, savers)
            results = run_benchmark(systems, ns, reps, cases, savers, modes, runner)
    finally:
        gc.unfreeze()
    detector, why_not = (None, "skipped (--no-detector)") if args.no_detector else _detector_rows(args.quick)
    seconds = time.perf_counter() - start
    load_end = _load()
    load = _load_note(load_start, load_end, info["usable_cores"])
    header = (f"### Machine\n\n{_describe_machine(info)}; {load}.\n\n"
              f"N = {', '.join(map(str, ns))}; modes {', '.join(modes)}; {reps} timed repetitions per cell "
              f"after one warm-up (the systems take turns within each); total {seconds:.0f}s.\n")
    footer = f"\n{load}; total {seconds:.0f}s; JSON: {out}"
    targets, bare = _report(results, steps, detector, why_not, header, footer, issue14=not args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "meta": _meta(ns, reps, cases, modes, seconds, info, load_start, load_end),
        "results": [asdict(m) for m in results],
        "steps": [asdict(s) for s in steps],
        "detector": detector,
        "targets": [asdict(t) for t in targets],
        "targets_issue24": [asdict(t) for t in bare],
    }
    out.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
