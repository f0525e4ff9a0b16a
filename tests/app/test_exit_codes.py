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


def weather(city: str, usage: tuple[int, int] = (10, 5)) -> Any:
    return tool_calls([("get_weather", {"city": city})], usage=usage)


def judged(answered: bool) -> Any:
    """The judge's verdict, the way its client asked (a forced tool call or JSON text)."""
    answer = {"answered": answered, "reasoning": "not yet" if not answered else "done"}

    def reply(body: dict[str, Any]) -> Any:
        for spec in body.get("tools") or []:
            return tool_calls([(spec["function"]["name"], answer)], usage=(20, 6))
        return text(json.dumps(answer), usage=(20, 6))

    return reply


STOP_FILE = "stop-now"
"""A file the ``terminated`` case creates in its temporary folder before the run."""

CASES: dict[StopReason, tuple[list[str], list[Any]]] = {
    StopReason.COMPLETED: ([], [text("Hello.")]),
    StopReason.MAX_ITERATIONS: (["--judge", "--max-iterations", "2"],
                                [text("Draft 1."), judged(False), text("Draft 2.")]),
    StopReason.MAX_MODEL_CALLS: (["--max-model-calls", "2"],
                                 [weather("Paris"), weather("Rome"), text("Paris and Rome.")]),
    StopReason.MAX_TOOL_CALLS: (["--max-tool-calls", "1"], [weather("Paris"), text("Paris only.")]),
    StopReason.TOKEN_BUDGET: (["--token-budget", "400"],
                              [weather("Paris", (150, 50)), text("Paris.", usage=(100, 10))]),
    StopReason.BUDGET_PRESSURE: (["--judge", "--token-budget", "100000", "--budget-pressure", "0.1"],
                                 [weather("Paris", (9000, 1000)), text("Paris.", usage=(100, 10)),
                                  judged(False)]),
    StopReason.LOOP_DETECTED: ([], [SAME] * 4 + [text("Rome is sunny, I think.")]),
    StopReason.TOOL_ERRORS: (["--max-tool-errors", "1"],
                             [tool_calls([("no_such_tool", {})]), weather("Paris"), text("Gave up.")]),
    StopReason.STALLED: (["--judge", "--stall", "2"],
                         [text("Same draft."), judged(False), text("Same draft."), judged(False)]),
    StopReason.TIMEOUT: (["--timeout", "0.001"], [weather("Paris"), text("Out of time.")]),
    StopReason.TERMINATED: (["--judge", "--stop-file", STOP_FILE], [text("Draft."), judged(False)]),
    StopReason.STEP_LIMIT: (["--recursion-limit", "8"],
                            [weather("Paris"), weather("Rome"), weather("Oslo"), text("Three cities.")]),
}


@pytest.mark.parametrize("reason", list(StopReason), ids=[r.value for r in StopReason])
def test_every_documented_exit_code_is_reachable_with_the_run_flags(
        live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, reason: StopReason) -> None:
    flags, script = CASES[reason]
    live_env.script += script
    monkeypatch.chdir(tmp_path)
    if reason is StopReason.TERMINATED:
        (tmp_path / STOP_FILE).touch()
    code = main(["run", "Weather in Paris, Rome and Oslo?", "--demo-tools", "--json", *flags,
                 "--db", str(tmp_path / "t.sqlite")])
    result = json.loads(capsys.readouterr().out)
    assert (result["stop_reason"], code, result["exit_code"]) == (reason.value, EXIT_CODES[reason],
                                                                 EXIT_CODES[reason])
    assert result["answer"], result  # the run ends on an answer


def test_context_overrides_a_limit_per_run(live_env: OpenAIServer, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    live_env.script += [weather("Paris"), text("Paris only.")]
    code = main(["run", "Weather?", "--demo-tools", "--json", "--db", str(tmp_path / "t.sqlite"),
                 "--context", '{"limits": {"max_tool_calls": 1}}'])
    assert code == 12 and json.loads(capsys.readouterr().out)["stop_reason"] == "max_tool_calls"
    code = main(["run", "Weather?", "--json", "--db", str(tmp_path / "t.sqlite"),
                 "--context", '{"limits": {"max_tool_cals": 1}}'])
    result = json.loads(capsys.readouterr().out)
    assert code == 2 and result["exit_code"] == 2 and result["stop_reason"] is None
    assert result["error"].startswith("--context: invalid run context: limits.max_tool_cals: unknown field")
    assert len(live_env.requests) == 2  # the wrong override ran nothing


def test_the_guides_jq_example_prints_why_on_a_usage_error(tmp_path: Path) -> None:
    """The deployment guide's shell line, run as written (one child process): no model is
    configured, so the run is a usage error and the line prints the error, not an empty reason."""
    guide = (REPO / "docs" / "deployment.md").read_text()
    (line,) = [x for x in guide.splitlines() if x.startswith("langgraph-loop run ") and "jq" in x]
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PYTHONPATH")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    done = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.stdout.startswith("stopped: no model configured. Set OPENAI_API_KEY"), done
    assert json.loads((tmp_path / "result.json").read_text())["exit_code"] == 2
