"""The ``langgraph-loop`` command: demo, run (live progress, SQLite threads), show, graph."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph_loop.app.cli import main
from tests.support.openai_server import OpenAIServer, Reply, text, tool_calls

REPO = Path(__file__).resolve().parents[2]
NODES = ("prepare", "compaction", "model", "loop_detector", "approval", "tools", "judge", "router")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_demo_runs_every_scenario_offline(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out = run_cli(capsys, "demo")
    assert code == 0
    assert "ReAct iteration: parallel tools, one failing" in out
    assert "tool ✗ lookup_order" in out
    assert "stop_reason=completed  iterations=1" in out
    assert "stop_reason=max_model_calls" in out
    assert "[loop_notice]" in out
    assert out.rstrip().endswith("scenarios ran offline with the scripted demo model.")


def test_demo_threads_are_stored_and_shown(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "demo.sqlite"
    assert run_cli(capsys, "demo", "react", "--db", str(db))[0] == 0
    code, out = run_cli(capsys, "show", "demo-react", "--db", str(db))
    assert code == 0
    assert "thread demo-react" in out
    assert "tool ✓ get_weather" in out
    assert "iteration 1: model_calls=2 tools=[get_weather:success, get_weather:success," in out


def test_demo_uses_a_configured_openai_compatible_model(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server = live_env
    openai_server.script += [
        tool_calls([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})],
                   usage=(20, 10)),
        text("Paris is 18°C and cloudy; Rome is 24°C and sunny.", usage=(40, 12)),
    ]
    db = tmp_path / "threads.sqlite"
    code, out = run_cli(capsys, "demo", "--db", str(db))
    assert code == 0
    assert "Paris is 18°C and cloudy; Rome is 24°C and sunny." in out
    assert "stop_reason=completed  iterations=1  tokens=82 (in 60, out 22)" in out
    assert [m["role"] for m in openai_server.requests[1]["messages"]] == [
        "user", "assistant", "tool", "tool"]
    assert openai_server.requests[0]["messages"][0]["content"].startswith("What is the weather")
    assert db.exists() and "--offline" in out

    code, out = run_cli(capsys, "demo", "react", "--offline")
    assert code == 0 and len(openai_server.requests) == 2  # offline: no request made
    assert "scenarios ran offline" in out


def test_unknown_demo_scenario_lists_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "demo", "react", "nope")
    assert code == 2
    assert "no scenario named 'nope'. The scenarios:" in out
    assert "  react " in out and "  compaction " in out and "ran offline" not in out


def test_demo_list_lists_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from langgraph_loop.app.demos import all_scenarios

    code, out = run_cli(capsys, "demo", "--list")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert listed == [s.key for s in all_scenarios()]
    assert "Polling that makes progress" in out and "ran offline" not in out


def test_named_scenarios_run_offline_even_with_a_model_configured(
    live_env: OpenAIServer, capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run_cli(capsys, "demo", "react", "runaway")
    assert code == 0
    assert "2 scenarios ran offline with the scripted demo model." in out
    assert live_env.requests == []  # the configured endpoint was not used


def test_run_without_a_model_says_how_to_configure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out = run_cli(capsys, "run", "hello", "--db", str(tmp_path / "t.sqlite"))
    assert code == 2
    flat = " ".join(out.split())
    assert "error: no model configured. Set OPENAI_API_KEY" in flat
    assert "OPENAI_BASE_URL" in flat
    assert "LANGGRAPH_LOOP_MODEL" in flat
    assert "langgraph-loop demo" in flat
    assert not (tmp_path / "t.sqlite").exists()


def test_run_against_an_openai_compatible_server_then_show(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server = live_env
    same = tool_calls([("get_weather", {"city": "Rome"})], usage=(10, 5))
    openai_server.script += [same, same, same, text("Rome: 24°C, sunny.", usage=(10, 5)),
                             text("You are welcome.", usage=(10, 5))]
    db = str(tmp_path / "threads.sqlite")

    code, out = run_cli(capsys, "run", "Weather in Rome?", "--demo-tools", "--db", db,
                        "--thread", "t1")
    assert code == 0
    lines = out.splitlines()
    assert "iteration 1 · model calls 4 · tool calls 3 · tokens 60 · warnings 1" in lines
    assert "Rome: 24°C, sunny." in lines
    assert "thread=t1 stop_reason=completed tokens=60" in lines
    assert [t["function"]["name"] for t in openai_server.requests[0]["tools"]] == [
        "get_weather", "send_email"]

    code, out = run_cli(capsys, "run", "Thanks!", "--db", db, "--thread", "t1")
    assert code == 0
    assert "iteration 1 · model calls 1 · tool calls 0 · tokens 15 · warnings 0" in out.splitlines()
    last = openai_server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", *["assistant", "tool"] * 3, "user",
                                         "assistant", "user"]
    assert last[-1]["content"] == "Thanks!"

    code, out = run_cli(capsys, "show", "t1", "--db", db)
    assert code == 0
    assert "tool ✓ get_weather" in out
    assert "[loop_notice]" in out
    assert "You are welcome." in out
    assert "stop_reason=completed  iterations=1  tokens=15 (in 10, out 5)" in out


def error_lines(out: str) -> list[str]:
    """The CLI's error output: exactly an ``error:`` line and a ``hint:`` line."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 2 and "Traceback" not in out, out
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), out
    return lines


