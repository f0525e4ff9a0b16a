"""Loop detection on real model trajectories: τ-bench's 200 GPT-4o airline conversations.

The conversations (``benchmarks/data/``, see ``benchmarks/data/README.md``) are replayed
through the compiled graph (:mod:`benchmarks.replay`): one run per user message on one thread,
a scripted model returning the recorded assistant messages, tools returning the recorded
results, limits out of the way. Systems:

* ``no_detection``: ``create_loop_agent(..., loop_detection=None)``; every recorded call runs
  (a check of the replay itself);
* ``deerflow_style``: the deer-flow layer-1 rule of :class:`benchmarks.token_economy.DeerFlowGuard`
  (identical tool-call sets in a window of 20 responses, warn at 3, stop at 5), per run, over
  the same recorded replies;
* ``langgraph-loop``: ``create_loop_agent`` with its default ``LoopDetection``;
* ``langgraph-loop+hints`` (with ``--hints``): the same, with the τ-bench tools that change
  nothing (``think``, ``calculate``, the ``get_*``/``search_*``/``list_*`` lookups) carrying
  MCP's ``readOnlyHint`` in their metadata, as langchain-mcp-adapters exposes it.

Per run: the first warning and the stop (layer and reply index); the calls a stop saves are
the recorded calls from the stopped reply on. In solved trajectories (reward 1) a stop *cuts a
new call* when one of those calls was not already made earlier in the run. An *obvious loop*
is an identical call (name + canonical arguments) made 5 or more times in a run, or requested
again after it returned the same result 3 times in a row (its own results only); it counts as
stopped when the run stopped no later than that call.

Usage: ``python -m benchmarks.real_traces [--limit N] [--json PATH] [--details] [--hints]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
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

__all__ = ["DATA", "Loop", "Summary", "main", "obvious_loops", "summarize"]

DATA = Path(__file__).parent / "data" / "taubench_gpt-4o_airline.json.gz"
DEFAULT_JSON = Path(__file__).parent / "results" / "real_traces.json"
READ_ONLY = frozenset({"think", "calculate", "get_user_details", "get_reservation_details",
                       "search_direct_flight", "search_onestop_flight", "list_all_airports"})
REPEATS, SAME_RESULTS = 5, 3

ReplayFn = Callable[[Conversation], list[RunResult]]


@dataclass(frozen=True)
class Loop:
    """An obvious loop: conversation, run, call, the reply index that makes it obvious, why."""

    conversation: int
    run: int
    call: str
    reply: int
    why: str


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


def systems(conversations: Sequence[Conversation], hints: bool = False) -> dict[str, ReplayFn]:
    """The compared systems, by name (each graph is built once)."""
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
    return out


@dataclass
class Summary:
    """One system's numbers over the whole set."""

    system: str
    trajectories: int = 0
    runs: int = 0
    calls: int = 0
    executed: int = 0
    solved_warned: int = 0
    solved_stopped: int = 0
    solved_cut_new: int = 0
    failed_warned: int = 0
    failed_stopped: int = 0
    failed_saved: int = 0
    loops_stopped: int = 0
    seconds: float = 0.0
    stops: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _stop_index(result: RunResult) -> int | None:
    return result.served - 1 if result.stop_reason in ("loop_detected", "hard_stop") else None


def _cuts_new_call(run: RecordedRun, stop: int) -> bool:
    before = {canonical_call(c) for i, c in run.calls() if i < stop}
    return any(canonical_call(c) not in before for _, c in run.calls(stop))


