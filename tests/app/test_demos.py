"""Every demo scenario keeps its word: its title, scripted answers and footers match the run.

Each ``Scenario`` declares what its title claims (``Expect``: stop reason, iterations, loop
warnings, model calls); these tests run every scenario and compare, and check the claims
that need the transcript (a final answer true to the tool results, sections in order,
counts that agree).
"""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from langgraph_loop import LoopDetection
from langgraph_loop.app.demos import all_scenarios
from langgraph_loop.app.demos.base import Scenario, check, loop_warnings
from langgraph_loop.core.messages import is_notice

SCENARIOS = {s.key: s for s in all_scenarios()}


def play(scenario: Scenario) -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    state = scenario.run(Console(file=out, width=400), InMemorySaver())
    return state, out.getvalue()


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_each_scenario_does_what_its_title_claims(key: str) -> None:
    scenario = SCENARIOS[key]
    assert scenario.expect is not None, f"{key}: no claims declared"
    state, printed = play(scenario)
    assert check(scenario.expect, state) == []
    titles = " ".join([scenario.title, *re.findall(r"─ (.+?) ─", printed)]).lower()
    warnings = loop_warnings(state["messages"])
    if "never flagged" in titles or "is not a loop" in titles:
        assert warnings == 0
    elif "warned" in titles or "warning" in titles:
        assert warnings >= 1
    if "stopped" in titles and "never flagged" not in titles:
        assert state["stop_reason"] != "completed"


def test_runaway_answer_is_true_to_its_checks_and_explains_the_extra_call() -> None:
    state, printed = play(SCENARIOS["runaway"])
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    ran = [m for m in results if m.status == "success"]
    answer = str(state["messages"][-1].content)
    assert f"I checked the weather {len(ran)} times" in answer
    assert {str(m.content) for m in ran} == {"unknown city"} and "'unknown city'" in answer
    assert "18°C" not in answer
    asked = [c["args"]["city"] for m in state["messages"] if isinstance(m, AIMessage)
             for c in m.tool_calls]
    assert f"My request for {asked[-1]} was stopped" in answer
    assert "model_calls=5: the 4 calls max_model_calls allows" in printed
    assert "plus the tools-free final-answer call" in printed


def test_poll_progress_repeats_more_than_a_loop_may_and_is_never_flagged() -> None:
    state, _ = play(SCENARIOS["poll-progress"])
    polls = [c for c in state["iterations"][0]["tool_calls"] if c["name"] == "job_status"]
    assert len(polls) == 7 > LoopDetection().repeat.stop_after
    assert loop_warnings(state["messages"]) == 0
    assert not any(is_notice(m) for m in state["messages"])


def test_approval_prints_its_title_before_the_pause() -> None:
    _, printed = play(SCENARIOS["approval"])
    title = printed.index("Approval: resolver first, then a human decision")
    assert title < printed.index("resolver: approving") < printed.index("paused for a human")
    assert printed.index("paused for a human") < printed.index("reviewer resumes with")


def test_compaction_counts_agree() -> None:
    state, printed = play(SCENARIOS["compaction"])
    match = re.search(r"(\d+) compactions replaced ([\d + ]+) = (\d+) messages", printed)
    assert match is not None
    parts = [int(p) for p in match.group(2).split(" + ")]
    assert len(parts) == int(match.group(1)) and sum(parts) == int(match.group(3))
    assert int(match.group(3)) == sum(r.get("compacted", 0) for r in state["iterations"])
    (summary,) = [m for m in state["messages"] if m.type == "human" and m.name == "loop_summary"]
    assert f"({parts[-1]} messages were compacted)" in str(summary.content)
    read = {int(n) for n in re.findall(r"chapter (\d+)", str(summary.content))}
    kept = {c["args"]["number"] for m in state["messages"] if isinstance(m, AIMessage)
            for c in m.tool_calls}
    assert read | kept == {1, 2, 3, 4, 5} and not read & kept