def test_show_unknown_thread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "show", "nope", "--db", str(tmp_path / "missing.sqlite"))
    error, hint = error_lines(out)
    assert code == 2 and "no thread store at" in error and "creates it" in hint
    run_cli(capsys, "demo", "react", "--db", str(tmp_path / "d.sqlite"))
    code, out = run_cli(capsys, "show", "nope", "--db", str(tmp_path / "d.sqlite"))
    error, hint = error_lines(out)
    assert code == 2 and "no thread 'nope'" in error
    assert hint == "hint: threads there: demo-react"


def test_unreachable_endpoint_is_one_line_and_a_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.support.postgres import free_port

    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # the client's and the graph's retry waits
    monkeypatch.setenv("OPENAI_BASE_URL", closed)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    code, out = run_cli(capsys, "run", "hello", "--db", str(tmp_path / "t.sqlite"),
                        "--thread", "t9")
    error, hint = error_lines(out)
    assert code == 2
    assert error.startswith(f"error: cannot reach the model endpoint {closed}")
    assert hint.endswith(f"`langgraph-loop run hello --db {tmp_path / 't.sqlite'} --thread t9` "
                         "retries it on this thread")
    assert len(waits) == 2 + 3 * 2  # retried (twice by the client in each of three graph attempts)


def test_the_retry_hint_followed_as_written_asks_the_question_once(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shlex

    from tests.support.postgres import free_port

    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # down
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("LANGGRAPH_LOOP_MODEL", "m")
    code, out = run_cli(capsys, "run", "What is 2+2?", "--db", str(tmp_path / "t.sqlite"))
    hint = error_lines(out)[1]
    assert code == 2
    command = shlex.split(hint.split("`")[1])  # the hint's command, as a shell would read it
    assert command[:3] == ["langgraph-loop", "run", "What is 2+2?"]
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)  # the endpoint is back
    openai_server.script += [text("4.", usage=(10, 2))]
    code, out = run_cli(capsys, *command[1:])
    assert code == 0 and "4." in out.splitlines()
    assert openai_server.requests[0]["messages"] == [{"role": "user", "content": "What is 2+2?"}]
    thread = command[command.index("--thread") + 1]
    code, out = run_cli(capsys, "show", thread, "--db", str(tmp_path / "t.sqlite"))
    assert [line.split()[1] for line in out.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])
            ] == ["user", "assistant"]  # the question stored once, then the answer


