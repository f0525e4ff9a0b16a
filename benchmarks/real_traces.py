"""Loop detection on real model trajectories, replayed through the compiled graph.

``--data`` (repeatable; default the vendored τ-bench file): files or directories of ``*.json.gz`` in
τ-bench's or ``../shared/data/``'s coding format, each file once. Systems: ``no_detection`` (checks
the replay), ``deerflow_style`` (deer-flow's layer-1 rule), ``langgraph-loop`` (default
``LoopDetection``); ``--hints``: τ-bench's lookups marked read-only; ``--variants``: no block
rung, blocking always, no path excuse. A stop at a reply *saves* the recorded calls from there
on; in a solved run it is a false stop, which *cuts a new call* when a saved call was not made
before. An **obvious loop**: a call made 5 times, or asked again after the same result 3 times in a
row; a **stuck loop**: a call that returned the same result 4 times, anything in between (its
deadline: its next request, else the request of the 4th). A loop is *stopped* by a stop at its
deadline or earlier (*or blocked*: its call blocked by then); a block *hides a changed result*
when the blocked call's recorded result differs from its previous one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.replay import (
    Conversation,
    RecordedRun,
    Replayer,
    RunResult,
    canonical_call,
    load_conversations,
)
from benchmarks.token_economy import DeerFlowGuard
from langgraph_loop import LoopDetection

__all__ = ["DATA", "Loop", "Summary", "load_sources", "main", "obvious_loops", "stuck_loops", "summarize"]

VENDORED = Path(__file__).parent / "data"
DATA = VENDORED / "taubench_gpt-4o_airline.json.gz"
RESULTS = Path(__file__).parent / "results"
READ_ONLY = frozenset({"think", "calculate", "get_user_details", "get_reservation_details",
                       "search_direct_flight", "search_onestop_flight", "list_all_airports"})
VARIANTS = {"langgraph-loop, block=()": LoopDetection(block=()),
            "langgraph-loop, block always": LoopDetection(block_only_interleaved=False),
            "langgraph-loop, no path excuse": LoopDetection(path_excuse=False)}
REPEATS, SAME_RESULTS, STUCK = 5, 3, 4
ReplayFn = Callable[[Conversation], list[RunResult]]


@dataclass(frozen=True)
class Loop:
    """A loop: conversation, run, call, the deadline reply index, why, and its kind."""

    conversation: int
    run: int
    call: str
    reply: int
    why: str
    kind: str = "obvious"
    solved: bool = False


def obvious_loops(run: RecordedRun) -> list[tuple[str, int, str]]:
    """``(call, reply index, why)`` for every obvious loop of a run (first evidence only).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> ai = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]) for i in range(4)]
        >>> obvious_loops(RecordedRun("u", ai, {(i, 0): "Error: no" for i in range(4)}))
        [('f({})', 3, 'requested again after the same result 3 times')]
    """
    seen: dict[str, list[str]] = {}
    found: dict[str, tuple[int, str]] = {}
    for index, call in run.calls():  # one result per call of a reply, in order
        key = canonical_call(call)
        results = seen.setdefault(key, [])
        if key not in found and len(results) >= SAME_RESULTS and len(set(results[-SAME_RESULTS:])) == 1:
            found[key] = (index, f"requested again after the same result {SAME_RESULTS} times")
        if key not in found and len(results) + 1 >= REPEATS:
            found[key] = (index, f"made {REPEATS} times")
        results.append(run.result(index, str(call["id"])))
    return [(key, index, why) for key, (index, why) in found.items()]


def stuck_loops(run: RecordedRun) -> list[tuple[str, int, str]]:
    """``(call, deadline reply index, why)`` for every stuck loop of a run (module docstring).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> names = ["f", "g", "f", "f", "g", "f", "f"]
        >>> ai = [AIMessage("", tool_calls=[{"name": n, "args": {}, "id": f"c{i}"}])
        ...       for i, n in enumerate(names)]
        >>> results = {(i, 0): f"g{i}" if n == "g" else "same" for i, n in enumerate(names)}
        >>> stuck_loops(RecordedRun("u", ai, results))
        [('f({})', 6, 'requested again after the same result 4 times')]
        >>> stuck_loops(RecordedRun("u", ai[:6], results))
        [('f({})', 5, 'the same result 4 times (not requested again)')]
    """
    counts: dict[tuple[str, str], int] = {}
    fourth: dict[str, int] = {}
    found: dict[str, tuple[int, str]] = {}
    for index, call in run.calls():
        key = canonical_call(call)
        if key in fourth and key not in found:
            found[key] = (index, f"requested again after the same result {STUCK} times")
        pair = (key, run.result(index, str(call["id"])))
        counts[pair] = counts.get(pair, 0) + 1
        if counts[pair] == STUCK and key not in fourth:
            fourth[key] = index
    for key, index in fourth.items():
        found.setdefault(key, (index, f"the same result {STUCK} times (not requested again)"))
    return [(key, index, why) for key, (index, why) in found.items()]


def deerflow_replay(conversation: Conversation) -> list[RunResult]:
    """deer-flow's rule over each run's recorded replies (a fresh guard per run)."""
    out = []
    for run in conversation.runs:
        guard, warned, served, stopped = DeerFlowGuard(), None, 0, False
        for index, ai in enumerate(run.replies):
            served = index + 1
            verdict = guard.check(ai) if ai.tool_calls else "end"
            warned = index if verdict == "warn" and warned is None else warned
            if verdict in ("stop", "end"):
                stopped = verdict == "stop"
                break
        executed = sum(len(ai.tool_calls) for ai in run.replies[: served - stopped])
        out.append(RunResult(served, executed, "hard_stop" if stopped else None,
                             "repeat" if stopped else None, warned))
    return out


def systems(conversations: Sequence[Conversation], hints: bool = False,
            variants: bool = False) -> dict[str, ReplayFn]:
    """The compared systems, by name (each graph is built once per source)."""
    names = {c["name"] for conv in conversations for run in conv.runs for _, c in run.calls()}
    detections: dict[str, tuple[LoopDetection | None, frozenset[str]]] = {
        "no_detection": (None, frozenset()), "langgraph-loop": (LoopDetection(), frozenset())}
    if hints:
        detections["langgraph-loop+hints"] = (LoopDetection(), READ_ONLY)
    if variants:
        detections |= {name: (detection, frozenset()) for name, detection in VARIANTS.items()}
    out: dict[str, ReplayFn] = {}
    for name, (detection, read_only) in detections.items():
        replayer = Replayer(names, loop_detection=detection, read_only_hints=read_only)
        out[name] = lambda c, r=replayer: r.replay(c.runs)  # type: ignore[misc]
        if name == "no_detection":
            out["deerflow_style"] = deerflow_replay
    return out


@dataclass
class Summary:
    """One system's numbers over one source (or, added up, over all of them)."""

    system: str
    source: str = ""
    trajectories: int = 0
    runs: int = 0
    solved_runs: int = 0
    calls: int = 0
    failed_calls: int = 0
    executed: int = 0
    solved_warned: int = 0
    solved_stopped: int = 0
    solved_cut_new: int = 0
    solved_blocked: int = 0
    blocked_changed: int = 0
    failed_warned: int = 0
    failed_stopped: int = 0
    failed_saved: int = 0
    loops: int = 0
    loops_stopped: int = 0
    stuck_failed: int = 0
    stuck_failed_stopped: int = 0
    stuck_failed_refused: int = 0
    stuck_solved: int = 0
    stuck_solved_stopped: int = 0
    seconds: float = 0.0
    stops: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def add(self, other: Summary) -> None:
        """Add another source's numbers to these (lists are not merged)."""
        for name, value in asdict(other).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(self, name, round(getattr(self, name) + value, 1))


