"""Real trajectories vendored in benchmarks/data/, replayed the way a user runs the benchmark
(``python -m benchmarks.real_traces``, its JSON read back): five τ-bench GPT-4o conversations and
four excerpts of gemini-3-pro coding runs in mini-swe-agent. Each rung of the loop detector (warn,
block, stop; the path excuse; text loops) is checked on them; the same reply in a row and
consecutive tool errors on scripted runs of the library itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langgraph_loop import Calls, Iterations, Limits, LoopDetection, SameReply, create_loop_agent
from langgraph_loop.core.config import ArgPolicy
from langgraph_loop.engine.detection import normalize
from langgraph_loop.scripted import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data"
TAU = DATA / "taubench_gpt-4o_airline.json.gz"
EXCERPTS = DATA / "minisweagent_gemini-3-pro_excerpts.json.gz"
PICKED = {
    "task 9 trial 2": "failed: book_reservation fails 4 times alike, a think call between tries",
    "task 8 trial 1": "failed: 3 identical failures with think between, then a transfer",
    "task 11 trial 0": "solved: think and calculate between two booking attempts",
    "task 34 trial 0": "solved: six reservation lookups, two cancellations",
    "task 2 trial 2": "solved: the most tool calls of the solved set",
}


def real_traces(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    """Run the benchmark in a subprocess; its printout and its JSON."""
    out = tmp_path / "real_traces.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.real_traces", *args, "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(out.read_text())


def by_system(source: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["system"]: s for s in source["summaries"]}


@pytest.fixture(scope="module")
def tau(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    labels = [arg for label in PICKED for arg in ("--label", label)]
    _, data = real_traces(tmp_path_factory.mktemp("tau"), "--data", str(TAU), *labels)
    (source,) = data["sources"]
    assert source["vendored"] and by_system(source)["no_detection"]["trajectories"] == len(PICKED)
    return source


def test_without_detection_every_recorded_call_runs_once(tau: dict[str, Any]) -> None:
    plain = by_system(tau)["no_detection"]
    assert plain["executed"] == plain["calls"] > 0
    assert plain["stops"] == plain["warnings"] == plain["blocks"] == []


def test_the_think_loop_is_stopped_and_nothing_else_is_touched(tau: dict[str, Any]) -> None:
    ours, plain = by_system(tau)["langgraph-loop"], by_system(tau)["no_detection"]
    assert ours["stops"] == ["task 9 trial 2 run 7 (failed): reply 8, no_progress"]
    assert ours["failed_saved"] == 1 and ours["executed"] == plain["executed"] - 1  # the ninth call
    assert len(ours["warnings"]) == 2 and ours["warnings"][1] == "task 9 trial 2 run 7 (failed): reply 6"
    assert ours["warnings"][0].startswith("task 8 trial 1 run 5 (failed): reply ")
    assert ours["solved_warned"] == ours["solved_stopped"] == 0 and ours["blocks"] == []


def test_the_think_loop_is_an_obvious_loop_that_deerflow_style_misses(tau: dict[str, Any]) -> None:
    ((loop,),) = [tau["obvious_loops"]]
    assert (loop["run"], loop["reply"], loop["solved"]) == (7, 8, False)
    assert loop["call"].startswith("book_reservation(")
    assert loop["why"] == "requested again after the same result 3 times"
    deerflow = by_system(tau)["deerflow_style"]
    assert not any(s.startswith("task 9 trial 2 run 7 ") for s in deerflow["stops"])
    assert "task 9 trial 2 run 7 (failed): reply 6" in deerflow["warnings"]


# Coding runs: excerpts of gemini-3-pro runs in mini-swe-agent (MIT, benchmarks/data/README.md),
# in the normalized coding format; reply indices count from the excerpt's first reply.


@pytest.fixture(scope="module")
def excerpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every system's summary (``--variants``), its stops, warnings, blocks and notices by excerpt."""
    printed, data = real_traces(tmp_path_factory.mktemp("ex"), "--data", str(EXCERPTS), "--variants")
    (source,) = data["sources"]
    assert "replay check: no_detection executed 64 of 64 recorded calls" in printed
    out = by_system(source)
    out["stuck_loops"] = {"loops": source["stuck_loops"]}
    return out


def at(lines: list[str], name: str) -> list[str]:
    """The entries of one excerpt (by its instance name), without the label."""
    return [line.split(": ", 1)[1] for line in lines if line.startswith(name + " ")]