def test_json_says_a_usage_error_on_stdout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = main(["run", "hello", "--json", "--thread", "t1", "--db", str(tmp_path / "t.sqlite")])
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert code == 2 and result["exit_code"] == 2 and result["stop_reason"] is None
    assert result["thread"] == "t1" and result["error"].startswith("no model configured.")
    assert "error: no model configured" in out.err  # the person still reads it
    with pytest.raises(SystemExit) as exited:  # a bad flag, found by the argument parser
        main(["run", "hello", "--json", "--max-tool-calls", "none"])
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert exited.value.code == 2 and result["exit_code"] == 2
    assert result["error"] == ("langgraph-loop run: argument --max-tool-calls: expected a number of "
                               "tool calls, 1 or more, got 'none'")
    assert "error: argument --max-tool-calls" in out.err


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--timeout", "0", "a number of seconds, more than 0"),
    ("--timeout", "soon", "a number of seconds, more than 0"),
    ("--budget-pressure", "1.5", "a fraction of the token budget between 0 and 1 (e.g. 0.8)"),
])
def test_a_bad_number_is_a_usage_error_naming_the_flag(
    flag: str, value: str, said: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "hello", "--json", flag, value])
    result = json.loads(capsys.readouterr().out)
    assert exited.value.code == 2 and result["exit_code"] == 2
    assert result["error"] == f"langgraph-loop run: argument {flag}: expected {said}, got {value!r}"


def test_png_without_a_renderer_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_renderers(name: str, *args: object, **kwargs: object) -> object:
        if name.split(".", maxsplit=1)[0] in ("mermaidx", "pygraphviz"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_renderers)
    code, out = run_cli(capsys, "graph", "--png", str(tmp_path / "g.png"))
    error, hint = error_lines(out)
    assert code == 2 and error == "error: no PNG renderer is installed"
    assert "pip install 'langgraph-loop[png]'" in hint
    assert not (tmp_path / "g.png").exists()


def test_graph_prints_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "graph")
    assert code == 0
    assert "graph TD;" in out
    lines = {line.strip() for line in out.splitlines()}
    assert {f"{node}({node})" for node in NODES} <= lines
    assert {"model -.-> loop_detector;", "model -.-> tools;", "approval --> tools;",
            "judge --> router;",
            "router -.-> __end__;"} <= lines
    assert "__start__ --> prepare;" in out


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def test_graph_png_renders_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "graph.png"
    code, out = run_cli(capsys, "graph", "--png", str(target))
    assert code == 0
    assert out.startswith("wrote ")
    width, height = png_size(target.read_bytes())
    assert width > 200
    assert height > 300


def test_module_entry_point() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "langgraph_loop", "demo", "react"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "1 scenarios ran offline" in proc.stdout


EMAIL = tool_calls([("send_email", {"to": "team@example.com", "subject": "Hi"})], usage=(10, 5))


@pytest.mark.parametrize(("typed", "tool_result"), [
    ("a\n", "email to team@example.com with subject 'Hi' queued"),
    ('e\n{"to": "boss@example.com", "subject": "Hi"}\n',
     "email to boss@example.com with subject 'Hi' queued"),
    ("r\nnot today\n", "not today"),
])
def test_run_asks_before_the_gated_send_email(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, typed: str, tool_result: str,
) -> None:
    import io

    live_env.script += [EMAIL, text("Handled.", usage=(10, 5))]
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    code, out = run_cli(capsys, "run", "Email the team", "--demo-tools", "--db",
                        str(tmp_path / "t.sqlite"), "--thread", "mail")
    assert code == 0
    assert 'approval needed: send_email({"to": "team@example.com", "subject": "Hi"})' in out
    assert "approve / edit / reject? [a/e/r]" in out
    assert len(live_env.requests) == 2  # paused before the tool, resumed after the answer
    answered = live_env.requests[1]["messages"][-1]
    assert answered["role"] == "tool" and tool_result in answered["content"]
    assert "thread=mail stop_reason=completed" in out


