"""LangGraph Server for real: ``langgraph dev`` serves ``langgraph.json``'s graph and
``langgraph-sdk`` drives it through the checks every deployment passes
(``tests/support/server_checks.py``); the model is ChatOpenAI talking to the standalone
loopback OpenAI-compatible server (``python -m tests.support.openai_server``).

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

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langgraph_sdk import get_sync_client

from langgraph_loop.app.server import CHAT_GRAPH_ID
from langgraph_loop.app.server import graph as server_graph
from langgraph_loop.core.prompts import TYPED_INSTEAD
from tests.support import server_checks as checks
from tests.support.postgres import free_port

pytestmark = pytest.mark.ecosystem

REPO = Path(__file__).resolve().parents[2]
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


async def test_thread_run_state_and_history(server_url: str) -> None:
    await checks.check_thread_run_state_and_history(server_url, server_url)


def test_streaming_with_the_sync_client(server_url: str) -> None:
    checks.check_streaming_with_the_sync_client(server_url, checks.Engine())


def test_schemas_answer_200(server_url: str) -> None:
    checks.check_schemas_answer(server_url)


def test_per_run_context_overrides_limits(server_url: str) -> None:
    checks.check_per_run_context_overrides_limits(server_url)


def test_a_misspelled_override_is_the_in_process_error(server_url: str) -> None:
    checks.check_a_misspelled_override_is_the_in_process_error(server_url)


@pytest.mark.parametrize("context", [{"iteratons": {"max": 2}}, {"max_iteratons": 2},
                                     {"limits": {"final_answr": False}}])
def test_a_context_the_graph_refuses_is_the_in_process_error_over_http(
        server_url: str, context: dict[str, object]) -> None:
    """The server keeps only the context keys the schema declares: without ``RunContextCheck``
    the misspelled top-level key is dropped and the run goes on. Now every run endpoint answers
    422 with the ``ValueError`` ``invoke`` raises, and no run is made."""
    with pytest.raises(ValueError) as in_process:
        server_graph.invoke({"messages": [HumanMessage("hi")]}, context=context)
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    run = {"input": checks.user("hi"), "context": context}
    for call in (lambda: client.runs.wait(None, checks.GRAPH_ID, **run),
                 lambda: client.runs.create(thread, checks.GRAPH_ID, **run),
                 lambda: list(client.runs.stream(thread, checks.GRAPH_ID, **run))):
        with pytest.raises(httpx.HTTPStatusError) as over_http:
            call()
        assert over_http.value.response.status_code == 422
        assert over_http.value.response.json()["detail"] == str(in_process.value)
    assert client.runs.list(thread) == []


def test_two_runs_at_once_on_one_thread_with_enqueue_run_one_after_the_other(
        server_url: str) -> None:
    """The multitask strategy docs/deployment.md recommends: the second run waits its turn,
    both finish, and the thread holds both turns whole, in order (never interleaved)."""
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    first = client.runs.create(thread, checks.GRAPH_ID, input=checks.user("get_weather for Paris"))
    second = client.runs.create(thread, checks.GRAPH_ID, input=checks.user("get_weather for Rome"),
                                multitask_strategy="enqueue")
    for run in (first, second):
        client.runs.join(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] == "success"
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert [m["content"] for m in messages if m["type"] == "human"] == [
        "get_weather for Paris", "get_weather for Rome"]


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_the_other_strategies_leave_the_second_run_done_and_the_thread_valid(
        server_url: str, strategy: str) -> None:
    """``interrupt``/``rollback`` stop the first run if it is still going (never a refused
    second run: the first one's end frees the thread before the second starts)."""
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    client.runs.create(thread, checks.GRAPH_ID, input=checks.user("get_weather for Paris"))
    second = client.runs.create(thread, checks.GRAPH_ID, input=checks.user("get_weather for Rome"),
                                multitask_strategy=strategy)
    client.runs.join(thread, second["run_id"])
    assert client.runs.get(thread, second["run_id"])["status"] == "success"
    messages = client.threads.get_state(thread)["values"]["messages"]
    assert messages[-4:][0]["content"] == "get_weather for Rome"
    assert [m["type"] for m in messages[-4:]] == ["human", "ai", "tool", "ai"]
    open_calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert sorted(m["tool_call_id"] for m in messages if m["type"] == "tool") == sorted(open_calls)


def test_messages_tuple_sends_the_stop_notice_before_the_final_answer(server_url: str) -> None:
    """A UI renders the stream in order: the notice the final answer read comes first."""
    client = get_sync_client(url=server_url)
    parts = [p.data[0] for p in client.runs.stream(
        None, checks.GRAPH_ID, input=checks.user("get_weather for Paris"),
        context={"iterations": {"max_model_calls": 1}}, stream_mode="messages-tuple")
        if p.event == "messages"]
    kinds = [m.get("name") if m["type"] == "human" else m["type"] for m in parts]
    said = [i for i, m in enumerate(parts) if m["type"] in ("AIMessageChunk", "ai") and m.get("content")]
    assert kinds.index("stop_notice") < said[0]
    assert "".join(parts[i]["content"] for i in said) == "Done."


def test_messages_tuple_tells_model_tokens_from_notices(server_url: str) -> None:
    checks.check_messages_tuple_tells_model_tokens_from_notices(server_url)


async def test_approval_interrupt_and_resume(server_url: str) -> None:
    await checks.check_approval_interrupt_and_resume(server_url, server_url)


# --- what Agent Chat UI reads and sends (the chat graph) ------------------------------------

def _interrupt(client: Any, thread_id: str) -> dict[str, Any]:
    """The one open question of a paused thread, as the server's state has it."""
    [interrupt] = [i for task in client.threads.get_state(thread_id)["tasks"] for i in task["interrupts"]]
    return interrupt["value"]  # type: ignore[no-any-return]


def test_over_http_notices_are_hidden_the_loop_question_has_buttons_and_typing_is_a_redirect(
        server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    paused = client.runs.wait(thread_id, CHAT_GRAPH_ID, input=checks.user("keep checking get_weather"))
    notices = [m for m in paused["messages"] if m.get("name") in ("loop_notice", "stop_notice")]
    assert notices and all(m["id"].startswith("do-not-render-") for m in notices)
    question = _interrupt(client, thread_id)
    assert [a["name"] for a in question["action_requests"]] == ["Loop detected: get_weather"]
    assert question["action_requests"][0]["args"] == {"hint": ""}
    assert question["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
    ran = sum(m["type"] == "tool" for m in paused["messages"])
    # Agent Chat UI's submit while a question is open: a placeholder for the paused call, then
    # the person's message (ensureToolCallsHaveResponses)
    call_id = paused["messages"][-1]["tool_calls"][0]["id"]
    placeholder = {"type": "tool", "tool_call_id": call_id, "id": "do-not-render-placeholder",
                   "name": "get_weather", "content": "Successfully handled tool call."}
    typed = {"type": "human", "id": "typed-1", "content": [{"type": "text", "text": "continue"}]}
    again = client.runs.wait(thread_id, CHAT_GRAPH_ID, input={"messages": [placeholder, typed]})
    answered = [m for m in again["messages"] if m["id"] == "do-not-render-placeholder"]
    assert [(m["content"], m["status"]) for m in answered] == [(TYPED_INSTEAD, "error")]
    assert [a["name"] for a in _interrupt(client, thread_id)["action_requests"]] == [
        "Loop detected: get_weather"]  # asked again at once: the detector went on
    assert sum(m["type"] == "tool" and m["status"] != "error" for m in again["messages"]) == ran
    done = client.runs.wait(thread_id, CHAT_GRAPH_ID, command={"resume": {"decisions": [
        {"type": "reject", "message": "It will not change; stop."}]}})
    assert done["stop_reason"] == "loop_detected" and done["messages"][-1]["content"] == "Done."


def test_over_http_the_budget_check_in_takes_an_edited_number_sent_as_text(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, CHAT_GRAPH_ID, input=checks.user("get_weather for Paris"),
                     context={"limits": {"token_budget": 150}})
    question = _interrupt(client, thread_id)
    (action,) = question["action_requests"]
    assert action["name"] == "Token budget reached: add more?" and list(action["args"]) == ["tokens"]
    assert "This conversation has used" in action["description"]
    done = client.runs.wait(thread_id, CHAT_GRAPH_ID, command={"resume": {"decisions": [
        {"type": "edit", "edited_action": {"name": action["name"], "args": {"tokens": "20000"}}}]}})
    assert done["stop_reason"] == "completed" and done["messages"][-1]["content"] == "Done."