def test_the_coding_format_replays_every_recorded_call(excerpts: dict[str, dict[str, Any]]) -> None:
    plain = excerpts["no_detection"]
    assert plain["executed"] == plain["calls"] == 64 and plain["stops"] == plain["blocks"] == []
    assert (plain["runs"], plain["solved_runs"]) == (4, 3)
    solved = {line.split()[0] for line in excerpts["langgraph-loop"]["notices"] if "(solved)" in line}
    assert solved == {"django__django-13568", "sympy__sympy-15976"}  # django-16100 is never warned


def test_a_script_rerun_between_new_silent_edits_is_refused_not_stopped(
    excerpts: dict[str, dict[str, Any]],
) -> None:
    """astropy-13398 (failed): a warning after 2 identical outputs; the 4th request is refused
    and the run goes on: new ``sed -i`` edits ran in between, and solved runs do the same (issue
    37: a re-run between silent edits is work; the stop of issue 32 cut such runs). The model
    never asks again. ``block=()`` stops it there; deer-flow at the fifth request."""
    name, ours = "astropy__astropy-13398", excerpts["langgraph-loop"]
    assert at(ours["warnings"], name) == ["reply 6"]
    assert at(ours["blocks"], name) == ["reply 10, call 0"] and at(ours["stops"], name) == []
    assert ours["failed_saved"] == 1  # the refused request
    assert at(excerpts["langgraph-loop, block=()"]["stops"], name) == ["reply 10, no_progress"]
    assert at(excerpts["deerflow_style"]["stops"], name) == ["reply 13, repeat"]  # the fifth request


def test_edit_and_rerun_whose_output_changes_is_left_running(excerpts: dict[str, dict[str, Any]]) -> None:
    name = "django__django-16100"
    assert at(excerpts["deerflow_style"]["stops"], name) == ["reply 11, repeat"]  # a false stop
    assert excerpts["deerflow_style"]["solved_cut_new"] == 1  # it cuts a new call
    ours = excerpts["langgraph-loop"]
    assert at(ours["stops"], name) == at(ours["warnings"], name) == at(ours["blocks"], name) == []


def test_rereading_a_file_after_a_write_that_names_it_is_not_stagnation(
    excerpts: dict[str, dict[str, Any]],
) -> None:
    name, ours = "django__django-13568", excerpts["langgraph-loop"]
    assert at(ours["stops"], name) == at(ours["blocks"], name) == []  # the sed excuses the 4th read
    assert [n.split(":")[0] for n in at(ours["notices"], name)] == ["reply 11"]  # warned at the 3rd
    unexcused = excerpts["langgraph-loop, no path excuse"]  # the new sed between: refused, not stopped
    assert at(unexcused["blocks"], name) == ["reply 15, call 0"] and unexcused["solved_stopped"] == 0


def test_the_solved_run_with_a_real_loop_the_model_escaped(excerpts: dict[str, dict[str, Any]]) -> None:
    """sympy-15976 (solved): the same failing test 3 times across no-op edits, then the real fix.
    Ours blocks the fourth run instead of stopping the run (``block=()`` cuts the solved run);
    the text loop at reply 17 is warned about."""
    name, ours = "sympy__sympy-15976", excerpts["langgraph-loop"]
    ((stuck,),) = [excerpts["stuck_loops"]["loops"]]
    assert stuck["call"] == ('bash({"command": "sed -i \'s/return mmsubsup/return mmsubsup/\' '
                             'sympy/printing/mathml.py"})')
    assert (stuck["reply"], stuck["why"]) == (6, "the same result 4 times (not requested again)")
    assert at(ours["stops"], name) == [] and at(ours["blocks"], name) == ["reply 19, call 0"]
    assert any(n.startswith("reply 17: ") and "repeats the same text" in n for n in at(ours["notices"], name))
    assert at(excerpts["langgraph-loop, block=()"]["stops"], name) == ["reply 19, no_progress"]
    assert at(excerpts["deerflow_style"]["stops"], name) == []


def test_sources_are_read_once_each_from_files_and_directories(tmp_path: Path) -> None:
    printed, data = real_traces(tmp_path, "--data", str(DATA), "--data", str(TAU), "--data",
                                str(EXCERPTS), "--limit", "3")
    assert [(s["source"], s["vendored"]) for s in data["sources"]] == [
        ("minisweagent_gemini-3-pro_excerpts", True), ("taubench_gpt-4o_airline", True)]
    assert [line for line in printed.splitlines() if line.startswith("## ")] == [
        "## minisweagent_gemini-3-pro_excerpts (3 trajectories, 2 solved)",
        "## taubench_gpt-4o_airline (3 trajectories, 0 solved)", "## overall (2 sources)"]


