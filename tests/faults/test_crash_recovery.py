"""Issue 21, crash then a new message: crash recovery keeps finished calls' saved results
whichever way the user continues.

A process is killed (SIGKILL) in the middle of a batch of 3 parallel tool calls, after 2 of
them finished and their results were saved in SQLite (``crash_batch_worker``). The thread
is then continued in this process, either by resuming (``invoke(None)``) or by sending a
new message. Either way the 2 finished calls keep their results and do not run again.
The call that had not finished runs on a resume; on a new message it is answered as not
executed (the user moved on; running it now would act on a request the user did not
repeat), the same repair the loop makes for any call a new turn leaves unanswered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.faults.crash_batch_worker import FAST, THREAD, build, effects, saved_results
from tests.faults.support import assert_valid, check_requests
from tests.support.savers import sync_saver

ROOT = Path(__file__).resolve().parents[2]


def _kill_mid_batch(db: Path, workdir: Path) -> list[str]:
    """Run the worker; SIGKILL it once ``FAST`` results are saved and the slow call runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.faults.crash_batch_worker", str(db),
                             str(workdir)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while not (f"start {FAST}" in effects(workdir) and saved_results(db) == FAST):
            if proc.poll() is not None:
                pytest.fail(f"worker exited ({proc.returncode}) early:\n"
                            f"{proc.communicate()[1][-3000:]}")
            assert time.monotonic() < deadline, "gave up waiting for the batch"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return effects(workdir)


@pytest.mark.parametrize("how", ["resume", "new message"])
def test_finished_calls_keep_their_saved_results_whichever_way_the_user_continues(
        tmp_path: Path, how: str) -> None:
    db = tmp_path / "threads.sqlite"
    before = _kill_mid_batch(db, tmp_path)
    assert sorted(before) == ["done 0", "done 1", "start 0", "start 1", "start 2"]
    (tmp_path / "release").write_text("go")  # nothing blocks from here on
    with sync_saver("sqlite", str(db)) as saver:
        agent, model = build(saver, tmp_path)
        value = None if how == "resume" else {"messages": [HumanMessage("Thanks, go on.")]}
        result = agent.invoke(value, THREAD)
    ran_again = effects(tmp_path)[len(before):]
    ai = result["messages"][1]
    assert isinstance(ai, AIMessage)
    ids = [str(c["id"]) for c in ai.tool_calls]
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert [answers[i].content for i in ids[:FAST]] == ["result 0", "result 1"]
    assert [answers[i].status for i in ids[:FAST]] == ["success", "success"]
    unfinished = answers[ids[FAST]]
    if how == "resume":
        assert ran_again == ["start 2", "done 2"]
        assert unfinished.content == "result 2"
    else:
        assert ran_again == []
        assert unfinished.status == "error" and "not executed" in str(unfinished.content)
    assert result["stop_reason"] == "completed"
    assert result["messages"][-1].content == "All done."
    check_requests(model)
    assert_valid(result["messages"])