def test_run_yes_approves_without_asking(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    live_env.script += [EMAIL, text("Sent.", usage=(10, 5))]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # nothing to read: must not ask
    code, out = run_cli(capsys, "run", "Email the team", "--demo-tools", "--yes", "--db",
                        str(tmp_path / "t.sqlite"))
    assert code == 0
    assert "approved (--yes): send_email" in out and "[a/e/r]" not in out
    assert "queued" in live_env.requests[1]["messages"][-1]["content"]


def test_run_help_says_what_max_iterations_caps(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert "--max-iterations N iterations per run with --judge (default 3);" in flat
    assert "without --judge a run ends at the model's first answer" in flat and "--yes" in flat


def verdict(answered: bool, reasoning: str) -> Any:
    """The judge's answer, the way its client asked: JSON-schema text or a forced tool call."""
    answer = {"answered": answered, "reasoning": reasoning}

    def reply(body: dict[str, Any]) -> Reply:
        for spec in body.get("tools") or []:
            return tool_calls([(spec["function"]["name"], answer)], usage=(20, 6))
        return text(json.dumps(answer), usage=(20, 6))

    return reply


@pytest.mark.parametrize(("flags", "verdicts", "stop_reason"), [
    (["--max-iterations", "2"], [False], "max_iterations"),  # the capped pass is not judged
    ([], [False, True], "completed"),  # the default cap (3) is not reached
])
def test_run_judge_runs_passes_up_to_max_iterations(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    flags: list[str], verdicts: list[bool], stop_reason: str,
) -> None:
    live_env.script += [text("Draft 1.", usage=(10, 5)), verdict(False, "too short"),
                        text("Draft 2.", usage=(10, 5))]
    live_env.script += [verdict(True, "done")] if verdicts[1:] == [True] else []
    db = str(tmp_path / "t.sqlite")
    code, out = run_cli(capsys, "run", "Write a poem", "--judge", *flags, "--db", db,
                        "--thread", "p")
    assert code == (0 if stop_reason == "completed" else 10)  # 10: max_iterations
    lines = out.splitlines()
    assert "iteration 2 · model calls 2 · tool calls 0 · tokens 30 · warnings 0" in lines
    assert "Draft 2." in lines
    assert (f"thread=p stop_reason={stop_reason} tokens=30 judge_tokens={26 * len(verdicts)}"
            in lines)
    assert len(live_env.requests) == 2 + len(verdicts)  # two agent calls, the judge's calls
    continuation = live_env.requests[2]["messages"][-1]
    assert continuation["role"] == "user" and "too short" in continuation["content"]

    code, out = run_cli(capsys, "show", "p", "--db", db)
    assert f"stop_reason={stop_reason}  iterations=2  tokens=30" in out
    assert "  iteration 1: model_calls=1 tools=[] answered=False" in out.splitlines()


def test_run_max_iterations_without_judge_is_an_error(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = run_cli(capsys, "run", "Write a poem", "--max-iterations", "5", "--db",
                        str(tmp_path / "t.sqlite"))
    error, hint = error_lines(out)
    assert code == 2
    assert error.startswith("error: --max-iterations needs --judge: without a judge a run ends")
    assert hint == 'hint: `langgraph-loop run "..." --judge --max-iterations 5`'
    assert live_env.requests == [] and not (tmp_path / "t.sqlite").exists()


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_run_max_iterations_must_be_one_or_more(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "hi", "--judge", "--max-iterations", value, "--db", str(tmp_path / "t")])
    assert exited.value.code == 2
    assert (f"error: argument --max-iterations: expected a number of iterations, 1 or more, "
            f"got '{value}'") in capsys.readouterr().err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from langgraph_loop import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"langgraph-loop {__version__}\n"


@pytest.mark.parametrize("command", [
    [str(Path(sys.executable).with_name("langgraph-loop"))],
    [sys.executable, "-m", "langgraph_loop"],
], ids=["console-script", "python-m"])
def test_version_from_the_shell(command: list[str]) -> None:
    from langgraph_loop import __version__

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([*command, "--version"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=False, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"langgraph-loop {__version__}\n", "")


def test_run_counts_model_calls_across_an_approval_pause(
    live_env: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    live_env.script += [EMAIL, text("Sent.", usage=(10, 5))]
    monkeypatch.setattr("sys.stdin", io.StringIO("a\n"))
    db = str(tmp_path / "t.sqlite")
    code, out = run_cli(capsys, "run", "Email the team", "--demo-tools", "--db", db,
                        "--thread", "mail")
    assert code == 0
    progress = [line.split("[a/e/r] ")[-1] for line in out.splitlines() if "· model calls" in line]
    assert progress == [  # paused after the first call; the resumed part goes on counting
        "iteration 1 · model calls 1 · tool calls 0 · tokens 15 · warnings 0",
        "iteration 1 · model calls 2 · tool calls 1 · tokens 30 · warnings 0",
    ]
    assert len(live_env.requests) == 2
    code, out = run_cli(capsys, "show", "mail", "--db", db)
    assert "iteration 1: model_calls=2 tools=[send_email:success]" in out  # the stored record agrees
