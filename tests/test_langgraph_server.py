"""LangGraph Server for real: ``langgraph dev`` serves ``langgraph.json``'s graph and
``langgraph-sdk`` drives it; the model is ChatOpenAI talking to the standalone loopback
OpenAI-compatible server (``python -m tests.support.openai_server``).

Both servers are started once for this module, each in its own process group, on free
ports, logging under pytest's temporary directory (outside the project), and stopped
in a ``finally``. ``langgraph dev`` runs in the project root (the paths in
``langgraph.json`` are relative to it) and keeps its in-memory snapshots in the
git-ignored ``.langgraph_api/``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client

from tests.support.postgres import free_port

pytestmark = pytest.mark.ecosystem

REPO = Path(__file__).resolve().parents[1]
GRAPH_ID = "langgraph-loop"
START_TIMEOUT_S = 120.0


def _popen(cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new process group, bounded by ``timeout`` when available."""
    if shutil.which("timeout"):
        cmd = ["timeout", "900", *cmd]
    with log.open("wb") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the process group this test started (SIGTERM, then SIGKILL)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _wait_until_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url`` until it answers 200; fail with the log if the process died."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited ({proc.returncode}):\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        with (contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
              urllib.request.urlopen(url, timeout=2) as resp):
            if resp.status == 200:
                return
        time.sleep(0.25)
    raise RuntimeError(f"{url}: not ready after {START_TIMEOUT_S}s:\n"
                       f"{log.read_text(errors='replace')[-4000:]}")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` on a free port with the loopback model server behind it."""
    tmp = tmp_path_factory.mktemp("langgraph-server")
    env = {**os.environ, "PYTHONPATH": str(REPO), "LANGGRAPH_CLI_NO_ANALYTICS": "1",
           "LANGSMITH_TRACING": "false", "LANGGRAPH_LOOP_MODEL": "m", "OPENAI_API_KEY": "test"}
    model_port, api_port = free_port(), free_port()
    model_log, api_log = tmp / "model-server.log", tmp / "langgraph-dev.log"
    model_proc = _popen([sys.executable, "-m", "tests.support.openai_server",
                         "--port", str(model_port)], model_log, env, REPO)
    api_proc: subprocess.Popen[bytes] | None = None
    try:
        _wait_until_ready(f"http://127.0.0.1:{model_port}/v1/models", model_proc, model_log)
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{model_port}/v1"
        langgraph = str(Path(sys.executable).parent / "langgraph")
        api_proc = _popen([langgraph, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                           "--port", str(api_port)], api_log, env, REPO)
        _wait_until_ready(f"http://127.0.0.1:{api_port}/ok", api_proc, api_log)
        yield f"http://127.0.0.1:{api_port}"
    finally:
        if api_proc is not None:
            _stop(api_proc)
        _stop(model_proc)


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


async def test_thread_run_state_and_history(server_url: str) -> None:
    client = get_client(url=server_url)
    assert [a["graph_id"] for a in await client.assistants.search()] == [GRAPH_ID]
    thread_id = (await client.threads.create())["thread_id"]

    result = await client.runs.wait(thread_id, GRAPH_ID, input=user("get_weather for Paris"))
    assert result["stop_reason"] == "completed"
    assert types(result["messages"]) == ["human", "ai", "tool", "ai"]
    call = result["messages"][1]["tool_calls"][0]
    assert (call["name"], call["args"]) == ("get_weather", {})  # the tool's default city
    assert result["messages"][2]["content"] == "Paris: 18°C, cloudy"
    assert result["messages"][3]["content"] == "Done."
    assert result["usage"]["total_tokens"] > 0

    state = await client.threads.get_state(thread_id)
    assert state["next"] == []
    ids = [m["id"] for m in result["messages"]]
    assert [m["id"] for m in state["values"]["messages"]] == ids
    assert state["values"]["stop_reason"] == "completed"
    history = await client.threads.get_history(thread_id, limit=100)
    assert [h["metadata"]["step"] for h in history] == list(range(7, -2, -1))
    assert [h["next"] for h in history] == [
        [], ["router"], ["loop_detector"], ["model"], ["tools"], ["loop_detector"], ["model"],
        ["prepare"], ["__start__"]]
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]

    again = await client.runs.wait(thread_id, GRAPH_ID, input=user("thanks"))
    assert types(again["messages"]) == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert again["iteration"] == 1


def test_streaming_with_the_sync_client(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, GRAPH_ID, input=user("get_weather now"),
                                    stream_mode=["updates", "messages-tuple", "custom"]))
    events = [p.event for p in parts]
    assert events[0] == "metadata"
    nodes = [node for p in parts if p.event == "updates" for node in p.data]
    assert nodes == ["prepare", "model", "loop_detector", "tools", "model", "loop_detector",
                     "router"]
    streamed = [p.data[0] for p in parts if p.event == "messages"]
    assert {m["type"] for m in streamed} == {"AIMessageChunk", "tool"}
    text = "".join(str(m.get("content") or "") for m in streamed if m["type"] == "AIMessageChunk")
    assert text == "Done."
    custom = [p.data for p in parts if p.event == "custom"]
    assert [c["event"] for c in custom if c["event"] == "tool_call"] == ["tool_call"]
    assert next(c for c in custom if c["event"] == "tool_call")["name"] == "get_weather"


def test_per_run_context_overrides_limits(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    result = client.runs.wait(None, GRAPH_ID, input=user("get_weather for Paris"),
                              context={"max_model_calls": 1})
    assert isinstance(result, dict)
    assert result["stop_reason"] == "max_model_calls"
    assert types(result["messages"]) == ["human", "ai", "tool", "human", "ai"]
    unanswered, notice = result["messages"][2:4]
    assert unanswered["status"] == "error"
    assert unanswered["content"].startswith("Error: not executed")
    assert notice["name"] == "loop_warning"
    assert "model-call limit" in notice["content"]
    assert result["iterations"][0]["guard"]["limit"] == 1


def test_messages_tuple_tells_model_tokens_from_notices(server_url: str) -> None:
    """The README rule: the model node's ``AIMessageChunk`` parts are what the model said;
    the stop notice it delivers comes as a tagged human message, not as tokens."""
    client = get_sync_client(url=server_url)
    parts = [p for p in client.runs.stream(None, GRAPH_ID, input=user("get_weather for Paris"),
                                           context={"max_model_calls": 1},
                                           stream_mode="messages-tuple")
             if p.event == "messages"]
    from_model = [m for m, meta in (p.data for p in parts) if meta["langgraph_node"] == "model"]
    said = "".join(str(m.get("content") or "") for m in from_model
                   if m["type"] in ("AIMessageChunk", "ai"))
    assert said == "Done."
    notices = [m for m in from_model if m["type"] not in ("AIMessageChunk", "ai")]
    assert [(m["type"], m["name"]) for m in notices] == [("human", "loop_warning")]
    assert notices[0]["additional_kwargs"]["langgraph_loop"]["kind"] == "notice"
    assert "model-call limit" in notices[0]["content"]


async def test_approval_interrupt_and_resume(server_url: str) -> None:
    client = get_client(url=server_url)
    thread_id = (await client.threads.create())["thread_id"]

    await client.runs.wait(thread_id, GRAPH_ID, input=user("please send_email to the team"))
    paused = await client.threads.get_state(thread_id)
    assert paused["next"] == ["approval"]
    assert paused["values"]["stop_reason"] is None
    [interrupt] = [i for task in paused["tasks"] for i in task["interrupts"]]
    request = interrupt["value"]
    assert [a["name"] for a in request["action_requests"]] == ["send_email"]
    assert request["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}]
    assert types(paused["values"]["messages"]) == ["human", "ai"]

    result = await client.runs.wait(thread_id, GRAPH_ID,
                                    command={"resume": {"decisions": [{"type": "approve"}]}})
    assert result["stop_reason"] == "completed"
    assert types(result["messages"]) == ["human", "ai", "tool", "ai"]
    assert "queued" in result["messages"][2]["content"]

    history = await client.threads.get_history(thread_id, limit=100)
    assert any(h["next"] == ["approval"] for h in history)
    parts = [p async for p in client.runs.stream(thread_id, GRAPH_ID, input=user("send_email again"),
                                                 stream_mode="updates")]
    assert any("__interrupt__" in p.data for p in parts if p.event == "updates")
