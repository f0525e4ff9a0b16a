"""Scale-out for real: two Aegra server processes on one PostgreSQL and one Redis.

Aegra (``aegra-api``/``aegra-cli``) is a self-hosted implementation of the LangGraph Agent
Server API. The module starts the suite's throwaway PostgreSQL (a fresh database), a
throwaway Redis, the loopback model (``python -m tests.support.counting_model``) and two
``aegra serve`` processes from a cached Python 3.12 virtualenv with this checkout installed
(``tests/support/aegra.py``); everything is stopped in ``finally`` blocks.

The servers serve ``langgraph.json``'s graphs plus ``counted`` (``tests/support/
counted_graph.py``), whose tools log every execution so the tests can count them. Leases
are short (``LEASE_DURATION_SECONDS=8``, ``HEARTBEAT_INTERVAL_SECONDS=2``,
``REAPER_INTERVAL_SECONDS=1``) so a crashed process's runs move within seconds.
The SIGKILL test runs last: it leaves one server dead.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import messages_from_dict
from langgraph_sdk import get_client, get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from langgraph_loop.core.messages import check_pairing
from tests.support import server_checks as checks
from tests.support.aegra import AegraProcess, server_env, server_venv, serving, write_config
from tests.support.postgres import free_port, fresh_database
from tests.support.redis_server import redis_url

pytestmark = pytest.mark.ecosystem

REPO = Path(__file__).resolve().parents[2]
COUNTED = "counted"
N_THREADS = 50
LEASES = {"LEASE_DURATION_SECONDS": "8", "HEARTBEAT_INTERVAL_SECONDS": "2",
          "REAPER_INTERVAL_SECONDS": "1"}


@dataclass
class Deployment:
    """Two servers and the directory where the counted tools and the model log."""

    a: AegraProcess
    b: AegraProcess
    work: Path

    def log(self, name: str) -> list[dict[str, Any]]:
        """The JSON lines of ``tools.jsonl`` or ``model.jsonl`` so far."""
        path = self.work / name
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]


def _start_model(work: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.counting_model",
                                 "--port", str(port), "--dir", str(work)],
                                cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while "counting model on" not in log.read_text() and proc.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if proc.poll() is not None or "counting model on" not in log.read_text():
        proc.kill()
        raise RuntimeError(f"model server did not start:\n{log.read_text()}")
    return proc, f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def deployment(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """PostgreSQL + Redis + the loopback model + two ``aegra serve`` processes."""
    tmp = tmp_path_factory.mktemp("aegra")
    work = tmp / "work"
    work.mkdir()
    venv = server_venv(REPO)
    database = fresh_database(pg_server, prefix="aegra")
    with redis_url() as redis, contextlib.ExitStack() as stack:
        model, model_url = _start_model(work, tmp / "model.log")
        stack.callback(model.wait, 10)
        stack.callback(model.terminate)
        env = server_env(database, redis, {
            **LEASES, "OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "test",
            "LANGGRAPH_LOOP_MODEL": "m", "COUNTED_TOOLS_DIR": str(work)})
        graph = f"{REPO / 'tests' / 'support' / 'counted_graph.py'}:graph"
        config = write_config(REPO, tmp / "aegra.json", {COUNTED: graph})
        envs = [{**env, "TEST_SERVER_LABEL": label} for label in ("a", "b")]
        servers = stack.enter_context(serving(venv, config, envs, tmp))
        stack.callback((work / "gate").touch)  # first on exit: release held runs
        yield Deployment(servers[0], servers[1], work)


# Every check of tests/ecosystem/test_langgraph_server.py; work starts on one process, the other reads
# or resumes it. Aegra difference allowed: a tool message in messages-tuple is a chunk.
AEGRA = checks.Engine(tool_chunk_type="ToolMessageChunk")


async def test_thread_run_state_and_history(deployment: Deployment) -> None:
    await checks.check_thread_run_state_and_history(
        deployment.a.url, deployment.b.url, served=(checks.GRAPH_ID, checks.CHAT_GRAPH_ID, COUNTED))


def test_streaming_with_the_sync_client(deployment: Deployment) -> None:
    checks.check_streaming_with_the_sync_client(deployment.b.url, AEGRA)


def test_per_run_context_overrides_limits(deployment: Deployment) -> None:
    checks.check_per_run_context_overrides_limits(deployment.a.url)


def test_a_context_the_graph_refuses_is_the_in_process_error(deployment: Deployment) -> None:
    """``langgraph.json``'s ``http.app`` runs on Aegra too: a misspelled top-level key is
    refused with the in-process text, HTTP 422."""
    client = get_sync_client(url=deployment.a.url)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, checks.GRAPH_ID, input=checks.user("hi"),
                         context={"iteratons": {"max": 2}})
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["detail"] == (
        "invalid run context: unknown key 'iteratons' (per-run override groups: iterations, "
        "limits, loop_detection)")


def test_messages_tuple_tells_model_tokens_from_notices(deployment: Deployment) -> None:
    checks.check_messages_tuple_tells_model_tokens_from_notices(deployment.b.url)


async def test_approval_interrupt_and_resume(deployment: Deployment) -> None:
    await checks.check_approval_interrupt_and_resume(deployment.a.url, deployment.b.url)


async def test_approval_across_processes_runs_the_gated_tool_once(deployment: Deployment) -> None:
    urls = (deployment.a.url, deployment.b.url)
    crossed: list[int] = []
    for n in range(8):  # until one interrupt and its resume ran on different processes
        first, second = get_client(url=urls[n % 2]), get_client(url=urls[1 - n % 2])
        thread_id = (await first.threads.create())["thread_id"]
        await first.runs.wait(thread_id, COUNTED, input=checks.user(f"approve {n}"))
        paused = await second.threads.get_state(thread_id)
        assert paused["next"] == ["approval"]
        [interrupt] = [i for task in paused["tasks"] for i in task["interrupts"]]
        assert [a["name"] for a in interrupt["value"]["action_requests"]] == ["notify"]
        assert not [t for t in deployment.log("tools.jsonl") if t["label"] == f"{n}:notify"]

        result = await second.runs.wait(thread_id, COUNTED,
                                        command={"resume": {"decisions": [{"type": "approve"}]}})
        assert result["stop_reason"] == "completed"
        assert checks.types(result["messages"]) == ["human", "ai", "tool", "ai"]
        assert result["messages"][2]["content"] == f"{n}:notify sent"
        ran = [t for t in deployment.log("tools.jsonl") if t["label"] == f"{n}:notify"]
        assert [t["event"] for t in ran] == ["start", "end"]  # exactly once
        raised_on = {m["server"] for m in deployment.log("model.jsonl")
                     if m["scenario"] == "approve" and m["thread"] == n and m["last_role"] == "user"}
        if raised_on != {ran[0]["server"]}:
            crossed.append(n)
            break
    assert crossed, "every interrupt and its resume ran on the same process"


CRASH_STEPS = ("quick", "slow", "a", "b")


def _crash_tools(d: Deployment) -> list[dict[str, Any]]:
    return [t for t in d.log("tools.jsonl") if t["label"].split(":")[1] in CRASH_STEPS]


def _crash_model(d: Deployment) -> list[dict[str, Any]]:
    return [m for m in d.log("model.jsonl") if m["scenario"] == "crash"]


def _labels(log: list[dict[str, Any]], event: str) -> Counter[str]:
    return Counter(t["label"] for t in log if t["event"] == event)


def _held(d: Deployment, modes: dict[int, str]) -> bool:
    """Every run is inside its gated step (tools mode) or its gated model call (model mode)."""
    tools = _crash_tools(d)
    ended, started = _labels(tools, "end"), _labels(tools, "start")
    answered = {m["thread"] for m in _crash_model(d) if m["last_role"] == "tool"}
    return all(ended[f"{n}:quick"] and started[f"{n}:slow"] if mode == "tools"
               else ended[f"{n}:a"] and ended[f"{n}:b"] and n in answered
               for n, mode in modes.items())


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def _finish_times(client: SyncLangGraphClient, runs: dict[int, tuple[str, str]],
                  timeout: float) -> dict[int, tuple[str, float]]:
    """Poll every run until it is no longer pending/running: ``{n: (status, when)}``."""
    done: dict[int, tuple[str, float]] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(runs) and time.monotonic() < deadline:
        for n, (thread_id, run_id) in runs.items():
            if n not in done:
                status = client.runs.get(thread_id, run_id)["status"]
                if status not in ("pending", "running"):
                    done[n] = (status, time.monotonic())
        time.sleep(0.2)
    return done


def _start_runs(clients: tuple[SyncLangGraphClient, ...],
                modes: dict[int, str]) -> dict[int, tuple[str, str]]:
    """One background run per thread, created alternately through both APIs."""
    runs: dict[int, tuple[str, str]] = {}
    for n, mode in modes.items():
        client = clients[n % len(clients)]
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, COUNTED, input=checks.user(f"crash {n} {mode}"))
        runs[n] = (thread_id, run["run_id"])
    return runs


def _assert_threads_complete(client: SyncLangGraphClient, runs: dict[int, tuple[str, str]]) -> None:
    """Every thread ends completed, with the whole round, provider-valid."""
    for n, (thread_id, _) in runs.items():
        values = client.threads.get_state(thread_id)["values"]
        assert values["stop_reason"] == "completed", n
        messages = values["messages"]
        assert checks.types(messages) == ["human", "ai", "tool", "tool", "ai"], n
        assert not check_pairing(messages_from_dict([{"type": m["type"], "data": m}
                                                     for m in messages]))


def _assert_reruns(d: Deployment, on_a: set[int], modes: dict[int, str]) -> tuple[int, int]:
    """No finished tool call ran again; exactly the work in flight on A ran twice.

    Returns (tool calls run again, model calls repeated)."""
    tools = _crash_tools(d)
    started, ended = _labels(tools, "start"), _labels(tools, "end")
    assert set(ended.values()) == {1}, "a tool call finished twice"
    assert set(started.values()) <= {1, 2}
    rerun = {label for label, count in started.items() if count > 1}
    assert rerun == {f"{n}:slow" for n in on_a if modes[n] == "tools"}
    calls = Counter((m["thread"], m["n_messages"]) for m in _crash_model(d))
    assert set(calls.values()) <= {1, 2}
    repeated = {thread for (thread, _), count in calls.items() if count > 1}
    assert repeated == {n for n in on_a if modes[n] == "model"}
    return len(rerun), len(repeated)


def _last_resumed(d: Deployment, on_a: set[int], killed_at: float) -> float:
    """Seconds from the kill until every moved run had done work on the survivor."""
    first: dict[int, float] = {}
    events = [(int(t["label"].split(":")[0]), t) for t in _crash_tools(d)]
    events += [(m["thread"], m) for m in _crash_model(d)]
    for n, event in events:
        if n in on_a and event["server"] == "b" and event["t"] > killed_at:
            first[n] = min(first.get(n, event["t"]), event["t"])
    assert set(first) == on_a
    return max(first.values()) - killed_at


def test_sigkill_one_server_mid_runs(deployment: Deployment,
                                     record_property: Callable[[str, object], None],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    d = deployment
    clients = (get_sync_client(url=d.a.url), get_sync_client(url=d.b.url))
    modes = {n: "model" if n % 5 == 0 else "tools" for n in range(N_THREADS)}
    runs = _start_runs(clients, modes)
    _wait(lambda: _held(d, modes), 180, "every run held in its gated step or model call")
    time.sleep(1.5)  # the finished calls' writes (async durability) reach PostgreSQL
    on_a = {int(t["label"].split(":")[0]) for t in _crash_tools(d) if t["server"] == "a"}
    assert 0 < len(on_a) < N_THREADS, "runs not spread over both processes"

    d.a.kill()
    killed, killed_at = time.monotonic(), time.time()
    (d.work / "gate").touch()
    done = _finish_times(clients[1], runs, timeout=180)
    assert {n: status for n, (status, _) in done.items()} == dict.fromkeys(runs, "success")
    finished_s = max(when for n, (_, when) in done.items() if n in on_a) - killed
    _assert_threads_complete(clients[1], runs)
    rerun, repeated = _assert_reruns(d, on_a, modes)

    report = {"threads": N_THREADS, "on_killed_process": len(on_a),
              "tool_calls_rerun (in flight at the kill)": rerun,
              "finished_tool_calls_rerun": 0, "model_calls_repeated": repeated,
              "all_moved_runs_resumed_s": round(_last_resumed(d, on_a, killed_at), 1),
              "all_moved_runs_finished_s": round(finished_s, 1)}
    record_property("aegra_crash", report)
    with capsys.disabled():
        print(f"\naegra SIGKILL: {json.dumps(report)}")