def stop_index(result: RunResult) -> int | None:
    """The reply index a run was stopped at (``None``: not stopped)."""
    return result.served - 1 if result.stop_reason in ("loop_detected", "hard_stop") else None


def cuts_new_call(run: RecordedRun, stop: int) -> bool:
    """Does a stop at reply ``stop`` save a call the run had not made before it?"""
    before = {canonical_call(c) for i, c in run.calls() if i < stop}
    return any(canonical_call(c) not in before for _, c in run.calls(stop))


def _blocked_changed(run: RecordedRun, blocked: Iterable[tuple[int, int]]) -> int:
    """Blocked calls whose recorded result differed from the call's previous result."""
    changed = 0
    for reply, position in blocked:
        call = run.replies[reply].tool_calls[position]
        key, result = canonical_call(call), run.result(reply, str(call["id"]))
        earlier = [run.result(i, str(c["id"])) for i, c in run.calls(0, reply) if canonical_call(c) == key]
        changed += bool(earlier) and earlier[-1] != result
    return changed


def _count_run(s: Summary, solved: bool, run: RecordedRun, res: RunResult, where: str) -> None:
    stop = stop_index(res)
    s.runs, s.calls, s.executed = s.runs + 1, s.calls + len(run.calls()), s.executed + res.executed
    s.stops += [] if stop is None else [f"{where}: reply {stop}, {res.layer}"]
    s.warnings += [] if res.first_warning is None else [f"{where}: reply {res.first_warning}"]
    s.blocks += [f"{where}: reply {reply}, call {position}" for reply, position in res.blocked]
    s.notices += [f"{where}: reply {reply}: {text[:200]}" for reply, text in res.notices]
    s.blocked_changed += _blocked_changed(run, res.blocked)
    if solved:
        s.solved_runs += 1
        s.solved_warned += res.first_warning is not None
        s.solved_stopped += stop is not None
        s.solved_cut_new += stop is not None and cuts_new_call(run, stop)
        s.solved_blocked += len(res.blocked)
        return
    s.failed_calls += len(run.calls())
    s.failed_warned += res.first_warning is not None
    s.failed_saved += sum(1 for reply, _ in res.blocked if stop is None or reply < stop)
    s.failed_stopped += stop is not None
    s.failed_saved += 0 if stop is None else len(run.calls(stop))