def test_volatile_parts_of_results_are_normalized() -> None:
    first = "/bin/bash: line 36191: javac: command not found\nRan 3 tests in 0.41s"
    again = "/bin/bash: line 36254: javac: command not found\nRan 3 tests in 0.38s"
    assert first != again and normalize(first) == normalize(again)
    assert normalize("at 0x7f3a2c10 on 2025-11-19T00:04:32") == normalize(
        "at 0x7f00ffee on 2025-11-19T00:05:26")
    assert normalize("line 12 of x.py") != normalize("line 13 of x.py")


# Scripted runs of the library: ``poll({})`` once per reply, returning the given results.


def poll_run(results: list[str], *, errors: bool = False,
             **kwargs: Any) -> tuple[int | None, str, str | None, int]:
    """(reply index of the stop or None, stop reason, layer, tool executions)."""
    served = iter(results)
    executed = [0]

    @tool
    def poll() -> str:
        """Poll the job."""
        executed[0] += 1
        text = next(served)
        if errors:
            raise ValueError(text)
        return text

    replies = [AIMessage("", tool_calls=[{"name": "poll", "args": {}, "id": f"c{i}"}])
               for i in range(len(results))]
    model = ScriptedChatModel(script=[*replies, "done"], no_tools_reply="final")
    graph = create_loop_agent(model, [poll], iterations=Iterations(max=None, max_model_calls=None),
                              **kwargs)
    state = graph.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 500})
    reason = str(getattr(state.get("stop_reason"), "value", state.get("stop_reason")))
    guard = (state.get("iterations") or [{}])[-1].get("guard") or {}
    calling = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    stopped = reason in ("loop_detected", "tool_errors")
    return (len(calling) - 1 if stopped else None), reason, guard.get("layer"), executed[0]


def test_a_runaway_repeat_stops_at_8_in_a_row_and_a_declared_poll_finishes() -> None:
    """The same call back to back 8 times stops whatever it returns (issue 37: 15 before); a
    tool declared as polled waits while its result moves."""
    advancing = [f"job 7: {10 * i} % done" for i in range(12)]
    polled = LoopDetection(calls=Calls(arg_policies={"poll": ArgPolicy(polls=True)}))
    assert poll_run(advancing, loop_detection=polled)[:2] == (None, "completed")
    assert poll_run(advancing, loop_detection=LoopDetection())[:3] == (7, "loop_detected", "same_reply")
    growing = [f"[File: A.java ({33 * (i + 1)} lines total)]" for i in range(20)]
    assert poll_run(growing, loop_detection=LoopDetection())[:3] == (7, "loop_detected", "same_reply")
    was = LoopDetection(same_reply=SameReply(stop_after=15))
    assert poll_run(growing, loop_detection=was)[:3] == (14, "loop_detected", "same_reply")


def test_consecutive_errors_stop_only_when_asked_for() -> None:
    failures = [f"Error: flight HAT{i:03d} is full" for i in range(7)]
    assert poll_run(failures, errors=True, loop_detection=LoopDetection())[:2] == (None, "completed")
    stopped = poll_run(failures, errors=True, loop_detection=LoopDetection(),
                       limits=Limits(max_tool_errors=3))
    assert (stopped[0], stopped[1], stopped[3]) == (3, "tool_errors", 3)


def test_the_middleware_decides_as_the_graph_on_real_runs(tmp_path: Path) -> None:
    """create_agent + LoopDetectionMiddleware replays the picked τ-bench conversations and the
    coding excerpts with the same warnings (and their texts), blocks and stops as the graph."""
    labels = [arg for label in PICKED for arg in ("--label", label)]
    for args in (["--data", str(TAU), *labels], ["--data", str(EXCERPTS)]):
        printed, data = real_traces(tmp_path, *args, "--middleware")
        (source,) = data["sources"]
        runs = by_system(source)["no_detection"]["runs"]
        assert f"warned, blocked and stopped as the graph on {runs} of {runs} runs" in printed
        graph = by_system(source)["langgraph-loop"]
        middleware = by_system(source)["create_agent + LoopDetectionMiddleware"]
        assert middleware["stops"] == graph["stops"] and graph["stops"] + graph["blocks"]
        assert middleware["blocks"] == graph["blocks"]
        assert middleware["notices"] == graph["notices"] and graph["notices"]
