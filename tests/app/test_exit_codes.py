"""Headless runs can tell a loop stop from success (issue 31.8): ``langgraph-loop run`` exits 0
only on ``completed``, one documented code per stop reason, and ``--json`` prints the result as
one JSON object on stdout."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langgraph_loop import StopReason
from langgraph_loop.app.cli import main
from langgraph_loop.app.commands import EXIT_CODES
from tests.support.openai_server import OpenAIServer, text, tool_calls

REPO = Path(__file__).resolve().parents[2]
SAME = tool_calls([("get_weather", {"city": "Rome"})])


def test_one_code_per_stop_reason_and_zero_only_for_completed() -> None:
    assert set(EXIT_CODES) == set(StopReason)
    assert len(set(EXIT_CODES.values())) == len(StopReason)
    assert [r for r, c in EXIT_CODES.items() if c == 0] == [StopReason.COMPLETED]
    assert 1 not in EXIT_CODES.values() and 2 not in EXIT_CODES.values()  # error, usage error


def test_every_code_is_documented_in_the_deployment_guide_and_the_help(
        capsys: pytest.CaptureFixture[str]) -> None:
    guide = (REPO / "docs" / "deployment.md").read_text()
    documented = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", guide, flags=re.M))
    assert {StopReason(r): int(c) for r, c in documented.items()} == EXIT_CODES
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert all(f"{code} {reason.value}" in usage for reason, code in EXIT_CODES.items())


def test_a_loop_stop_exits_15_and_json_says_why(
        live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live_env.script += [SAME] * 4 + [text("Rome is sunny, I think.")]
    code = main(["run", "Weather in Rome?", "--demo-tools", "--json", "--thread", "j1",
                 "--db", str(tmp_path / "t.sqlite")])
    out = capsys.readouterr()
    assert code == EXIT_CODES[StopReason.LOOP_DETECTED] == 15
    lines = out.out.splitlines()
    assert len(lines) == 1, out.out  # stdout is the JSON alone; progress went to stderr
    result = json.loads(lines[0])
    assert result["stop_reason"] == "loop_detected" and result["exit_code"] == 15
    assert result["thread"] == "j1" and result["answer"] == "Rome is sunny, I think."
    assert "iteration 1" in out.err


def test_a_completed_run_exits_0_and_the_process_exit_code_is_the_stop(
        openai_server: OpenAIServer, tmp_path: Path) -> None:
    """Through the console script's module in a child process, as CI would run it."""
    openai_server.script += [text("Hello."), SAME, SAME, SAME, SAME, text("Sunny.")]
    env = {**os.environ, "OPENAI_BASE_URL": openai_server.base_url, "OPENAI_API_KEY": "test",
           "LANGGRAPH_LOOP_MODEL": "m"}
    db = str(tmp_path / "t.sqlite")
    done = subprocess.run([sys.executable, "-m", "langgraph_loop", "run", "Hi", "--json",
                           "--db", db], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "completed"
    looped = subprocess.run([sys.executable, "-m", "langgraph_loop", "run", "Weather in Rome?",
                             "--demo-tools", "--db", db], env=env, capture_output=True, check=False,
                            text=True, timeout=120)
    assert looped.returncode == 15, looped.stdout + looped.stderr
    assert "stop_reason=loop_detected" in looped.stdout


def _text_file(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "notes.txt").write_text("my notes, not a database\n")
    return tmp_path / "notes.txt", "is not a SQLite database"


def _folder(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "threads").mkdir()
    return tmp_path / "threads", "is a folder, not a SQLite file"


def _under_a_file(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "notes.txt").write_text("my notes\n")
    return tmp_path / "notes.txt" / "t.sqlite", f"lies under {tmp_path / 'notes.txt'}, which is a file"


@pytest.mark.parametrize("command", [["run", "Weather in Rome?"], ["show", "t1"], ["demo", "--offline"]])
@pytest.mark.parametrize("where", [_text_file, _folder, _under_a_file])
def test_a_db_that_cannot_be_a_sqlite_file_is_one_line_naming_it_and_exit_2(
        live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: list[str], where: Any) -> None:
    db, says = where(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code = main([*command, "--db", str(db)])
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --db {db} {says}") and "Traceback" not in lines[0]
    assert live_env.requests == []  # nothing ran
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written