def summarize(system: str, conversations: Sequence[Conversation],
              results: Sequence[list[RunResult]], loops: Sequence[Loop]) -> Summary:
    """Count runs, calls, warnings, stops, blocks, saved calls and stopped loops for one system."""
    s = Summary(system=system, trajectories=len(conversations))
    for conv, runs in zip(conversations, results, strict=True):
        for ri, (run, res) in enumerate(zip(conv.runs, runs, strict=True)):
            where = f"{conv.label} run {ri} ({'solved' if conv.solved else 'failed'})"
            _count_run(s, conv.solved, run, res, where)
    for loop in loops:
        res = results[loop.conversation][loop.run]
        stop = stop_index(res)
        stopped = stop is not None and stop <= loop.reply
        if loop.kind == "obvious":
            s.loops, s.loops_stopped = s.loops + 1, s.loops_stopped + stopped
        elif loop.solved:
            s.stuck_solved, s.stuck_solved_stopped = s.stuck_solved + 1, s.stuck_solved_stopped + stopped
        else:
            run = conversations[loop.conversation].runs[loop.run]
            refused = any(reply <= loop.reply  # the loop's call blocked by its deadline
                          and canonical_call(run.replies[reply].tool_calls[pos]) == loop.call
                          for reply, pos in res.blocked)
            s.stuck_failed, s.stuck_failed_stopped = s.stuck_failed + 1, s.stuck_failed_stopped + stopped
            s.stuck_failed_refused += stopped or refused
    return s


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def format_table(summaries: Sequence[Summary]) -> str:
    """One markdown table, a row per system (and one for blocks, when any system blocked)."""
    lines = ["| system | runs (solved) | calls | solved: runs warned | solved: runs stopped"
             " | solved: stops cutting a new call | failed: runs stopped | failed: calls saved"
             " | obvious loops stopped | stuck loops stopped (failed runs) | stuck loops stopped"
             " (solved runs) | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {s.system} | {s.runs} ({s.solved_runs}) | {s.calls} | {s.solved_warned}"
              f" | {s.solved_stopped} ({_pct(s.solved_stopped, s.solved_runs)}) | {s.solved_cut_new}"
              f" | {s.failed_stopped} | {s.failed_saved} ({_pct(s.failed_saved, s.failed_calls)})"
              f" | {s.loops_stopped}/{s.loops} | {s.stuck_failed_stopped}/{s.stuck_failed}"
              f" | {s.stuck_solved_stopped}/{s.stuck_solved} | {s.seconds} |" for s in summaries]
    blocking = [s for s in summaries if s.solved_blocked or s.blocked_changed
                or s.stuck_failed_refused > s.stuck_failed_stopped]
    if blocking:
        lines += ["", "| system | solved: calls blocked | blocks hiding a changed result"
                  " | stuck loops stopped or blocked (failed runs) |", "|---|---|---|---|"]
        lines += [f"| {s.system} | {s.solved_blocked} | {s.blocked_changed} | {s.stuck_failed_refused}/"
                  f"{s.stuck_failed} |" for s in blocking]
    return "\n".join(lines)


@dataclass
class Source:
    """One trajectory file: its name, path, conversations, and whether it is vendored here."""

    name: str
    path: Path
    conversations: list[Conversation]
    vendored: bool


def load_sources(paths: Iterable[Path], limit: int | None = None,
                 labels: Sequence[str] | None = None) -> list[Source]:
    """Every ``*.json.gz`` of the given files and directories, each file once (by content); only
    the conversations named in ``labels`` when given (a source left empty is dropped)."""
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    vendored, seen, out = {digest(p) for p in VENDORED.glob("*.json.gz")}, set(), []
    for path in paths:
        for file in sorted(path.glob("*.json.gz")) if path.is_dir() else [path]:
            if (key := digest(file)) not in seen:
                seen.add(key)
                picked = [c for c in load_conversations(file, limit) if not labels or c.label in labels]
                if picked:
                    out.append(Source(file.name.removesuffix(".json.gz"), file, picked, key in vendored))
    return out


@dataclass
class Measured:
    """A source's summaries (one per system), loops and per-system results."""

    source: Source
    summaries: list[Summary]
    loops: list[Loop]
    results: dict[str, list[list[RunResult]]]


