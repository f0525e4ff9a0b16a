"""Token economy: what a runaway tool loop costs before it is stopped.

Scripted models loop as real agents do and ignore every warning (the worst case); two patterns are
legitimate and must finish. Systems: a plain loop capped at 60 model calls, deer-flow's layer-1
rule as a loop wrapper, and ``create_loop_agent`` with the same cap (``--langgraph-loop-defaults``:
no arguments). The patterns and the rule: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool

from benchmarks.systems import (
    DeerFlowGuard,
    Reply,
    ScriptedChatModel,
    ToolCounter,
    load_langgraph_loop,
    recursion_limit,
)

CAP, PROGRESS_POLLS, BATCH = 60, 12, 30
PROMPT = "Find out what you need with the tools, then answer."
WARNING = ("[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your"
           " final answer now. If you cannot complete the task, summarize what you accomplished so far.")
DEFAULT_JSON = Path(__file__).parent / "results" / "token_economy.json"
_FILLER = " ".join(f"item{i}" for i in range(60))
BOOKING = {"flight": "HAT023", "paid": 1625}

PATTERNS: dict[str, bool] = {"exact_repeat": False, "ab_cycle": False, "poll_same": False,
                             "poll_progress": True, "batch_30": True, "retry_think": False,
                             "retry_lookup": False}
"""Pattern name -> whether its repetition is legitimate (the run should finish)."""


class LoopingModel(ScriptedChatModel):
    """Scripted model for one of :data:`PATTERNS`; it never reads the warnings."""

    pattern: str
    max_steps: int = CAP
    exact_tokens: bool = True

    def script(self, step: int, last_result: str | None) -> Reply:
        """The next reply of the looping pattern."""
        if self.pattern == "exact_repeat":
            return [("search", {"query": "latest release of project X"})]
        if self.pattern == "ab_cycle":
            return [("search", {"query": "project X release date"}) if step % 2 == 0
                    else ("fetch", {"url": "https://example.com/x/releases"})]
        if self.pattern in ("poll_same", "poll_progress"):
            if last_result is not None and "done" in last_result:
                return "The job finished; its output is ready."
            return [("check_status", {"job_id": "job-42"})]
        if self.pattern in ("retry_think", "retry_lookup"):
            if step % 2 == 0:
                return [("book_flight", BOOKING)]
            if self.pattern == "retry_think":
                return [("think", {"thought": f"Attempt {step // 2 + 1} failed; the amounts "
                                              "must add up. Let me try the booking again."})]
            return [("get_flight_status", {"flight": f"HAT{step:03}", "date": "2024-05-20"})]
        if step < BATCH:
            return [("fetch", {"url": f"https://example.com/items/{step}"})]
        return f"Collected all {BATCH} items."


def make_tools(pattern: str, counter: ToolCounter) -> list[BaseTool]:
    """Fresh tools for one run (``check_status`` advances only for ``poll_progress``)."""
    polls = [0]

    @tool
    def search(query: str) -> str:
        """Search the web."""
        counter.count += 1
        return f"Results for {query!r}: {_FILLER}"

    @tool
    def fetch(url: str) -> str:
        """Fetch a web page."""
        counter.count += 1
        return f"Page {url}: {_FILLER}"

    @tool
    def check_status(job_id: str) -> str:
        """Check the status of a background job."""
        counter.count += 1
        if pattern != "poll_progress":
            return f"job {job_id}: running (0/{PROGRESS_POLLS} chunks processed)"
        polls[0] += 1
        return (f"job {job_id}: done ({PROGRESS_POLLS}/{PROGRESS_POLLS} chunks)" if polls[0] >= PROGRESS_POLLS
                else f"job {job_id}: running ({polls[0]}/{PROGRESS_POLLS} chunks processed)")

    def book_flight(flight: str, paid: int) -> str:
        """Book a flight and pay for it."""
        counter.count += 1
        raise ToolException(f"Error: payment amount does not add up, total price is 4875, "
                            f"but paid {paid}")

    @tool
    def think(thought: str) -> str:
        """Think out loud; changes nothing."""
        counter.count += 1
        return ""

    def get_flight_status(flight: str, date: str) -> str:
        """Look up a flight's status (read-only)."""
        counter.count += 1
        return f"{flight} on {date}: available, {len(flight) * 7} seats left"

    booking = StructuredTool.from_function(book_flight, handle_tool_error=True)
    lookup = StructuredTool.from_function(get_flight_status, metadata={"readOnlyHint": True})
    return [search, fetch, check_status, booking, think, lookup]


@dataclass
class Outcome:
    """One (pattern, system) run."""

    pattern: str
    system: str
    outcome: str
    stopped_by: str | None
    tool_calls: int
    model_calls: int
    tokens: int
    warnings: int
    correct: bool
    reported_tokens: int | None = None


RunInfo = tuple[str | None, int, int | None]  # what stopped it, warnings seen, tokens it reports itself


