"""The rules users pick instead of ours, as ``benchmarks/rivals.py`` replays them (issue 37): each
rule on small recorded runs where it must fire and where it must not, and the one command that
prints the ablation and the rivals tables, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from langchain_core.messages import AIMessage

from benchmarks.real_traces import RecordedRun
from benchmarks.rivals import RIVAL_FAMILIES, in_a_row, model_call_limit, openhands, tool_call_limit

REPO = Path(__file__).resolve().parents[2]
TAU = REPO / "benchmarks" / "data" / "taubench_gpt-4o_airline.json.gz"


def run_of(calls: list[tuple[str, str]], errors: frozenset[int] = frozenset()) -> RecordedRun:
    """One call per reply: ``(name, result)``; ``errors``: the replies whose result failed."""
    replies = [AIMessage("", tool_calls=[{"name": n, "args": {}, "id": f"c{i}"}])
               for i, (n, _) in enumerate(calls)]
    return RecordedRun("task", replies, {(i, 0): r for i, (_, r) in enumerate(calls)},
                       frozenset((i, 0) for i in errors))


def test_n_in_a_row_counts_consecutive_calls_and_cycles_and_strikes() -> None:
    same = run_of([("f", "x")] * 6)
    assert in_a_row(same, n=3, cycle=1, strikes=1) == 2  # the third call is not run
    assert in_a_row(same, n=3, cycle=1, strikes=2) == 5  # warned at the third, counted again
    alternating = run_of([("a", "1"), ("b", "2")] * 4)
    assert in_a_row(alternating, n=3, cycle=1, strikes=1) is None
    assert in_a_row(alternating, n=3, cycle=5, strikes=1) == 5  # a, b three times
    batch = run_of([(f"label_{i}", "ok") for i in range(10)])
    assert in_a_row(batch, n=3, cycle=5, strikes=1) is None


def test_openhands_needs_the_same_observation_or_the_same_error() -> None:
    moving = run_of([("poll", f"{10 * i}%") for i in range(8)])
    assert openhands(moving, n=4) is None  # the observation changes: not stuck
    assert openhands(run_of([("poll", "0%")] * 8), n=4) == 4  # after the 4th, before the 5th call
    failing = run_of([("book", f"Error {i}") for i in range(6)], errors=frozenset(range(6)))
    assert openhands(failing, n=4) == 3  # the same action answered by an error 3 times
    ping = run_of([("a", "1"), ("b", "2")] * 4)
    assert openhands(ping, n=4) == 6  # A-B six times


def test_langchain_limits_count_calls_and_model_calls() -> None:
    run = run_of([("f", str(i)) for i in range(5)])
    assert tool_call_limit(run, 3) == 3 and tool_call_limit(run, 5) is None
    assert model_call_limit(run, 2) == 2 and model_call_limit(run, 5) is None


def test_one_command_prints_the_ablation_and_the_rivals(tmp_path: Path) -> None:
    out = tmp_path / "rivals.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.rivals", "--data", str(TAU), "--limit", "40",
                           "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    assert "## Ablation" in printed and "## Rivals" in printed
    assert "| no_progress (default) |" in printed and "| drift (opt-in) |" in printed
    data = json.loads(out.read_text())
    defaults = data["defaults"]["taubench_gpt-4o_airline"]
    assert defaults["solved_cut_new"] == 0 and defaults["runs"] > 40  # runs of 40 conversations
    families = {r["family"] for r in data["rivals"]}
    assert families <= set(RIVAL_FAMILIES) and "OpenHands stuck detector" in families
    for record in data["rivals"]:  # every printed best point meets the limits
        assert record["solved_cut_new"] == 0
        assert record["solved_stopped"] <= 0.005 * record["solved_runs"]