def measure(source: Source, hints: bool = False, variants: bool = False) -> Measured:
    """Replay one source under every system."""
    conversations = source.conversations
    loops = [Loop(ci, ri, call, reply, why, kind, conv.solved)
             for ci, conv in enumerate(conversations) for ri, run in enumerate(conv.runs)
             for kind, finder in (("obvious", obvious_loops), ("stuck", stuck_loops))
             for call, reply, why in finder(run)]
    results: dict[str, list[list[RunResult]]] = {}
    summaries = []
    for name, replay in systems(conversations, hints, variants).items():
        started = time.perf_counter()
        results[name] = [replay(conv) for conv in conversations]
        summary = summarize(name, conversations, results[name], loops)
        summary.source, summary.seconds = source.name, round(time.perf_counter() - started, 1)
        summaries.append(summary)
    return Measured(source, summaries, loops, results)


def _print_source(m: Measured, details: bool) -> None:
    conversations = m.source.conversations
    print(f"\n## {m.source.name} ({len(conversations)} trajectories, {sum(c.solved for c in conversations)}"
          f" solved)\n\n{format_table(m.summaries)}")
    for kind in ("obvious", "stuck") if details else ("obvious",):
        loops = [x for x in m.loops if x.kind == kind]
        print(f"\n{kind.capitalize()} loops ({len(loops)}):")
        for x in loops:
            conv = conversations[x.conversation]
            stops = {name: stop_index(r[x.conversation][x.run]) for name, r in m.results.items()}
            verdicts = [f"{name}: " + (f"stopped at reply {stop}" if stop is not None and stop <= x.reply
                                       else "not stopped") for name, stop in stops.items()]
            print(f"- {kind}: {conv.label} ({'solved' if conv.solved else 'failed'}), run {x.run}:"
                  f" `{x.call[:80]}` {x.why} (reply {x.reply}); " + "; ".join(verdicts))
        if not loops:
            print("- none")
    for s in m.summaries if details else ():
        for what, entries in (("stops", s.stops), ("first warnings", s.warnings), ("blocks", s.blocks)):
            print(f"\n{s.system} {what} ({len(entries)}):" + "".join(f"\n- {x}" for x in entries))
    base = m.summaries[0]
    print(f"\nreplay check: {base.system} executed {base.executed} of {base.calls} recorded calls")


def _counts(s: Summary) -> dict[str, object]:
    return {k: v for k, v in asdict(s).items() if not isinstance(v, list)}


def main(argv: list[str] | None = None) -> int:
    """Replay every source under every system; print the tables and loops; write JSON (runs, stops
    and loops by name for vendored sources only)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_traces",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, action="append", help="a trajectory file or a directory of them"
                        " (repeatable; default benchmarks/data/taubench_gpt-4o_airline.json.gz)")
    parser.add_argument("--label", action="append", help="replay only the conversations with this label")
    parser.add_argument("--limit", type=int, help="replay only the first N conversations of each")
    parser.add_argument("--json", type=Path, help="where to write JSON (default: real_traces.json for"
                        " vendored data only, else real_traces_all.json, in benchmarks/results; none for a"
                        " sample)")
    parser.add_argument("--details", action="store_true", help="list every stuck loop, warning, stop, block")
    parser.add_argument("--hints", action="store_true",
                        help="also langgraph-loop with τ-bench's lookups marked read-only")
    parser.add_argument("--variants", action="store_true", help="also langgraph-loop without the block rung,"
                        " blocking always, and without the path excuse")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sources = load_sources(args.data or [DATA], args.limit, args.label)
    measured = [measure(source, args.hints, args.variants) for source in sources]
    print("# Loop detection on real trajectories")
    for m in measured:
        _print_source(m, args.details)
    totals: dict[str, Summary] = {}
    for s in (s for m in measured for s in m.summaries):
        totals.setdefault(s.system, Summary(system=s.system, source="overall")).add(s)
    if len(measured) > 1:
        print(f"\n## overall ({len(measured)} sources)\n\n{format_table(list(totals.values()))}")
    print(f"\nbenchmark runtime: {time.perf_counter() - started:.1f} s")
    path = args.json or (None if args.label or args.limit else RESULTS / (
        "real_traces.json" if all(s.vendored for s in sources) else "real_traces_all.json"))
    if path is not None:
        out = [{"source": m.source.name, "vendored": m.source.vendored,
                "summaries": [asdict(s) if m.source.vendored else _counts(s) for s in m.summaries]}
               | ({f"{kind}_loops": [asdict(x) for x in m.loops if x.kind == kind]
                   for kind in ("obvious", "stuck")} if m.source.vendored else {}) for m in measured]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"sources": out, "overall": [_counts(s) for s in totals.values()]},
                                   indent=2) + "\n")
        print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
