"""Durable threads: pause or crash in one process, resume in another (SQLite, PostgreSQL).

Each phase runs in a fresh child process (``tests/support/durable_worker.py``): nothing but the
checkpointed state carries the thread from one process to the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import fresh_database

ROOT = Path(__file__).resolve().parents[2]
TODOS = [{"content": "check status", "status": "completed"},
         {"content": "deploy to staging", "status": "in_progress"}]


def phase(name: str, backend: str, target: str, workdir: Path, *, crash: bool = False,
          expect_rc: int = 0) -> list[dict[str, Any]]:
    """Run one phase in a new process; its JSON reports."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DURABLE_CRASH": "1" if crash else "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.durable_worker", name, backend, target, "thread-1",
         str(workdir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == expect_rc, f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def effects(workdir: Path) -> list[str]:
    return (workdir / "effects.log").read_text().splitlines()


def assert_paused(state: dict[str, Any]) -> None:
    """The thread as the first process left it at the approval pause."""
    assert state["next"] == ["approval"]
    assert state["stop_reason"] is None
    (request,) = state["interrupts"]
    assert request["action_requests"][0]["name"] == "deploy"
    assert request["action_requests"][0]["args"] == {"env": "staging"}
    assert state["iteration"] == 2 and state["iterations"] == 1
    assert state["auto_rounds"] == 1  # the resolver decided the first deploy
    assert state["tool_calls"] == 2  # search, then the auto-approved deploy
    assert state["loop_notices"] == ["loop"]  # the repeat warning waits for the next call
    assert state["todos"] == TODOS
    assert state["progress"] == ["Pass 1: the service is green."]
    assert state["usage"]["total_tokens"] > 0


def assert_completed(report: dict[str, Any], before_usage: int) -> None:
    result, after = report["result"], report["after"]
    assert result["stop_reason"] == "completed" and not result["paused"]
    assert result["last"] == "Deployed to staging."
    assert result["records"] == [["search"], ["deploy", "deploy"]]
    assert result["messages"][-3:] == ["tool:deploy", "human:loop_notice", "ai"]
    assert 'deploy({"env":"staging"}) with the same arguments' in result["warning_before_answer"][0]
    assert after["loop_notices"] == [] and after["tool_calls"] == 3
    assert after["progress"] == ["Pass 1: the service is green.", "Deployed to staging."]
    assert after["todos"] == TODOS and after["auto_rounds"] == 1
    assert after["usage"]["total_tokens"] > before_usage


def run_story(backend: str, target: str, workdir: Path, *, crash: bool) -> None:
    (start,) = phase("start", backend, target, workdir)
    assert start["result"]["paused"] and start["result"]["stop_reason"] is None
    assert_paused(start["after"])
    assert effects(workdir) == ["search status", "deploy staging"]
    if crash:
        (seen,) = phase("resume", backend, target, workdir, crash=True, expect_rc=17)
        assert_paused(seen["before"])
        assert effects(workdir) == ["search status", "deploy staging"]  # died before the effect
        seen, done = phase("recover", backend, target, workdir)
        stored = seen["before"]
        assert stored["next"] == ["tools"]  # the decision was saved before the crash
        assert stored["review"]["decisions"] == {"call_3": {"type": "approve"}}
        assert stored["loop_notices"] == ["loop"] and stored["todos"] == TODOS
        assert stored["auto_rounds"] == 1 and stored["tool_calls"] == 2
    else:
        seen, done = phase("resume", backend, target, workdir)
        assert_paused(seen["before"])
    assert_completed(done, start["after"]["usage"]["total_tokens"])
    assert effects(workdir) == ["search status", "deploy staging", "deploy staging"]


@pytest.mark.parametrize("crash", [False, True], ids=["pause", "pause+crash"])
def test_sqlite_thread_moves_between_processes(tmp_path: Path, crash: bool) -> None:
    run_story("sqlite", str(tmp_path / "threads.sqlite"), tmp_path, crash=crash)


@pytest.mark.parametrize("crash", [False, True], ids=["pause", "pause+crash"])
def test_postgres_thread_moves_between_processes(tmp_path: Path, pg_server: str,
                                                 crash: bool) -> None:
    run_story("postgres", fresh_database(pg_server), tmp_path, crash=crash)
