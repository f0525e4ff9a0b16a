"""Crash and resume: SIGKILL in the middle of a batch of parallel tool calls, resume elsewhere.

The child (``tests/support/crash_worker.py``) runs a thread on SQLite or PostgreSQL; the
parent kills it with SIGKILL while some calls of a parallel batch have finished (and
their results are saved) and the others are still running. A new process resumes
the thread: the run completes with a provider-valid thread, the queued warning and
the counters intact, and the calls that had finished are not executed again.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from langgraph_loop import Hooks, Iterations, create_loop_agent
from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import EXECUTED, add, remember
from tests.support.crash_worker import N, effects, left_to_run, saved_results
from tests.support.postgres import fresh_database

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _command(phase: str, backend: str, target: str, mode: str, workdir: Path) -> list[str]:
    return [sys.executable, "-m", "tests.support.crash_worker", phase, backend, target, mode, str(workdir)]


def _wait_for(condition: Any, proc: subprocess.Popen[str], what: str) -> None:
    """Poll until ``condition()``; fail with the child's output if it exits first."""
    deadline = time.monotonic() + 120
    while not condition():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"worker exited ({proc.returncode}) before {what}:\n{err[-3000:]}")
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def crash_mid_batch(backend: str, target: str, mode: str, workdir: Path, fast: int) -> None:
    """Start the thread; SIGKILL it once ``fast`` calls of the second batch are saved."""
    (workdir / "fast").write_text(str(fast))
    proc = subprocess.Popen(_command("start", backend, target, mode, workdir), cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        second_batch = [f"start {i}" for i in range(fast, N)]
        _wait_for(lambda: all(line in effects(workdir)[N * 2:] for line in second_batch),
                  proc, "the slow calls of the second batch started")
        _wait_for(lambda: saved_results(backend, target) == fast, proc,
                  f"{fast} results of the batch were saved")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


def resume(backend: str, target: str, mode: str, workdir: Path) -> dict[str, Any]:
    (workdir / "release").write_text("go")
    proc = subprocess.run(_command("resume", backend, target, mode, workdir), cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    return json.loads(line)  # type: ignore[no-any-return]


def run_story(backend: str, target: str, mode: str, workdir: Path, fast: int) -> None:
    crash_mid_batch(backend, target, mode, workdir, fast)
    before = effects(workdir)
    first = [f"{kind} {i}" for i in range(N) for kind in ("start", "done")]
    assert sorted(before[: 2 * N]) == sorted(first)  # the first batch ran completely
    second = before[2 * N:]
    assert sorted(x for x in second if x.startswith("done")) == [f"done {i}" for i in range(fast)]
    result = resume(backend, target, mode, workdir)
    after = effects(workdir)[len(before):]
    # only the calls that had not finished ran again; the finished ones were not repeated
    assert sorted(x for x in after if x.startswith("start")) == [f"start {i}" for i in range(fast, N)]
    assert sorted(x for x in after if x.startswith("done")) == [f"done {i}" for i in range(fast, N)]
    assert result["stop_reason"] == "completed" and result["problems"] == []
    assert result["messages"] == (["human", "ai"] + ["tool:work"] * N + ["ai"] + ["tool:work"] * N
                                  + ["human:loop_notice", "ai"])
    assert result["tool_results"] == [f"result {i}" for i in range(N)] * 2
    (warning,) = result["warnings"]  # the warning queued before the crash, delivered once
    assert "same arguments" in warning or "repeat" in warning.lower()
    assert result["loop_notices"] == []
    assert result["records"] == [2 * N] and result["run_tool_calls"] == 2 * N
    assert result["usage"] == result["usage_of_messages"] > 0


@pytest.mark.parametrize(("mode", "fast"), [("sync", 1), ("async", 2), ("sync", 0)])
def test_sqlite_crash_mid_batch_resumes_without_repeating_finished_calls(
        tmp_path: Path, mode: str, fast: int) -> None:
    run_story("sqlite", str(tmp_path / "threads.sqlite"), mode, tmp_path, fast)


@pytest.mark.parametrize(("mode", "fast"), [("async", 1), ("sync", 3)])
def test_postgres_crash_mid_batch_resumes_without_repeating_finished_calls(
        tmp_path: Path, pg_server: str, mode: str, fast: int) -> None:
    run_story("postgres", fresh_database(pg_server), mode, tmp_path, fast)


@pytest.mark.parametrize(("backend", "mode", "seed"), [
    ("sqlite", "sync", 1), ("sqlite", "async", 2), ("postgres", "sync", 3),
    ("postgres", "async", 4),
])
def test_kill_at_a_random_point_then_resume(tmp_path: Path, request: pytest.FixtureRequest,
                                            backend: str, mode: str, seed: int) -> None:
    """SIGKILL once the effects log reaches a random line; the resumed run runs exactly
    the calls that had no saved result, and ends like an uninterrupted run."""
    target = (str(tmp_path / "threads.sqlite") if backend == "sqlite"
              else fresh_database(request.getfixturevalue("pg_server")))
    (tmp_path / "fast").write_text(str(N))  # nothing blocks
    (tmp_path / "pause").write_text("0.03")
    kill_at = random.Random(seed).randint(1, 4 * N)
    proc = subprocess.Popen(_command("start", backend, target, mode, tmp_path), cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: len(effects(tmp_path)) >= kill_at, proc, f"{kill_at} effects")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = len(effects(tmp_path))
    expected = left_to_run(backend, target)
    result = resume(backend, target, mode, tmp_path)
    ran = [x for x in effects(tmp_path)[before:] if x.startswith("done")]
    assert len(ran) == expected, (kill_at, expected, ran)
    assert result["stop_reason"] == "completed" and result["problems"] == []
    assert result["tool_results"] == [f"result {i}" for i in range(N)] * 2
    assert len(result["warnings"]) == 1 and result["loop_notices"] == []
    assert result["records"] == [2 * N] and result["run_tool_calls"] == 2 * N
    assert result["usage"] == result["usage_of_messages"] > 0


def _interrupting_batch(mode: str, scripted: list[ScriptedChatModel]
                        ) -> tuple[list[str], dict[str, Any]]:
    @tool
    def ask(q: str) -> str:
        """Ask the user."""
        EXECUTED.append("ask")
        return f"user said {interrupt({'q': q})}"

    EXECUTED.clear()
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2}), ("ask", {"q": "ok?"}),
                                       ("remember", {"fact": "x"})], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [add, ask, remember], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    def run(value: Any) -> dict[str, Any]:
        if mode == "sync":
            return agent.invoke(value, config)  # type: ignore[no-any-return]
        return asyncio.run(agent.ainvoke(value, config))  # type: ignore[no-any-return]

    paused = run({"messages": [HumanMessage("go")]})
    assert paused["__interrupt__"][0].value == {"q": "ok?"}
    return EXECUTED, run(Command(resume="yes"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_interrupt_inside_a_batch_does_not_rerun_finished_siblings(
        mode: str, scripted: list[ScriptedChatModel]) -> None:
    """A tool of a parallel batch pauses (``interrupt()``); on resume only it runs again."""
    executed, result = _interrupting_batch(mode, scripted)
    assert sorted(executed) == ["add(1,2)", "ask", "ask", "remember(x)"]
    assert [m.content for m in result["messages"]][2:] == ["3", "user said yes", "remembered x",
                                                           "done"]
    assert result["stop_reason"] == "completed" and result["mode"] == "x"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_failing_on_tool_call_hook_does_not_rerun_the_tool_on_resume(
        mode: str, scripted: list[ScriptedChatModel]) -> None:
    """The hook fails the tools step after the call ran; the resumed step reuses its result."""
    EXECUTED.clear()
    model = ScriptedChatModel(script=[[("add", {"a": 2, "b": 3})], "five"])
    scripted.append(model)
    broken = [True]

    def hook(record: dict[str, Any]) -> None:
        if broken.pop() if broken else False:
            raise KeyError("hook down")

    agent = create_loop_agent(model, [add], hooks=Hooks(on_tool_call=hook),
                              checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": f"hook-{mode}"}}

    def run(value: Any) -> dict[str, Any]:
        if mode == "sync":
            return agent.invoke(value, config)  # type: ignore[no-any-return]
        return asyncio.run(agent.ainvoke(value, config))  # type: ignore[no-any-return]

    with pytest.raises(CallbackError, match=r"hooks\.on_tool_call raised KeyError"):
        run({"messages": [HumanMessage("2+3?")]})
    result = run(None)
    assert EXECUTED == ["add(2,3)"]  # ran once, although its step ran twice
    assert [m.content for m in result["messages"]] == ["2+3?", "", "5", "five"]
    assert result["iterations"][0]["tool_calls"][0]["status"] == "success"


def test_stream_shows_each_finished_call_of_a_saved_batch(scripted: list[ScriptedChatModel]) -> None:
    """With a checkpointer, a batch's calls are LangGraph tasks: each appears in ``updates``
    as it finishes, then the ``tools`` node's update carries all ToolMessages in order."""
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2}), ("add", {"a": 2, "b": 2})],
                                      "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [add], checkpointer=InMemorySaver())
    chunks = list(agent.stream({"messages": [HumanMessage("go")]},
                               {"configurable": {"thread_id": "s"}}, stream_mode="updates"))
    names = [next(iter(c)) for c in chunks]
    assert names == ["prepare", "model", "tool_call", "tool_call", "tools", "model", "router"]
    finished = sorted(c["tool_call"]["message"].content for c in chunks if "tool_call" in c)
    assert finished == ["3", "4"]
    tools = next(c["tools"] for c in chunks if "tools" in c)
    assert [m.content for m in tools["messages"]] == ["3", "4"]


def test_saved_writes_hold_no_unregistered_types(scripted: list[ScriptedChatModel],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Every write a stop saves loads back without LangGraph's unregistered-type warning
    (its strict msgpack mode would refuse it, and the thread could not be resumed)."""
    model = ScriptedChatModel(default=lambda _m: [("add", {"a": 1, "b": 1})])
    scripted.append(model)
    agent = create_loop_agent(model, [add], iterations=Iterations(max_model_calls=2),
                              checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "plain"}}
    assert agent.invoke({"messages": [HumanMessage("go")]}, config)["stop_reason"] == (
        "max_model_calls")
    history = list(agent.get_state_history(config))
    writes = [w for h in history for w in h.tasks if w.result]
    assert writes and "unregistered type" not in caplog.text
