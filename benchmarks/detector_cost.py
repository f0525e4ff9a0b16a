"""The loop detector's decision cost per reply against thread length (it must be O(window)): one
decision on threads of 25 to 10,000 rounds, the window full and the derived state's memo warm, as
in a running graph; µs (min and median), the ratio to the shortest, and issue 24's target. Also the
cost of a fresh tool result's identity (``hash_cost``, issue 31), per character, beside SHA-1's.

Example:
    >>> row = measure(20, reps=50)
    >>> row["rounds"], row["us_per_step"] > 0
    (20, True)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from benchmarks.systems import coding_output
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.engine.decision import DetectorMemo, decide
from langgraph_loop.engine.detection import content_hash, same_result
from langgraph_loop.nodes.view import policy_of, run_view
from langgraph_loop.scripted import ScriptedChatModel

LENGTHS = (25, 250, 2500, 10000)  # from a full detection window (20) up
RUN_ROUNDS = 30  # rounds of the current run (the rest of the thread is earlier runs)


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


def measure(rounds: int, reps: int = 300) -> dict[str, Any]:
    """µs of one decision on a thread of ``rounds`` rounds (min: its own cost; median: with noise),
    in a run that started 30 rounds ago; deciding once on the reply before warms the memo, as the
    graph's own decision on that reply did."""
    settings = LoopSettings.build(ScriptedChatModel())
    memo, messages = DetectorMemo(), history(rounds)
    request = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    run = {"id": uuid.uuid4().hex, "started_at": time.time(), "tool_calls": RUN_ROUNDS,
           "request_id": request.id}
    state: Any = {"loop_notices": [], "run": run, "iteration": 1,
                  "iteration_info": {"model_calls": 1}, "usage": {"total_tokens": 100}}
    reply, policy = messages[-1], policy_of(settings)
    view = run_view(state, settings, reply)

    def once() -> None:
        decide(reply, messages[:-1], view, policy, memo)

    decide(messages[-3], messages[:-3], view, policy, memo)  # warms the memo, as the graph did
    detector = memo.state_before(messages[:-1], view, policy.detection)  # type: ignore[arg-type]
    assert settings.loop_detection is not None
    assert len(detector["window"]) == min(settings.loop_detection.calls.window, len(messages) // 2 - 1)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        once()
        samples.append((time.perf_counter() - start) * 1e6)
    return {"rounds": rounds, "messages": len(messages), "us_per_step": round(min(samples), 2),
            "us_median": round(statistics.median(samples), 2)}


def rows(reps: int = 300) -> list[dict[str, Any]]:
    """:func:`measure` for every length of :data:`LENGTHS`, after a warm-up (imports, caches)."""
    measure(LENGTHS[0], reps)
    return [measure(n, reps) for n in LENGTHS]


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table with the ratio to the shortest thread."""
    base = rows[0]["us_per_step"]
    lines = ["| thread (tool rounds) | messages | µs per decision (min) | × shortest "
             "| median µs |", "|---|---|---|---|---|"]
    lines += [f"| {r['rounds']} | {r['messages']} | {r['us_per_step']:.1f} | "
              f"{r['us_per_step'] / base:.2f}× | {r['us_median']:.1f} |" for r in rows]
    return "\n".join(lines)


def _read(how: str, texts: list[str]) -> None:
    """Read ``texts`` one after another as ``how`` says (see ``hash_cost``)."""
    for before, text in zip(["", *texts], texts, strict=False):
        if how == "identity":
            _ = same_result(text, before)
        elif how == "content_hash":
            content_hash(text)
        else:
            hashlib.sha1(text.encode()).hexdigest()


def hash_cost(reps: int = 5, seeds: int = 3, steps: int = 8) -> dict[str, float]:
    """ns per character, on coding outputs (5-50 KB: logs, listings, test runs; new seeds each
    repetition, so no memo helps): what the detector pays for a new result (``same_result`` against
    with the previous one), what normalizing one costs when two could be equal
    (``content_hash``), and SHA-1 of the same texts; the minimum of ``reps``, robust to load."""
    best = {"identity": float("inf"), "content_hash": float("inf"), "sha1": float("inf")}
    for rep in range(reps):
        texts = [coding_output(1_000 * rep + seed, step) for seed in range(seeds) for step in range(steps)]
        chars = sum(map(len, texts))
        for name in list(best):
            start = time.perf_counter()
            _read(name, texts)
            best[name] = min(best[name], (time.perf_counter() - start) * 1e9 / chars)
    return {"identity_ns_per_char": round(best["identity"], 2), "ns_per_char": round(best["content_hash"], 2),
            "sha1_ns_per_char": round(best["sha1"], 2), "kb_per_output": round(chars / len(texts) / 1000, 1)}


def main(argv: list[str] | None = None) -> int:
    """CLI: print the table and write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.detector_cost")
    parser.add_argument("--json", default="benchmarks/results/detector_cost.json")
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args(argv)
    measured = rows(args.reps)
    ratio = measured[-1]["us_per_step"] / measured[0]["us_per_step"]
    print(f"### Loop-detector decision cost per reply vs thread length\n\n{table(measured)}\n\n"
          f"Target (issue 24: flat from 25 to 10,000 rounds): longest ÷ shortest {ratio:.3f} ≤ 1.1:"
          f" {'PASS' if ratio <= 1.1 else 'FAIL'}")
    cost = hash_cost()
    print(f"\nA fresh tool result (coding outputs, {cost['kb_per_output']} KB on average), ns per character:"
          f" the detector's identity (compared with the previous result) {cost['identity_ns_per_char']},"
          f" normalizing it (content_hash, only when two results could be equal) {cost['ns_per_char']},"
          f" SHA-1 {cost['sha1_ns_per_char']}. The round's cost is `python -m benchmarks --payload`'s.")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(measured, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
