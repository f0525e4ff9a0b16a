"""Loop detection on real model trajectories, replayed through the compiled graph.

Sources (``--data DIR_OR_FILE``, repeatable; default: the vendored τ-bench file): every
``*.json.gz`` of a directory, or one file, τ-bench's format or the coding format of
``../shared/data/`` (:func:`benchmarks.replay.load_conversations`); a file whose bytes equal one
already read is skipped. Each conversation is replayed (:mod:`benchmarks.replay`: the recorded
replies, the recorded results, a model that ignores warnings, limits out of the way) under:
``no_detection`` (a check of the replay: every recorded call runs), ``deerflow_style`` (deer-flow's
layer-1 rule, :class:`benchmarks.token_economy.DeerFlowGuard`, per run), ``langgraph-loop`` (the
default ``LoopDetection``), with ``--hints`` the same with τ-bench's read-only tools carrying MCP's
``readOnlyHint``, with ``--variants`` the library without the block rung, blocking every repeat,
and without the path excuse.

Definitions (per run; a *reply index* counts the run's assistant replies from 0; a call is its
name + canonical JSON arguments; results compare byte for byte): a system *stops* a run at the
reply whose calls it refused; the recorded calls from there on are *saved*; in solved runs every
stop is a *false stop*, which *cuts a new call* when a saved call had not been made before. An
**obvious loop**: a call made 5 times, or asked again after the same result 3 times in a row (its
deadline: that request). A **stuck loop**: a call that returned the same result 4 times (anything
may run in between); its deadline is its next request, else the request that returned the 4th.
A loop is *stopped* when the run stopped at its deadline or earlier; *stopped or blocked* also
counts a block of its call by then. A block *hides a changed result* when the blocked call's
recorded result differs from its previous one.

Usage: ``python -m benchmarks.real_traces [--data PATH ...] [--label L ...] [--limit N] [--json PATH]
[--details] [--hints] [--variants]``; a ``--label`` or ``--limit`` sample writes JSON only to ``--json``
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
    tool_names,
)
from benchmarks.token_economy import DeerFlowGuard
from langgraph_loop import LoopDetection

__all__ = ["DATA", "Loop", "Source", "Summary", "cuts_new_call", "find_loops", "load_sources",
           "main", "obvious_loops", "stop_index", "stuck_loops", "summarize"]

VENDORED = Path(__file__).parent / "data"
DATA = VENDORED / "taubench_gpt-4o_airline.json.gz"
RESULTS = Path(__file__).parent / "results"
DEFAULT_JSON = RESULTS / "real_traces.json"
ALL_JSON = RESULTS / "real_traces_all.json"
READ_ONLY = frozenset({"think", "calculate", "get_user_details", "get_reservation_details",
                       "search_direct_flight", "search_onestop_flight", "list_all_airports"})
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
        >>> ai = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}])
        ...       for i in range(4)]
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


def find_loops(conversations: Sequence[Conversation]) -> list[Loop]:
    """Every obvious and stuck loop of the conversations."""
    out = []
    for ci, conv in enumerate(conversations):
        for ri, run in enumerate(conv.runs):
            for kind, finder in (("obvious", obvious_loops), ("stuck", stuck_loops)):
                out += [Loop(ci, ri, call, reply, why, kind, conv.solved)
                        for call, reply, why in finder(run)]
    return out


def deerflow_replay(conversation: Conversation) -> list[RunResult]:
    """deer-flow's rule over each run's recorded replies (a fresh guard per run)."""
    out = []
    for run in conversation.runs:
        guard, warned, served = DeerFlowGuard(), None, 0
        stopped = False
        for index, ai in enumerate(run.replies):
            served = index + 1
            if not ai.tool_calls:
                break
            verdict = guard.check(ai)
            if verdict == "warn" and warned is None:
                warned = index
            if verdict == "stop":
                stopped = True
                break
        executed = sum(len(ai.tool_calls) for ai in run.replies[: served - (1 if stopped else 0)])
        out.append(RunResult(served=served, executed=executed,
                             stop_reason="hard_stop" if stopped else None,
                             layer="repeat" if stopped else None, first_warning=warned))
    return out


VARIANTS = {"langgraph-loop, block=()": LoopDetection(block=()),
            "langgraph-loop, block always": LoopDetection(block_only_interleaved=False),
            "langgraph-loop, no path excuse": LoopDetection(path_excuse=False)}
"""The ``--variants``: no block rung (stop at once), a block for every repeat, no path excuse."""


def systems(conversations: Sequence[Conversation], hints: bool = False,
            variants: bool = False) -> dict[str, ReplayFn]:
    """The compared systems, by name (each graph is built once per source)."""
    names = tool_names(c.runs for c in conversations)
    plain = Replayer(names, loop_detection=None)
    default = Replayer(names, loop_detection=LoopDetection())
    out: dict[str, ReplayFn] = {
        "no_detection": lambda c: plain.replay(c.runs),
        "deerflow_style": deerflow_replay,
        "langgraph-loop": lambda c: default.replay(c.runs),
    }
    if hints:
        hinted = Replayer(names, loop_detection=LoopDetection(), read_only_hints=READ_ONLY)
        out["langgraph-loop+hints"] = lambda c: hinted.replay(c.runs)
    if variants:
        for name, detection in VARIANTS.items():
            variant = Replayer(names, loop_detection=detection)
            out[name] = lambda c, r=variant: r.replay(c.runs)  # type: ignore[misc]
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
        earlier = [run.result(i, str(c["id"])) for i, c in run.calls() if i < reply
                   and canonical_call(c) == key]
        changed += bool(earlier) and earlier[-1] != result
    return changed


def _count_run(s: Summary, solved: bool, run: RecordedRun, res: RunResult, where: str) -> None:
    s.runs += 1
    s.calls += len(run.calls())
    s.executed += res.executed
    stop = stop_index(res)
    if stop is not None:
        s.stops.append(f"{where}: reply {stop}, {res.layer}")
    if res.first_warning is not None:
        s.warnings.append(f"{where}: reply {res.first_warning}")
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
    if stop is not None:
        s.failed_stopped += 1
        s.failed_saved += len(run.calls(stop))


def _refused(loop: Loop, run: RecordedRun, res: RunResult) -> bool:
    """Was the loop's call blocked at its deadline or earlier (without a stop)?"""
    return any(reply <= loop.reply
               and canonical_call(run.replies[reply].tool_calls[position]) == loop.call
               for reply, position in res.blocked)


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
            s.loops += 1
            s.loops_stopped += stopped
        elif loop.solved:
            s.stuck_solved += 1
            s.stuck_solved_stopped += stopped
        else:
            s.stuck_failed += 1
            s.stuck_failed_stopped += stopped
            run = conversations[loop.conversation].runs[loop.run]
            s.stuck_failed_refused += stopped or _refused(loop, run, res)
    return s