def guarded_loop(model: ScriptedChatModel, tools: list[BaseTool], guard: DeerFlowGuard | None) -> RunInfo:
    """Plain loop capped at :data:`CAP` model calls, optionally guarded by deer-flow's rule (a
    warning goes into the next request only; a stop strips the calls and ends the run)."""
    bound, by_name = model.bind_tools(tools), {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage(PROMPT)]
    warning, warnings = None, 0
    for _ in range(CAP):
        notice = [] if warning is None else [HumanMessage(warning, name="loop_warning")]
        ai = bound.invoke([*messages, *notice])
        if not isinstance(ai, AIMessage) or not ai.tool_calls:
            return None, warnings, None
        verdict = guard.check(ai) if guard else "ok"
        if verdict == "stop":
            return "hard_stop", warnings, None
        warning, warnings = (WARNING, warnings + 1) if verdict == "warn" else (None, warnings)
        messages += [ai, *(by_name[c["name"]].invoke(c) for c in ai.tool_calls)]
    return f"cap ({CAP})", warnings, None


def _run_langgraph_loop(model: ScriptedChatModel, tools: list[BaseTool], literal_defaults: bool) -> RunInfo:
    """Invoke ``create_loop_agent``; read ``stop_reason``, ``usage`` and the persisted warnings."""
    lg = load_langgraph_loop()
    assert lg is not None
    kwargs: dict[str, Any] = {} if literal_defaults else {"iterations": lg.Iterations(max_model_calls=CAP)}
    result = lg.create_loop_agent(model, tools, **kwargs).invoke(
        {"messages": [HumanMessage(PROMPT)]}, {"recursion_limit": recursion_limit(CAP)})
    reason = result.get("stop_reason")
    return (None if reason is None else str(getattr(reason, "value", reason)),
            sum(lg.is_notice(m) for m in result["messages"]),
            (result.get("usage") or {}).get("total_tokens"))


Runner = Callable[[ScriptedChatModel, list[BaseTool]], RunInfo]


def runners(literal_defaults: bool) -> dict[str, Runner]:
    """The systems; ``langgraph-loop`` only when it can be imported."""
    table: dict[str, Runner] = {"no_detection": lambda m, t: guarded_loop(m, t, None),
                                "deerflow_style": lambda m, t: guarded_loop(m, t, DeerFlowGuard())}
    if load_langgraph_loop() is not None:
        table["langgraph-loop"] = lambda m, t: _run_langgraph_loop(m, t, literal_defaults)
    return table


def run_pattern(pattern: str, system: str, runner: Runner) -> Outcome:
    """Run one pattern under one system (fresh model and tools) and classify the outcome."""
    counter, model = ToolCounter(), LoopingModel(pattern=pattern)
    stopped_by, warnings, reported = runner(model, make_tools(pattern, counter))
    finished = "answer" in model.log.kinds
    stopped_by = (None if finished and stopped_by in (None, "completed")
                  else stopped_by or (model.log.kinds[-1] if model.log.kinds else "?"))
    return Outcome(pattern, system, "finished" if finished else "stopped", stopped_by, counter.count,
                   len(model.log.kinds), model.log.total_tokens, warnings, finished == PATTERNS[pattern],
                   reported)


def format_table(outcomes: list[Outcome]) -> str:
    """Markdown table; token ratio is to ``no_detection`` on the same pattern."""
    base = {o.pattern: o.tokens for o in outcomes if o.system == "no_detection"}
    return "\n".join(["| pattern | legit? | system | outcome | stopped by | tool calls | model calls | tokens"
                      " | ×no_detection tokens | warnings seen | right call? |", "|" + "---|" * 11, *(
        f"| {o.pattern} | {'yes' if PATTERNS[o.pattern] else 'no'} | {o.system} | {o.outcome}"
        f" | {o.stopped_by or '–'} | {o.tool_calls} | {o.model_calls} | {o.tokens:,}"
        f" | {f'{o.tokens / base[o.pattern]:.2f}×' if base.get(o.pattern) else '–'} | {o.warnings}"
        f" | {'yes' if o.correct else 'NO'} |" for o in outcomes)])


def main(argv: list[str] | None = None) -> int:
    """Run every pattern under every system, print a markdown table and write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.token_economy",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated system names")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the JSON results")
    parser.add_argument("--langgraph-loop-defaults", action="store_true",
                        help="call create_loop_agent(model, tools) with no limits")
    args = parser.parse_args(argv)
    systems = runners(args.langgraph_loop_defaults)
    wanted = {v.strip() for v in (args.only or ",".join(systems)).split(",")}
    if wanted - set(systems):
        print(f"unknown or unavailable system(s): {', '.join(sorted(wanted - set(systems)))}",
              file=sys.stderr)
        return 2
    outcomes = [run_pattern(p, name, runner) for p in PATTERNS for name, runner in systems.items()
                if name in wanted]
    print(format_table(outcomes))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    meta = {"cap": CAP, "progress_polls": PROGRESS_POLLS, "batch": BATCH,
            "langgraph_loop_defaults": args.langgraph_loop_defaults}
    payload = {"meta": meta, "results": [asdict(o) for o in outcomes]}
    args.json.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
