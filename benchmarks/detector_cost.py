"""Loop-detector cost per reply against thread length.

The loop detector's decision (``decide``) runs as the edge after every model reply.
Its work must be O(window), never a scan of the transcript: this measures one
decision (limits, detection layers over the state derived from the run's replies,
budget pressure) on threads of 25 to 10,000 tool rounds, with the detection window
full and the per-process memo of the derived state warm (as in a running graph),
and prints µs per decision and the ratio to the shortest thread.

Run: ``python -m benchmarks.detector_cost`` (part of ``make bench``).

Example:
    >>> row = measure(20, reps=50)
    >>> row["rounds"], row["us_per_step"] > 0
    (20, True)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.nodes.loop_detector import LoopDetector
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["history", "main", "measure"]

LENGTHS = (25, 250, 2500, 10000)  # from a full detection window (20) up
RUN_ROUNDS = 30
"""Rounds of the current run (the rest of the thread is earlier runs)."""


def history(rounds: int) -> list[BaseMessage]:
    """A thread of ``rounds`` distinct tool rounds, ending on a new tool-calling reply; the
    current run's request comes ``RUN_ROUNDS`` rounds before the end."""
    messages: list[BaseMessage] = [HumanMessage("go", id=uuid.uuid4().hex)]
    for i in range(rounds):
        if i == max(0, rounds - RUN_ROUNDS):
            messages.append(HumanMessage("the run's request", id=uuid.uuid4().hex))
        call = {"name": "echo", "args": {"x": f"round {i}"}, "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(f"echo round {i}", tool_call_id=f"c{i}", id=f"t{i}"))
    last = {"name": "echo", "args": {"x": "next"}, "id": "cn", "type": "tool_call"}
    messages.append(AIMessage("", tool_calls=[last], id="an"))
    return messages


def _state(messages: list[BaseMessage], settings: LoopSettings, decide: Any) -> dict[str, Any]:
    """State as the edge sees it: a run that started 30 rounds ago (its window full).

    Deciding once on the reply before the newest warms the memo of the derived state,
    as the graph's own decision on that reply did.
    """
    config = settings.loop_detection
    assert config is not None
    request = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    run = {"id": uuid.uuid4().hex, "started_at": time.time(), "tool_calls": RUN_ROUNDS,
           "request_id": request.id}
    state: dict[str, Any] = {
        "messages": messages, "pending_notices": [], "run": run,
        "iteration_info": {"model_calls": 1}, "usage": {"total_tokens": 100}, "iteration": 1,
    }
    decision = decide({**state, "messages": messages[:-2]}, settings)
    assert decision is not None and decision.detector is not None
    assert len(decision.detector["window"]) == min(config.window, len(messages) // 2 - 1)
    return state


def measure(rounds: int, reps: int = 300) -> dict[str, Any]:
    """µs of one decision on a thread of ``rounds`` rounds (min and median)."""
    settings = LoopSettings.build(ScriptedChatModel())
    decide = LoopDetector(settings).decide
    state = _state(history(rounds), settings, decide)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        decide(state, settings)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - start) * 1e6)
    # the minimum is the decision's own cost; the median also carries the machine's noise
    return {"rounds": rounds, "messages": len(state["messages"]),
            "us_per_step": round(min(samples), 2),
            "us_median": round(statistics.median(samples), 2)}


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table with the ratio to the shortest thread."""
    base = rows[0]["us_per_step"]
    lines = ["| thread (tool rounds) | messages | µs per decision (min) | × shortest "
             "| median µs |", "|---|---|---|---|---|"]
    lines += [f"| {r['rounds']} | {r['messages']} | {r['us_per_step']:.1f} | "
              f"{r['us_per_step'] / base:.2f}× | {r['us_median']:.1f} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: print the table and write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.detector_cost")
    parser.add_argument("--json", default="benchmarks/results/detector_cost.json")
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args(argv)
    measure(LENGTHS[0], args.reps)  # warm-up: imports, caches
    rows = [measure(n, args.reps) for n in LENGTHS]
    print("### Loop-detector decision cost per reply vs thread length\n")
    print(table(rows))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
