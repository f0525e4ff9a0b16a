"""Loop-detector cost per step against thread length.

The ``loop_detector`` node runs after every model reply. Its work must be O(window),
never a scan of the transcript: this measures one node step (limits, detection
layers, notice queue) on threads of 25 to 10,000 tool rounds, with the detection
window full, and prints µs per step and the ratio to the shortest thread.

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
from langgraph_loop.nodes.detection import observe
from langgraph_loop.nodes.loop_detector import loop_detector, previous_results
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["history", "main", "measure"]

LENGTHS = (25, 250, 2500, 10000)  # from a full detection window (20) up


def history(rounds: int) -> list[BaseMessage]:
    """A thread of ``rounds`` distinct tool rounds, ending on a new tool-calling reply."""
    messages: list[BaseMessage] = [HumanMessage("go", id=uuid.uuid4().hex)]
    for i in range(rounds):
        call = {"name": "echo", "args": {"x": f"round {i}"}, "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(f"echo round {i}", tool_call_id=f"c{i}", id=f"t{i}"))
    last = {"name": "echo", "args": {"x": "next"}, "id": "cn", "type": "tool_call"}
    messages.append(AIMessage("", tool_calls=[last], id="an"))
    return messages


def _state(messages: list[BaseMessage], settings: LoopSettings) -> dict[str, Any]:
    """State as the node sees it, with the detector window filled by replaying 30 rounds."""
    detector: dict[str, Any] = {}
    config = settings.loop_detection
    assert config is not None
    tail = messages[-61:]
    for i, ai in enumerate(tail[:-1]):
        if isinstance(ai, AIMessage):
            detector = observe(detector, ai, previous_results(tail[: i + 1]), config).state
    assert len(detector["window"]) == config.window
    return {
        "messages": messages, "detector": detector, "pending_notices": [],
        "run": {"id": "r", "started_at": time.time(), "tool_calls": len(messages) // 2},
        "pass_info": {"model_calls": 1}, "usage": {"total_tokens": 100}, "iteration": 1,
    }


def measure(rounds: int, reps: int = 300) -> dict[str, Any]:
    """µs of one ``loop_detector`` step on a thread of ``rounds`` rounds (min and median)."""
    settings = LoopSettings.build(ScriptedChatModel())
    state = _state(history(rounds), settings)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        loop_detector(state, settings)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - start) * 1e6)
    # the minimum is the step's own cost; the median also carries the machine's noise
    return {"rounds": rounds, "messages": len(state["messages"]),
            "us_per_step": round(min(samples), 2),
            "us_median": round(statistics.median(samples), 2)}


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table with the ratio to the shortest thread."""
    base = rows[0]["us_per_step"]
    lines = ["| thread (tool rounds) | messages | µs per loop_detector step (min) | × shortest "
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
    print("### Loop-detector cost per step vs thread length\n")
    print(table(rows))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
