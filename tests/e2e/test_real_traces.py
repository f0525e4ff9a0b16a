"""Real GPT-4o trajectories (τ-bench airline, vendored in benchmarks/data/) replayed through the
compiled graph: the replay machinery of ``benchmarks/real_traces.py`` on a handful of them."""

from __future__ import annotations

import pytest

from benchmarks.real_traces import DATA, deerflow_replay, obvious_loops
from benchmarks.replay import Conversation, Replayer, RunResult, load_conversations, tool_names
from langgraph_loop import LoopDetection

PICKED = {
    "task 9 trial 2": "failed: book_reservation fails 4 times alike, a think call between tries",
    "task 8 trial 1": "failed: 3 identical failures with think between, then a transfer",
    "task 11 trial 0": "solved: think and calculate between two booking attempts",
    "task 34 trial 0": "solved: six reservation lookups, two cancellations",
    "task 2 trial 2": "solved: the most tool calls of the solved set",
}


@pytest.fixture(scope="module")
def conversations() -> dict[str, Conversation]:
    picked = {c.label: c for c in load_conversations(DATA) if c.label in PICKED}
    assert sorted(picked) == sorted(PICKED)
    return picked


def replay_all(conversations: dict[str, Conversation],
               detection: LoopDetection | None) -> dict[str, list[RunResult]]:
    replayer = Replayer(tool_names(c.runs for c in conversations.values()),
                        loop_detection=detection)
    return {label: replayer.replay(c.runs) for label, c in conversations.items()}


def stops(results: dict[str, list[RunResult]]) -> list[tuple[str, int, int, str | None]]:
    return [(label, run, r.served - 1, r.layer) for label, runs in results.items()
            for run, r in enumerate(runs) if r.stop_reason == "loop_detected"]


def test_without_detection_every_recorded_call_runs_once(
    conversations: dict[str, Conversation],
) -> None:
    results = replay_all(conversations, None)
    for label, conv in conversations.items():
        assert [r.executed for r in results[label]] == [len(run.calls()) for run in conv.runs]
        assert [r.served for r in results[label]] == [len(run.replies) for run in conv.runs]
        assert all(r.stop_reason == "completed" for r in results[label])


def test_the_think_loop_is_stopped_and_nothing_else_is_touched(
    conversations: dict[str, Conversation],
) -> None:
    results = replay_all(conversations, LoopDetection())
    assert stops(results) == [("task 9 trial 2", 7, 8, "no_progress")]
    loop = results["task 9 trial 2"][7]
    assert (loop.first_warning, loop.executed) == (6, 8)  # the ninth recorded call is saved
    warned = {(label, run) for label, runs in results.items()
              for run, r in enumerate(runs) if r.first_warning is not None}
    assert warned == {("task 9 trial 2", 7), ("task 8 trial 1", 5)}
    solved = [label for label, c in conversations.items() if c.solved]
    assert all(r.first_warning is None for label in solved for r in results[label])


def test_the_think_loop_is_an_obvious_loop_that_deerflow_style_misses(
    conversations: dict[str, Conversation],
) -> None:
    run = conversations["task 9 trial 2"].runs[7]
    ((call, reply, why),) = obvious_loops(run)
    assert call.startswith("book_reservation(") and reply == 8
    assert why == "requested again after the same result 3 times"
    deerflow = deerflow_replay(conversations["task 9 trial 2"])
    assert deerflow[7].stop_reason is None and deerflow[7].first_warning == 6
    assert all(not obvious_loops(r) for c in conversations.values() for r in c.runs
               if r is not run)
