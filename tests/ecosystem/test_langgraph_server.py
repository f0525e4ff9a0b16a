"""LangGraph Server for real: ``langgraph dev`` serves ``langgraph.json``'s graph and
``langgraph-sdk`` drives it through the checks every deployment passes
(``tests/support/server_checks.py``); the model is ChatOpenAI talking to the standalone
loopback OpenAI-compatible server (``python -m tests.support.openai_server``).

A second ``langgraph dev`` serves a user's own deployment (``tests/support/user_deployment.py``)
from a scratch project folder. The servers are started once for this module, each in its own
process group, on free ports, logging under pytest's temporary directory (outside the
project), and stopped in a ``finally``. ``langgraph dev`` runs in the project root (the paths
in ``langgraph.json`` are relative to it) and keeps its in-memory snapshots in the
git-ignored ``.langgraph_api/``.
"""

from __future__ import annotations

import contextlib
import json
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
from tests.support import user_deployment
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
def model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The loopback OpenAI-compatible model server the deployments' ChatOpenAI talks to."""
    tmp = tmp_path_factory.mktemp("model-server")
    port, log = free_port(), tmp / "model-server.log"
    proc = _popen([sys.executable, "-m", "tests.support.openai_server", "--port", str(port)], log,
                  _env(), REPO)
    try:
        _wait_until_ready(f"http://127.0.0.1:{port}/v1/models", proc, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(proc)


def _env(model_url: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LANGGRAPH_CLI_NO_ANALYTICS": "1",
           "LANGSMITH_TRACING": "false", "LANGGRAPH_LOOP_MODEL": "m", "OPENAI_API_KEY": "test"}
    return env if model_url is None else {**env, "OPENAI_BASE_URL": model_url}


def _langgraph_dev(model_url: str, log: Path, cwd: Path, *args: str) -> Iterator[str]:
    """``langgraph dev`` in ``cwd`` on a free port, until the test module is done."""
    port = free_port()
    langgraph = str(Path(sys.executable).parent / "langgraph")
    proc = _popen([langgraph, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                   "--port", str(port), *args], log, _env(model_url), cwd)
    try:
        _wait_until_ready(f"http://127.0.0.1:{port}/ok", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def server_url(model_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving this repository's ``langgraph.json``."""
    log = tmp_path_factory.mktemp("langgraph-server") / "langgraph-dev.log"
    yield from _langgraph_dev(model_url, log, REPO)


@pytest.fixture(scope="module")
def user_server_url(model_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` serving a user's own deployment (``tests/support/user_deployment.py``:
    their graph under their own id, a second graph with a context of its own)."""
    project = tmp_path_factory.mktemp("user-project")
    (project / "langgraph.json").write_text(json.dumps(user_deployment.LANGGRAPH_JSON))
    yield from _langgraph_dev(model_url, project / "langgraph-dev.log", project)


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


@pytest.mark.parametrize("graph_id", [checks.GRAPH_ID, CHAT_GRAPH_ID])
@pytest.mark.parametrize("context", [{"iteratons": {"max": 2}}, {"max_iteratons": 2},
                                     {"limits": {"final_answr": False}}])
def test_a_context_the_graph_refuses_is_the_in_process_error_over_http(
        server_url: str, context: dict[str, object], graph_id: str) -> None:
    """The server keeps only the context keys the schema declares: without ``RunContextCheck``
    the misspelled top-level key is dropped and the run goes on. Now every run endpoint answers
    422 with the ``ValueError`` ``invoke`` raises, and no run is made."""
    with pytest.raises(ValueError) as in_process:
        server_graph.invoke({"messages": [HumanMessage("hi")]}, context=context)
    client = get_sync_client(url=server_url)
    thread = client.threads.create()["thread_id"]
    run = {"input": checks.user("hi"), "context": context}
    for call in (lambda: client.runs.wait(None, graph_id, **run),
                 lambda: client.runs.create(thread, graph_id, **run),
                 lambda: list(client.runs.stream(thread, graph_id, **run))):
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


def test_over_http_a_bad_answer_to_our_question_is_422_with_the_plain_message(server_url: str) -> None:
    """Issue 43: a resume our question does not take was HTTP 200 with ``__error__`` and pydantic
    internals; now each run endpoint answers 422 with the ``ValueError`` text, nothing runs, and
    the thread stays paused at the question (by graph id and by assistant UUID alike)."""
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, CHAT_GRAPH_ID, input=checks.user("get_weather for Paris"),
                     context={"limits": {"token_budget": 150}})
    question, runs = _interrupt(client, thread_id), len(client.runs.list(thread_id))
    bad = {"resume": {"decisions": [{"type": "edit", "edited_action": {
        "name": question["action_requests"][0]["name"], "args": {"tokens": "lots"}}}]}}
    uuid = client.assistants.search(graph_id=CHAT_GRAPH_ID)[0]["assistant_id"]
    for call in (lambda: client.runs.wait(thread_id, CHAT_GRAPH_ID, command=bad),
                 lambda: client.runs.create(thread_id, uuid, command=bad),
                 lambda: list(client.runs.stream(thread_id, CHAT_GRAPH_ID, command=bad))):
        with pytest.raises(httpx.HTTPStatusError) as over_http:
            call()
        assert over_http.value.response.status_code == 422
        assert over_http.value.response.json()["detail"].startswith(
            "resume: token budget: the edited 'tokens' must be a whole number >= 1, got 'lots'; "
            "its question 'Token budget reached: add more?' takes {'decisions': [{'type': 'approve'")
    assert len(client.runs.list(thread_id)) == runs and _interrupt(client, thread_id) == question
    done = client.runs.wait(thread_id, CHAT_GRAPH_ID,
                            command={"resume": {"decisions": [{"type": "approve"}]}})
    assert done["stop_reason"] == "completed"


def test_over_http_continuation_and_summary_messages_are_hidden_from_a_chat_ui(
        user_server_url: str) -> None:
    """The user's graph goes on for a second pass and compacts its history: the continuation
    and the summary are user-role messages the model reads, with ids Agent Chat UI does not
    render, so the person's bubbles hold only what they typed."""
    client = get_sync_client(url=user_server_url)
    thread_id = client.threads.create()["thread_id"]
    out = client.runs.wait(thread_id, user_deployment.USER_GRAPH_ID,
                           input=checks.user("get_weather for Paris"))
    assert out["stop_reason"] == "completed" and out["iteration"] == 2
    loop_written = {m["name"]: m["id"] for m in out["messages"] if m["type"] == "human" and m.get("name")}
    assert set(loop_written) == {"loop_continue", "loop_summary"}
    assert all(i.startswith("do-not-render-") for i in loop_written.values())
    shown = [m["content"] for m in out["messages"]
             if m["type"] == "human" and not m["id"].startswith("do-not-render-")]
    assert shown == ["get_weather for Paris"]


# --- a user's own deployment: RunContextCheck for their graph id, a second graph -------------

def test_a_users_own_graph_id_gets_the_in_process_error_by_id_and_by_assistant_uuid(
        user_server_url: str) -> None:
    """Set up as docs/deployment.md says, under the user's own graph id: a misspelled key is
    refused (HTTP 422, the ``ValueError`` text) whether the run names the graph by its id or
    by an assistant's UUID (as Studio does), and no run is made."""
    context = {"limits": {"max_tool_call": 2}}
    with pytest.raises(ValueError) as in_process:
        user_deployment.graph.invoke({"messages": [HumanMessage("hi")]}, context=context)
    client = get_sync_client(url=user_server_url)
    [assistant] = client.assistants.search(graph_id=user_deployment.USER_GRAPH_ID)
    thread = client.threads.create()["thread_id"]
    for name in (user_deployment.USER_GRAPH_ID, assistant["assistant_id"]):
        with pytest.raises(httpx.HTTPStatusError) as over_http:
            client.runs.wait(thread, name, input=checks.user("get_weather"), context=context)
        assert over_http.value.response.status_code == 422
        assert over_http.value.response.json()["detail"] == str(in_process.value)
    assert client.runs.list(thread) == []
    ok = client.runs.wait(thread, assistant["assistant_id"], input=checks.user("get_weather"),
                          context={"limits": {"max_tool_calls": 1}})
    assert ok["stop_reason"] == "max_tool_calls"


def test_a_second_graph_of_the_deployment_gets_its_own_context_by_id_and_by_assistant_uuid(
        user_server_url: str) -> None:
    """The check is the user's graph's only: the other graph's valid context (a key the loop
    graph does not know) reaches its tool, whichever way the run names the graph."""
    client = get_sync_client(url=user_server_url)
    [assistant] = client.assistants.search(graph_id=user_deployment.OTHER_GRAPH_ID)
    for name in (user_deployment.OTHER_GRAPH_ID, assistant["assistant_id"]):
        out = client.runs.wait(None, name, input=checks.user("hi"), context={"customer": "Ada"})
        assert [m["content"] for m in out["messages"] if m["type"] == "tool"] == ["Hello, Ada"]


# --- two messages on one thread: what the current server does --------------------------------

def test_the_default_strategy_queues_a_message_and_a_loop_question_it_meets_is_answered_by_it(
        server_url: str) -> None:
    """LangGraph Server's default ``multitask_strategy`` is ``enqueue``: a second message sent
    while the first run is going waits. When the first run has paused at the loop question,
    the queued message is the person's answer, as if typed at the question: the paused call is
    recorded as not run, the message is a redirect of the run, and the question is asked again
    at once if the agent goes back to the same call (never dropped without a word)."""
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("keep checking get_weather"))
    second = client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("and in Rome?"))
    assert [r["multitask_strategy"] for r in (first, second)] == ["enqueue", "enqueue"]
    for run in (first, second):
        client.runs.join(thread_id, run["run_id"])
        assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    typed = next(i for i, m in enumerate(messages) if m["content"] == "and in Rome?")
    assert messages[typed]["additional_kwargs"]["langgraph_loop"] == {"kind": "budget_redirect"}
    paused = messages[typed - 1]
    assert (paused["type"], paused["status"], paused["content"]) == ("tool", "error", TYPED_INSTEAD)
    assert [a["name"] for a in _interrupt(client, thread_id)["action_requests"]] == [
        "Loop detected: get_weather"]
    open_calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert sorted(m["tool_call_id"] for m in messages if m["type"] == "tool") == sorted(open_calls[:-1])


def test_reject_is_asked_for_and_answers_a_second_message_with_409(server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("keep checking get_weather"))
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("and in Rome?"),
                           multitask_strategy="reject")
    assert refused.value.response.status_code == 409
    client.runs.join(thread_id, first["run_id"])
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [first["run_id"]]


@pytest.mark.parametrize("graph_id", [checks.GRAPH_ID, CHAT_GRAPH_ID])
def test_studio_reads_the_schemas_on_this_python(server_url: str, graph_id: str) -> None:
    """``GET /assistants/{id}/schemas`` answers 200 for both graphs on the Python the suite
    runs (3.11 in CI, ``langgraph.json``'s ``python_version``)."""
    client = get_sync_client(url=server_url)
    [assistant] = client.assistants.search(graph_id=graph_id)
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert "iterations" in schemas["context_schema"]["properties"], sys.version


def test_a_queued_message_that_meets_an_approval_records_the_gated_call_as_not_run(
        server_url: str) -> None:
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("please send_email"))
    second = client.runs.create(thread_id, CHAT_GRAPH_ID, input=checks.user("never mind"))
    for run in (first, second):
        client.runs.join(thread_id, run["run_id"])
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    typed = next(i for i, m in enumerate(messages) if m["content"] == "never mind")
    gated = messages[typed - 1]
    assert (gated["type"], gated["status"]) == ("tool", "error")
    assert gated["content"].startswith("Error: this call was not executed: the run that requested it ended")
    assert messages[typed - 2]["tool_calls"][0]["name"] == "send_email"