def summarize(system: str, conversations: Sequence[Conversation],
              results: Sequence[list[RunResult]], loops: Sequence[Loop]) -> Summary:
    """Count runs, calls, warnings, stops and saved calls for one system."""
    s = Summary(system=system, trajectories=len(conversations))
    for conv, runs in zip(conversations, results, strict=True):
        for ri, (run, res) in enumerate(zip(conv.runs, runs, strict=True)):
            s.runs += 1
            s.calls += len(run.calls())
            s.executed += res.executed
            stop = _stop_index(res)
            where = f"{conv.label} run {ri} ({'solved' if conv.solved else 'failed'})"
            if stop is not None:
                s.stops.append(f"{where}: reply {stop}, {res.layer}")
            if res.first_warning is not None:
                s.warnings.append(f"{where}: reply {res.first_warning}")
            if conv.solved:
                s.solved_warned += res.first_warning is not None
                s.solved_stopped += stop is not None
                s.solved_cut_new += stop is not None and _cuts_new_call(run, stop)
            else:
                s.failed_warned += res.first_warning is not None
            if not conv.solved and stop is not None:
                s.failed_stopped += 1
                s.failed_saved += len(run.calls(stop))
    for loop in loops:
        stop = _stop_index(results[loop.conversation][loop.run])
        s.loops_stopped += stop is not None and stop <= loop.reply
    return s


def format_table(summaries: Sequence[Summary], loops: int) -> str:
    """The markdown table of the issue."""
    lines = [
        "| system | trajectories | runs | calls | solved: runs warned | solved: runs stopped"
        " | solved: stops cutting a new call | failed: runs stopped | failed: calls saved"
        " | obvious loops stopped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(f"| {s.system} | {s.trajectories} | {s.runs} | {s.calls} | {s.solved_warned}"
                     f" | {s.solved_stopped} | {s.solved_cut_new} | {s.failed_stopped}"
                     f" | {s.failed_saved} | {s.loops_stopped}/{loops} |")
    return "\n".join(lines)


def _loop_lines(conversations: Sequence[Conversation], loops: Sequence[Loop],
                results: dict[str, list[list[RunResult]]]) -> list[str]:
    lines = []
    for loop in loops:
        conv = conversations[loop.conversation]
        verdicts = []
        for name, per_conv in results.items():
            stop = _stop_index(per_conv[loop.conversation][loop.run])
            ok = stop is not None and stop <= loop.reply
            verdicts.append(f"{name}: {'stopped at reply ' + str(stop) if ok else 'not stopped'}")
        lines.append(f"- {conv.label} ({'solved' if conv.solved else 'failed'}), run {loop.run}: "
                     f"`{loop.call[:80]}` {loop.why} (reply {loop.reply}); " + "; ".join(verdicts))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Replay the set under every system; print the table and the obvious loops; write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_traces",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="replay only the first N conversations")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--details", action="store_true", help="list every warning and stop")
    parser.add_argument("--hints", action="store_true",
                        help="also run langgraph-loop with the lookups marked read-only")
    args = parser.parse_args(argv)
    conversations = load_conversations(DATA, args.limit)
    loops = [Loop(ci, ri, call, reply, why) for ci, conv in enumerate(conversations)
             for ri, run in enumerate(conv.runs) for call, reply, why in obvious_loops(run)]
    results: dict[str, list[list[RunResult]]] = {}
    summaries = []
    for name, replay in systems(conversations, args.hints).items():
        started = time.perf_counter()
        results[name] = [replay(conv) for conv in conversations]
        summary = summarize(name, conversations, results[name], loops)
        summary.seconds = round(time.perf_counter() - started, 1)
        summaries.append(summary)
    print(format_table(summaries, len(loops)))
    print(f"\nObvious loops ({len(loops)}):")
    print("\n".join(_loop_lines(conversations, loops, results)) or "- none")
    if args.details:
        for s in summaries:
            print(f"\n{s.system} stops ({len(s.stops)}):\n" + "\n".join(f"- {x}" for x in s.stops))
            print(f"{s.system} first warnings ({len(s.warnings)}):\n"
                  + "\n".join(f"- {x}" for x in s.warnings))
    base = summaries[0]
    print(f"\nreplay check: {base.system} executed {base.executed} of {base.calls} recorded calls")
    print("seconds per system: " + ", ".join(f"{s.system} {s.seconds}" for s in summaries))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summaries": [asdict(s) for s in summaries],
                                     "obvious_loops": [asdict(x) for x in loops]}, indent=2) + "\n")
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