def _pct(part: int | float, whole: int | float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def format_table(summaries: Sequence[Summary]) -> str:
    """One markdown table: a row per system."""
    lines = [
        "| system | runs (solved) | calls | solved: runs warned | solved: runs stopped"
        " | solved: stops cutting a new call | failed: runs stopped | failed: calls saved"
        " | obvious loops stopped | stuck loops stopped (failed runs) | stuck loops stopped"
        " (solved runs) | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.system} | {s.runs} ({s.solved_runs}) | {s.calls} | {s.solved_warned}"
            f" | {s.solved_stopped} ({_pct(s.solved_stopped, s.solved_runs)}) | {s.solved_cut_new}"
            f" | {s.failed_stopped} | {s.failed_saved} ({_pct(s.failed_saved, s.failed_calls)})"
            f" | {s.loops_stopped}/{s.loops} | {s.stuck_failed_stopped}/{s.stuck_failed}"
            f" | {s.stuck_solved_stopped}/{s.stuck_solved} | {s.seconds} |")
    blocking = [s for s in summaries if s.solved_blocked or s.blocked_changed
                or s.stuck_failed_refused > s.stuck_failed_stopped]
    if blocking:
        lines += ["", "| system | solved: calls blocked | blocks hiding a changed result"
                  " | stuck loops stopped or blocked (failed runs) |", "|---|---|---|---|"]
        lines += [f"| {s.system} | {s.solved_blocked} | {s.blocked_changed}"
                  f" | {s.stuck_failed_refused}/{s.stuck_failed} |" for s in blocking]
    return "\n".join(lines)


def _loop_lines(conversations: Sequence[Conversation], loops: Sequence[Loop],
                results: dict[str, list[list[RunResult]]]) -> list[str]:
    lines = []
    for loop in loops:
        conv = conversations[loop.conversation]
        verdicts = []
        for name, per_conv in results.items():
            stop = stop_index(per_conv[loop.conversation][loop.run])
            ok = stop is not None and stop <= loop.reply
            verdicts.append(f"{name}: {'stopped at reply ' + str(stop) if ok else 'not stopped'}")
        lines.append(f"- {loop.kind}: {conv.label} ({'solved' if conv.solved else 'failed'}),"
                     f" run {loop.run}: `{loop.call[:80]}` {loop.why} (reply {loop.reply}); "
                     + "; ".join(verdicts))
    return lines


@dataclass
class Source:
    """One trajectory file: its name, path, conversations, and whether it is vendored here."""

    name: str
    path: Path
    conversations: list[Conversation]
    vendored: bool


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_sources(paths: Iterable[Path], limit: int | None = None,
                 labels: Sequence[str] | None = None) -> list[Source]:
    """Every ``*.json.gz`` of the given files and directories, each file once (by content);
    only the conversations named in ``labels`` when given (a source left empty is dropped)."""
    vendored = {_digest(p) for p in VENDORED.glob("*.json.gz")}
    seen: set[str] = set()
    out = []
    for path in paths:
        for file in sorted(path.glob("*.json.gz")) if path.is_dir() else [path]:
            digest = _digest(file)
            if digest in seen:
                continue
            seen.add(digest)
            conversations = [c for c in load_conversations(file, limit) if not labels or c.label in labels]
            if conversations:
                out.append(Source(file.name.removesuffix(".json.gz"), file, conversations,
                                  digest in vendored))
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
    loops = find_loops(conversations)
    results: dict[str, list[list[RunResult]]] = {}
    summaries = []
    for name, replay in systems(conversations, hints, variants).items():
        started = time.perf_counter()
        results[name] = [replay(conv) for conv in conversations]
        summary = summarize(name, conversations, results[name], loops)
        summary.source = source.name
        summary.seconds = round(time.perf_counter() - started, 1)
        summaries.append(summary)
    return Measured(source, summaries, loops, results)


def overall(measured: Sequence[Measured]) -> list[Summary]:
    """Every system's numbers added up over the sources."""
    totals: dict[str, Summary] = {}
    for m in measured:
        for s in m.summaries:
            totals.setdefault(s.system, Summary(system=s.system, source="overall")).add(s)
    return list(totals.values())


def _print_source(m: Measured, details: bool) -> None:
    conversations = m.source.conversations
    solved = sum(c.solved for c in conversations)
    print(f"\n## {m.source.name} ({len(conversations)} trajectories, {solved} solved)\n")
    print(format_table(m.summaries))
    obvious = [x for x in m.loops if x.kind == "obvious"]
    print(f"\nObvious loops ({len(obvious)}):")
    print("\n".join(_loop_lines(conversations, obvious, m.results)) or "- none")
    if details:
        stuck = [x for x in m.loops if x.kind == "stuck"]
        print(f"\nStuck loops ({len(stuck)}):")
        print("\n".join(_loop_lines(conversations, stuck, m.results)) or "- none")
        for s in m.summaries:
            print(f"\n{s.system} stops ({len(s.stops)}):\n" + "\n".join(f"- {x}" for x in s.stops))
            print(f"{s.system} first warnings ({len(s.warnings)}):\n"
                  + "\n".join(f"- {x}" for x in s.warnings))
            if s.blocks:
                print(f"{s.system} blocks ({len(s.blocks)}):\n" + "\n".join(f"- {x}" for x in s.blocks))
    base = m.summaries[0]
    print(f"\nreplay check: {base.system} executed {base.executed} of {base.calls} recorded calls")


def _counts(s: Summary) -> dict[str, object]:
    return {k: v for k, v in asdict(s).items() if not isinstance(v, list)}


def _json(measured: Sequence[Measured], totals: Sequence[Summary]) -> str:
    """Aggregates for every source; runs, stops and loops by name for vendored sources only."""
    sources = []
    for m in measured:
        entry: dict[str, object] = {"source": m.source.name, "vendored": m.source.vendored}
        if m.source.vendored:
            entry["summaries"] = [asdict(s) for s in m.summaries]
            entry["obvious_loops"] = [asdict(x) for x in m.loops if x.kind == "obvious"]
            entry["stuck_loops"] = [asdict(x) for x in m.loops if x.kind == "stuck"]
        else:
            entry["summaries"] = [_counts(s) for s in m.summaries]
        sources.append(entry)
    summary = [_counts(s) for s in totals]
    return json.dumps({"sources": sources, "overall": summary}, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Replay every source under every system; print the tables and loops; write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_traces",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, action="append",
                        help="a trajectory file or a directory of them (repeatable; default"
                             " benchmarks/data/taubench_gpt-4o_airline.json.gz)")
    parser.add_argument("--limit", type=int, help="replay only the first N conversations of each")
    parser.add_argument("--json", type=Path, help=f"where to write JSON (default {DEFAULT_JSON.name}"
                        f" for vendored data only, else {ALL_JSON.name}, in {RESULTS})")
    parser.add_argument("--details", action="store_true",
                        help="list every stuck loop, warning and stop")
    parser.add_argument("--hints", action="store_true",
                        help="also run langgraph-loop with the τ-bench lookups marked read-only")
    parser.add_argument("--variants", action="store_true", help="also run langgraph-loop without the"
                        " block rung, blocking always, and without the path excuse")
    parser.add_argument("--label", action="append",
                        help="replay only the conversations with this label (repeatable)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sources = load_sources(args.data or [DATA], args.limit, args.label)
    measured = [measure(source, args.hints, args.variants) for source in sources]
    print("# Loop detection on real trajectories")
    for m in measured:
        _print_source(m, args.details)
    totals = overall(measured)
    if len(measured) > 1:
        print(f"\n## overall ({len(measured)} sources)\n")
        print(format_table(totals))
    print(f"\nbenchmark runtime: {time.perf_counter() - started:.1f} s")
    path = args.json or (None if args.label or args.limit  # a sample does not replace the results
                         else DEFAULT_JSON if all(s.vendored for s in sources) else ALL_JSON)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_json(measured, totals))
        print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
