"""Per-round cost of langgraph-loop and its peers on every saver, sync and async, with storage, graph
steps, peak memory and the targets; ``--clock cpu`` for a CPU-time A/B; ``--payload`` for 5-50 KB
coding outputs. Every run builds a fresh graph and saver outside the clock; the systems take turns
within every repetition; medians are reported. See benchmarks/README.md.
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import distributions
from pathlib import Path
from typing import Any, Literal

from benchmarks import report
from benchmarks import systems as harness
from benchmarks.savers import SaverKind, Savers, saver_stats
from benchmarks.systems import EchoModel, GraphInvoker, System, ToolCounter, all_systems, echo_text, make_echo

PROMPT = "Call echo once per turn until you are done, then answer."
PAYLOAD_2K = 2048
RESULTS = Path(__file__).parent / "results"
COMPARED = ("bare_direct", report.FLOOR, "create_react_agent", report.BASELINE, report.OURS)
"""Issue 24's systems: every repetition of every timed case, both modes. The other peers get
``PEER_SAVER_REPS`` runs with a saver (context only); the 2 KB cases run ``PAIR`` only (the other
peers store up to 200 MB per run)."""
PAIR, PEER_SAVER_REPS = (report.BASELINE, report.OURS), 2
PAYLOAD = (report.FLOOR, report.BASELINE, report.OURS)
"""Issue 31's systems, on 5-50 KB coding outputs different in every run and round (``--payload``)."""
SEEDS = itertools.count()
QUICK_CASES, CENSUS = "none,memory,sqlite,postgres", (10, 50)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
PACKAGES = ("langgraph", "langgraph-prebuilt", "langchain", "langchain-core", "langgraph-checkpoint",
            "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "langgraph-loop")
Mode = Literal["sync", "async"]


@dataclass(frozen=True)
class Case:
    """A saver, a tool payload (``coding``: ``coding_output``), timed (repeated) or one run, peak memory
    (``traced``), which systems."""

    key: str
    saver: SaverKind
    payload: int = 0
    timed: bool = False
    traced: bool = False
    scope: Literal["all", "compared", "pair", "payload"] = "all"
    modes: tuple[Mode, ...] = ("sync", "async")
    coding: bool = False


CASES: tuple[Case, ...] = (
    Case("none", "none", timed=True, traced=True),
    Case("memory", "memory", timed=True, traced=True),
    Case("sqlite", "sqlite", timed=True),
    Case("postgres", "postgres", timed=True, scope="compared"),
    Case("memory_2k", "memory", PAYLOAD_2K, traced=True, modes=("sync",)),
    Case("sqlite_2k", "sqlite", PAYLOAD_2K, timed=True, scope="pair", modes=("sync",)),
    Case("postgres_2k", "postgres", PAYLOAD_2K, timed=True, scope="pair", modes=("sync",)),
    *(Case(f"{saver}_code", saver, timed=True, scope="payload", modes=("sync",), coding=True)
      for saver in ("none", "sqlite")),
)
PAYLOAD_CASES = "none_code,sqlite_code"


@dataclass
class Run:
    """One invocation of one system."""

    seconds: float
    gaps_ms: list[float]
    rounds_ok: bool
    stop_reason: str | None
    stats: Any = None
    peak_bytes: int | None = None


@dataclass
class Measurement:
    """Aggregated result for one (system, N, case, mode)."""

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


def echo_transcript(n: int, payload: int = 0, outputs: Sequence[str] = ()
                    ) -> list[tuple[str, Any, list[str]]]:
    """(type, content, tool-call ids) of every message of a clean echo task of ``n`` rounds."""
    results = outputs or [echo_text(f"round {i}", payload) for i in range(n)]
    rounds = [(("ai", "", [f"call_{i}_0"]), ("tool", results[i], [])) for i in range(n)]
    return [("human", PROMPT, []), *itertools.chain(*rounds), ("ai", f"Done after {n} rounds.", [])]


def run_once(system: System, n: int, case: Case, savers: Savers, *, trace: bool = False, mode: Mode = "sync",
             runner: asyncio.Runner | None = None, clock: str = "wall") -> Run:
    """Build a fresh system and saver (not timed) and time one invocation of N rounds: ``ainvoke``
    on ``runner``'s loop (one loop for the whole benchmark, as in a server) with the async saver,
    or ``invoke``, with the peak memory when ``trace``."""
    counter, model, now = ToolCounter(), EchoModel(n_rounds=n), CLOCKS[clock]
    seed = next(SEEDS)
    outputs = [harness.coding_output(seed, i) for i in range(n)] if case.coding else []
    tools, stats, peak = [make_echo(case.payload, counter, outputs)], None, None

    async def atimed() -> tuple[float, dict[str, Any]]:
        async with savers.aopen(case.saver) as saver:
            invoker = system.build(model, tools, n, saver)
            gc.collect()
            start = now()
            result = await invoker.ainvoke(PROMPT)
            return now() - start, result

    if mode == "async":
        assert runner is not None, "async runs need an event loop"
        seconds, result = runner.run(atimed())
    else:
        with savers.open(case.saver) as saver:
            invoke = system.build(model, tools, n, saver)
            gc.collect()
            if trace:
                tracemalloc.start()
            start = now()
            result = invoke(PROMPT)
            seconds = now() - start
            if trace:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            stats = saver_stats(saver)
    reason = result.get("stop_reason")
    transcript = [(m.type, m.content, [c["id"] for c in getattr(m, "tool_calls", [])])
                  for m in result["messages"]]
    return Run(seconds, [(b - a) * 1e3 for a, b in itertools.pairwise(model.log.timestamps)],
               counter.count == n and transcript == echo_transcript(n, case.payload, outputs),
               None if reason is None else str(getattr(reason, "value", reason)), stats, peak)


def measure_case(systems: Sequence[System], n: int, case: Case, reps: int, savers: Savers, *,
                 warm_up: bool = True, **how: Any) -> list[Measurement]:
    """Measure one (N, case, mode) for every system, the systems taking turns within each
    repetition; medians over the runs, storage from the last (it is deterministic)."""
    if case.timed and warm_up:
        for system in systems:
            run_once(system, n, case, savers, **how)
    runs: dict[str, list[Run]] = {s.name: [] for s in systems}
    for rep in range(reps if case.timed else 1):
        shift = rep % len(systems)
        for system in [*systems[shift:], *systems[:shift]]:
            if case.saver == "none" or system.name in COMPARED or rep < PEER_SAVER_REPS:
                runs[system.name].append(run_once(system, n, case, savers, **how))
    results = []
    for name, done in runs.items():
        per_round, mode = [r.seconds * 1e3 / n for r in done], how.get("mode", "sync")
        result = Measurement(
            name, n, case.key, mode, len(done), statistics.median(per_round),
            [round(v, 4) for v in per_round],
            statistics.median(statistics.median(r.gaps_ms[:10]) for r in done),
            statistics.median(statistics.median(r.gaps_ms[-10:]) for r in done),
            all(r.rounds_ok for r in done), done[-1].stop_reason,
            *(getattr(done[-1].stats, k, None) for k in ("bytes", "checkpoints", "file_bytes")))
        if case.traced and mode == "sync":
            system = next(s for s in systems if s.name == name)
            result.peak_bytes = run_once(system, n, case, savers, trace=True).peak_bytes
        if not result.rounds_ok:
            print(f"  WARNING: {name} N={n} {case.key} {mode}: did not run exactly {n} clean rounds")
        results.append(result)
    return results


def _members(systems: Sequence[System], case: Case) -> list[System]:
    """The systems that run ``case`` (see :attr:`Case.scope`)."""
    scope = {"compared": COMPARED, "pair": PAIR, "payload": PAYLOAD}.get(case.scope)
    return [s for s in systems
            if (case.saver == "none" or s.checkpoints) and (scope is None or s.name in scope)]


def run_benchmark(systems: Sequence[System], ns: Sequence[int], reps: int, cases: Sequence[Case],
                  savers: Savers, modes: Sequence[Mode] = ("sync",), runner: asyncio.Runner | None = None,
                  clock: str = "wall") -> list[Measurement]:
    """Measure every (N, case, mode, system); progress goes to stderr."""
    results: list[Measurement] = []
    for n, case in itertools.product(ns, cases):
        members = _members(systems, case)
        for mode in [m for m in modes if m in case.modes and members]:
            start = time.perf_counter()
            results += measure_case(members, n, case, reps, savers, warm_up=n == ns[0], mode=mode,
                                    runner=runner, clock=clock)
            print(f"  N={n:<4} {case.key:<12} {mode:<5} {time.perf_counter() - start:6.1f}s", file=sys.stderr)
    return results


def census(systems: Sequence[System], savers: Savers) -> list[dict[str, Any]]:
    """Per system: (per round, fixed per run) of supersteps, checkpoints and node runs, counted on
    ``stream_mode="debug"`` runs at N=10 and N=50 with ``InMemorySaver`` (per round: the slope;
    fixed: what is left at N=10), checkpoint events cross-checked against the saver.

    Example:
        >>> from benchmarks.systems import PEER_SYSTEMS
        >>> with Savers() as savers:
        ...     row = census([s for s in PEER_SYSTEMS if s.name == "create_agent"], savers)[0]
        >>> row["steps"], row["checkpoints"], row["nodes"]
        ((2.0, 1.0), (2.0, 3.0), {'model': (1.0, 1.0), 'tools': (1.0, 0.0)})
    """
    (low, high), rows = CENSUS, []
    for system in systems:
        counts = []
        for n in CENSUS:
            with savers.open("memory") as saver:
                invoker = system.build(EchoModel(n_rounds=n), [make_echo()], n, saver)
                if not isinstance(invoker, GraphInvoker):
                    break
                events, stored = invoker.debug_events(PROMPT), getattr(saver_stats(saver), "checkpoints", 0)
            tasks = [e for e in events if e["type"] == "task"]
            counts.append((len({e["step"] for e in tasks}), Counter(e["payload"]["name"] for e in tasks),
                           sum(e["type"] == "checkpoint" for e in events), stored))
        if len(counts) < 2:
            rows.append({"system": system.name})
            continue
        a, b = counts

        def split_up(x: float, y: float) -> tuple[float, float]:
            return (y - x) / (high - low), x - low * (y - x) / (high - low)

        names = sorted(set(a[1]) | set(b[1]), key=lambda k: (-b[1][k], k))
        rows.append({"system": system.name, "steps": split_up(a[0], b[0]),
                     "checkpoints": split_up(a[2], b[2]),
                     "nodes": {k: split_up(a[1][k], b[1][k]) for k in names}, "at_low": (a[0], a[2]),
                     "stored_mismatch": a[2] != a[3] or b[2] != b[3]})
    return rows


def machine() -> dict[str, Any]:
    """CPU model, cores (and how many this process may use), memory, OS, Python, package versions.

    Example:
        >>> sorted(machine())
        ['cores', 'cpu', 'memory_gib', 'packages', 'platform', 'python', 'usable_cores']
    """
    def proc(path: str, *prefixes: str) -> str | None:
        lines = Path(path).read_text().splitlines() if Path(path).exists() else []
        return next((ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith(prefixes)), None)

    memory = proc("/proc/meminfo", "memtotal")
    packages = {dist.metadata["Name"].lower(): dist.version for dist in distributions()}
    return {"cpu": proc("/proc/cpuinfo", "model name", "hardware", "cpu model") or platform.processor()
            or platform.machine(), "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "memory_gib": round(int(memory.split()[0]) / 2**20, 1) if memory else None,
            "platform": platform.platform(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "packages": {p: packages.get(p, "not installed") for p in PACKAGES}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--ns", help="comma-separated tool-round counts (10,50,200; 10 with --quick)")
    p.add_argument("--reps", type=int, help="timed repetitions, median reported (5; 2 with --quick)")
    p.add_argument("--quick", action="store_true", help=f"smoke run: plain_loop and {','.join(COMPARED)}, "
                   f"N=10, 2 reps, cases {QUICK_CASES}, no census, the start-up heap frozen")
    p.add_argument("--payload", action="store_true", help=f"issue 31: {', '.join(PAYLOAD)} on 5-50 KB coding "
                   f"outputs, N=30, cases {PAYLOAD_CASES}, sync, no census")
    p.add_argument("--only", help="comma-separated system names to run")
    p.add_argument("--cases", help=f"comma-separated cases (all: {','.join(c.key for c in CASES)})")
    p.add_argument("--modes", default="sync,async", help="sync (invoke) and/or async (ainvoke)")
    p.add_argument("--clock", default="wall", choices=list(CLOCKS), help="wall or this process's CPU time")
    p.add_argument("--no-census", action="store_true", help="skip the graph-step census")
    p.add_argument("--json", type=Path, help="JSON out (default results/overhead.json, overhead-quick.json)")
    return p.parse_args(argv)


def _select(names: str | None, available: Sequence[Any], what: str) -> list[Any] | None:
    """The members of ``available`` named in ``names`` (all when None); None if one is unknown."""
    key = {getattr(a, "name", getattr(a, "key", None)): a for a in available}
    wanted = {v.strip() for v in names.split(",") if v.strip()} if names else set(key)
    if wanted - set(key):
        print(f"unknown or unavailable {what}: {', '.join(sorted(wanted - set(key)))}", file=sys.stderr)
        return None
    return [a for k, a in key.items() if k in wanted]


def main(argv: list[str] | None = None) -> int:
    """Run the overhead benchmark, print markdown tables and the targets, write JSON."""
    args = parse_args(argv)
    default_ns = "10" if args.quick else "30" if args.payload else "10,50,200"
    ns = [int(v) for v in (args.ns or default_ns).split(",") if v.strip()]
    reps = max(1, args.reps or (2 if args.quick else 5))
    systems = _select(args.only or (",".join(["plain_loop", *COMPARED]) if args.quick else
                                    ",".join(PAYLOAD) if args.payload else None), all_systems(), "system(s)")
    cases = _select(args.cases or (QUICK_CASES if args.quick else PAYLOAD_CASES if args.payload else None),
                    CASES, "case(s)")
    modes: list[Mode] = [m for m in ("sync", "async") if m in args.modes.split(",") and not (
        args.payload and m == "async")]  # the coding cases are timed sync only
    args.no_census = args.no_census or args.payload
    if systems is None or cases is None or not modes or set(args.modes.split(",")) - set(report.MODES):
        return 2
    out = args.json or RESULTS / ("overhead-quick.json" if args.quick else "payload.json" if args.payload
                                  else "overhead.json")
    info, load_start = machine(), [round(v, 2) for v in os.getloadavg()]
    described = (f"{info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
                 f"{info['memory_gib']} GiB RAM; {info['platform']}; {info['python']}")
    print(f"Machine: {described}; load average at start {' / '.join(map(str, load_start))}", file=sys.stderr)
    if args.quick:  # the collection before every run then scans only what the run made (~0.2 ms, not ~100)
        gc.collect()
        gc.freeze()
    start = time.perf_counter()
    try:
        with Savers() as savers, asyncio.Runner() as runner:
            for case in [c for c in cases if savers.unavailable(c.saver)]:
                print(f"case {case.key} skipped: {case.saver} unavailable ({savers.unavailable(case.saver)})")
            cases = [c for c in cases if not savers.unavailable(c.saver)]
            steps = [] if args.quick or args.no_census else census(systems, savers)
            results = run_benchmark(systems, ns, reps, cases, savers, modes, runner, args.clock)
    finally:
        gc.unfreeze()
    seconds, load_end = time.perf_counter() - start, [round(v, 2) for v in os.getloadavg()]
    load = "load average at start {}, at end {}".format(*(" / ".join(map(str, v))
                                                             for v in (load_start, load_end)))
    if max(load_start[0], load_end[0]) > 0.5 * info["usable_cores"]:
        load += (f". The machine was loaded (1-min load {max(load_start[0], load_end[0]):.2f} on"
                 f" {info['usable_cores']} cores): treat these timings as a smoke run, not as final numbers")
    issue24, issue31 = (report.evaluate(results, t) for t in (report.ISSUE24, report.ISSUE31))
    print(f"### Machine\n\n{described}; {load}.\n\nN = {', '.join(map(str, ns))}; modes {', '.join(modes)};"
          f" {args.clock} clock; {reps} timed repetitions per cell after one warm-up (the systems take turns"
          f" within each); total {seconds:.0f}s.\n\n{report.format_tables(results)}")
    if steps:
        print("\n" + report.format_census(steps, *CENSUS))
    if args.payload:
        print("\n" + report.format_targets(issue31, f"issue 31; {report.OURS} vs {report.BASELINE}, "
                                           "5-50 KB coding outputs"))
    else:
        print("\n" + report.format_targets(issue24, f"issue 24; {report.OURS} vs the bare ToolNode loop "
                                       f"({report.FLOOR}), {report.BASELINE} and create_react_agent"))
    print(f"\n{load}; total {seconds:.0f}s; JSON: {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"ns": ns, "reps": reps, "cases": [asdict(c) for c in cases], "modes": modes, "clock": args.clock,
            "host": info, "total_seconds": round(seconds, 1), "load_average_at_start": load_start,
            "load_average_at_end": load_end, "baseline": report.BASELINE, "floor": report.FLOOR}
    out.write_text(json.dumps({"meta": meta, "results": [asdict(m) for m in results], "steps": steps,
                               "targets_issue24": [asdict(t) for t in issue24],
                               "targets_issue31": [asdict(t) for t in issue31]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
