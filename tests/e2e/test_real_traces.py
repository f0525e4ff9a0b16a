"""Real trajectories vendored in benchmarks/data/ replayed through the compiled graph (the replay
machinery of ``benchmarks/real_traces.py``) and through the prototype of
``benchmarks/detector_proto.py``: five τ-bench GPT-4o conversations and four excerpts of
gemini-3-pro coding runs in mini-swe-agent. Each layer and rung of the loop detector (per-call
stagnation: warn, block, stop; the path excuse; text loops; the same reply in a row;
consecutive tool errors) is checked on them."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from benchmarks.detector_proto import ProtoConfig, normalize, replay_run, text_loop
from benchmarks.real_traces import (
    DATA,
    VENDORED,
    cuts_new_call,
    deerflow_replay,
    load_sources,
    obvious_loops,
    stop_index,
    stuck_loops,
)
from benchmarks.replay import (
    Conversation,
    RecordedRun,
    Replayer,
    RunResult,
    canonical_call,
    load_conversations,
    tool_names,
)
from langgraph_loop import Limits, LoopDetection

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


# Coding runs: excerpts of gemini-3-pro runs in mini-swe-agent (MIT, benchmarks/data/README.md),
# in the normalized coding format; reply indices below count from the excerpt's first reply.

EXCERPTS = VENDORED / "minisweagent_gemini-3-pro_excerpts.json.gz"
LADDER = ProtoConfig(block_after=3, stop_after=99)


@pytest.fixture(scope="module")
def excerpts() -> dict[str, Conversation]:
    return {c.label.split()[0]: c for c in load_conversations(EXCERPTS)}


@pytest.fixture(scope="module")
def ours(excerpts: dict[str, Conversation]) -> dict[str, RunResult]:
    """The library (default LoopDetection) replayed through the compiled graph."""
    replayer = Replayer(tool_names(c.runs for c in excerpts.values()), loop_detection=LoopDetection())
    return {name: replayer.replay(c.runs)[0] for name, c in excerpts.items()}


def proto(conversation: Conversation, config: ProtoConfig | None = None) -> RunResult:
    return replay_run(conversation.runs[0], config)


def test_the_coding_format_replays_every_recorded_call(excerpts: dict[str, Conversation]) -> None:
    results = replay_all(excerpts, None)
    for name, conv in excerpts.items():
        (run,) = conv.runs
        assert results[name][0].executed == len(run.calls()) == len(run.replies)
        assert results[name][0].stop_reason == "completed"
    assert {n for n, c in excerpts.items() if c.solved} == {
        "django__django-13568", "django__django-16100", "sympy__sympy-15976"}


def test_a_script_stagnating_between_edits_is_blocked_then_stopped_on_time(
    excerpts: dict[str, Conversation], ours: dict[str, RunResult],
) -> None:
    """The ladder: a warning after 2 identical outputs, a block at the 4th request (edits ran in
    between: the edit might have mattered, so the call is refused, not the run), a stop when the
    model asks for it again. Before issue 22 the edits reset the streak and nothing fired."""
    conv = excerpts["astropy__astropy-13398"]
    run = conv.runs[0]
    script = 'bash({"command": "python reproduce_issue.py"})'
    asks = [i for i, c in run.calls() if canonical_call(c) == script]
    assert asks == [2, 4, 6, 10, 13]  # byte-identical output at 2, 4 and 6, edits in between
    mine = ours["astropy__astropy-13398"]
    assert (mine.first_warning, mine.blocked, stop_index(mine)) == (6, ((10, 0),), 13)
    assert mine.layer == "no_progress" and mine.executed == 12  # the blocked run never ran
    assert stop_index(proto(conv)) == 10  # the prototype's plain stop at the 4th request
    assert stop_index(deerflow_replay(conv)[0]) == 13  # the fifth request
    ladder = proto(conv, LADDER)
    assert ladder.blocked == mine.blocked and stop_index(ladder) == stop_index(mine)
    plain = Replayer(tool_names([conv.runs]), loop_detection=LoopDetection(block=())).replay(
        conv.runs)[0]
    assert stop_index(plain) == 10 and not plain.blocked  # block=(): the prototype's stop


def test_edit_and_rerun_whose_output_changes_is_left_running(
    excerpts: dict[str, Conversation], ours: dict[str, RunResult],
) -> None:
    conv = excerpts["django__django-16100"]
    assert stop_index(deerflow_replay(conv)[0]) == 11  # a false stop in a solved run
    assert cuts_new_call(conv.runs[0], 11)
    assert stop_index(proto(conv)) is None and proto(conv).first_warning is None
    assert stop_index(ours["django__django-16100"]) is None


def test_rereading_a_file_after_a_write_that_names_it_is_not_stagnation(
    excerpts: dict[str, Conversation], ours: dict[str, RunResult],
) -> None:
    conv = excerpts["django__django-13568"]
    run = conv.runs[0]
    read = 'bash({"command": "cat django/contrib/auth/checks.py"})'
    reads = [(i, run.result(i, str(c["id"]))) for i, c in run.calls() if canonical_call(c) == read]
    assert [i for i, _ in reads] == [2, 9, 11, 15]
    assert len({r for _, r in reads[:3]}) == 1 and reads[3][1] != reads[0][1]
    assert "django/contrib/auth/checks.py" in str(run.replies[12].tool_calls[0]["args"])  # sed -i
    assert stop_index(proto(conv)) is None
    assert stop_index(proto(conv, ProtoConfig(touch=False))) == 15  # would cut the fresh read
    mine = ours["django__django-13568"]
    assert stop_index(mine) is None and not mine.blocked  # the sed excuses the fourth read
    assert [i for i, _ in mine.notices] == [11]  # warned at the third (nothing named it yet)
    unexcused = Replayer(tool_names([conv.runs]), loop_detection=LoopDetection(
        path_excuse=False)).replay(conv.runs)[0]
    assert unexcused.blocked == ((15, 0),)  # without the excuse the fresh read is refused


def test_the_solved_run_with_a_real_loop_the_model_escaped(
    excerpts: dict[str, Conversation], ours: dict[str, RunResult],
) -> None:
    """sympy-15976 (solved): the same failing test 3 times across no-op edits, then the real
    fix. Nothing tells it apart from a stuck loop: ours blocks the fourth run instead of
    stopping the run (the prototype's plain stop cuts the solved run; ours before issue 22 cut
    it at the no-op sed, reply 6). The text loop at reply 17 is warned about."""
    conv = excerpts["sympy__sympy-15976"]
    run = conv.runs[0]
    assert stuck_loops(run) == [(
        'bash({"command": "sed -i \'s/return mmsubsup/return mmsubsup/\' sympy/printing/mathml.py"})',
        6, "the same result 4 times (not requested again)")]
    assert [i for i, ai in enumerate(run.replies) if text_loop(str(ai.content))] == [17]
    mine = ours["sympy__sympy-15976"]
    assert stop_index(mine) is None and mine.blocked == ((19, 0),)
    assert any(i == 17 and "repeats the same text" in text for i, text in mine.notices)
    # the malformed reply at 5 names the same file: the sed's fourth try is excused
    assert stop_index(proto(conv)) == 19  # the test failed alike 3 times; the fourth run passes
    ladder = proto(conv, LADDER)
    assert ladder.blocked == ((19, 0),) and stop_index(ladder) is None
    assert stop_index(deerflow_replay(conv)[0]) is None


def test_sources_are_read_once_each_from_files_and_directories() -> None:
    sources = load_sources([DATA, VENDORED, EXCERPTS])
    assert [(s.name, s.vendored) for s in sources] == [
        ("taubench_gpt-4o_airline", True), ("minisweagent_gemini-3-pro_excerpts", True)]
    assert [len(s.conversations) for s in sources] == [200, 4]


def test_volatile_parts_of_results_are_normalized() -> None:
    first = "/bin/bash: line 36191: javac: command not found\nRan 3 tests in 0.41s"
    again = "/bin/bash: line 36254: javac: command not found\nRan 3 tests in 0.38s"
    assert first != again and normalize(first) == normalize(again)
    assert normalize("at 0x7f3a2c10 on 2025-11-19T00:04:32") == normalize(
        "at 0x7f00ffee on 2025-11-19T00:05:26")
    assert normalize("line 12 of x.py") != normalize("line 13 of x.py")


def _scripted_run(results: list[str], errors: bool = False) -> RecordedRun:
    """One call ``poll({})`` per reply, returning the given results."""
    replies = [AIMessage("", tool_calls=[{"name": "poll", "args": {}, "id": f"c{i}"}])
               for i in range(len(results))]
    return RecordedRun("go", replies, {(i, 0): r for i, r in enumerate(results)},
                       frozenset((i, 0) for i in range(len(results))) if errors else frozenset())


def _replay(run: RecordedRun, **kwargs: object) -> RunResult:
    return Replayer(tool_names([[run]]), **kwargs).replay([run])[0]  # type: ignore[arg-type]


def test_polling_that_advances_finishes_and_a_runaway_repeat_stops_at_15() -> None:
    advancing = _scripted_run([f"job 7: {10 * i} % done" for i in range(12)])
    assert replay_run(advancing).stop_reason == "completed"
    growing = _scripted_run([f"[File: A.java ({33 * (i + 1)} lines total)]" for i in range(20)])
    stopped = replay_run(growing)
    assert (stop_index(stopped), stopped.layer) == (14, "consecutive")
    assert _replay(advancing, loop_detection=LoopDetection()).stop_reason == "completed"
    same_reply = LoopDetection(layers=("no_progress", "same_reply"))
    mine = _replay(growing, loop_detection=same_reply)
    assert (stop_index(mine), mine.layer) == (14, "same_reply")
    default = _replay(growing, loop_detection=LoopDetection())  # the repeat layer, relaxed
    assert (stop_index(default), default.layer) == (14, "repeat")


def test_consecutive_errors_stop_only_when_asked_for() -> None:
    failures = _scripted_run([f"Error: flight HAT{i:03d} is full" for i in range(8)], errors=True)
    assert replay_run(failures).stop_reason == "completed"  # each error differs: no stagnation
    stopped = replay_run(failures, ProtoConfig(errors_stop_after=3))
    assert (stop_index(stopped), stopped.layer) == (3, "errors")
    assert _replay(failures, loop_detection=LoopDetection()).stop_reason == "completed"
    mine = _replay(failures, loop_detection=LoopDetection(), limits=Limits(max_tool_errors=3))
    assert (mine.served - 1, mine.stop_reason, mine.executed) == (3, "tool_errors", 3)
