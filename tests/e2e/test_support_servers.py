"""End-to-end tests of the test-support servers (OpenAI stub and throwaway PostgreSQL)."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from pydantic import SecretStr

from tests.support.openai_server import JSON, OpenAIServer, auto_reply, check_pairing, error, text, tool_calls
from tests.support.postgres import DIR_PREFIX, fresh_database, reap_stale_dirs

REPO_ROOT = Path(__file__).resolve().parents[2]


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(zone: str = "UTC") -> str:
    """Return the time in a zone."""
    return f"12:00 {zone}"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A fresh scripted OpenAI server per test."""
    with OpenAIServer() as srv:
        yield srv


def make_llm(srv: OpenAIServer | str, **kwargs: Any) -> ChatOpenAI:
    """ChatOpenAI pointed at the stub (a server or a base URL); callers bind tools."""
    url = srv if isinstance(srv, str) else srv.base_url
    return ChatOpenAI(base_url=url, api_key=SecretStr("x"), model="m", max_retries=0, **kwargs)


# --------------------------------------------------------------------------- OpenAI: JSON


def test_text_reply_and_request_recorded(server: OpenAIServer) -> None:
    server.script.append(text("Hello there", usage=(12, 7)))
    msg = make_llm(server).bind_tools([get_weather]).invoke([HumanMessage("hi")])
    assert isinstance(msg, AIMessage)
    assert msg.content == "Hello there"
    assert msg.tool_calls == []
    assert msg.usage_metadata is not None
    assert (msg.usage_metadata["input_tokens"], msg.usage_metadata["output_tokens"]) == (12, 7)
    assert msg.usage_metadata["total_tokens"] == 19
    assert msg.response_metadata["finish_reason"] == "stop"
    [body] = server.requests
    assert body["model"] == "m"
    assert body["stream"] is False
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"][0]["function"]["name"] == "get_weather"


def test_default_usage_is_deterministic(server: OpenAIServer) -> None:
    server.script.append(text("ok"))
    msg = make_llm(server).invoke([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
    assert msg.usage_metadata is not None
    assert msg.usage_metadata["input_tokens"] == 30
    assert msg.usage_metadata["output_tokens"] == 5


def test_single_tool_call(server: OpenAIServer) -> None:
    server.script.append(tool_calls([("get_weather", {"city": "Paris"})]))
    msg = make_llm(server).bind_tools([get_weather]).invoke("weather?")
    assert isinstance(msg, AIMessage)
    assert msg.tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1_0", "type": "tool_call"}
    ]
    assert msg.response_metadata["finish_reason"] == "tool_calls"


def test_parallel_tool_calls_ids_unique_across_requests(server: OpenAIServer) -> None:
    calls = [("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})]
    server.script.extend([tool_calls(calls, content="checking"), tool_calls(calls)])
    llm = make_llm(server).bind_tools([get_weather, get_time])
    first, second = llm.invoke("go"), llm.invoke("again")
    assert isinstance(first, AIMessage) and isinstance(second, AIMessage)
    assert first.content == "checking"
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"zone": "CET"}),
    ]
    ids = [c["id"] for c in first.tool_calls + second.tool_calls]
    assert ids == ["call_1_0", "call_1_1", "call_2_0", "call_2_1"]


def test_malformed_tool_args_become_invalid_tool_calls(server: OpenAIServer) -> None:
    server.script.append(tool_calls([("get_weather", '{"city": "Par')]))
    msg = make_llm(server).bind_tools([get_weather]).invoke("x")
    assert isinstance(msg, AIMessage)
    assert msg.tool_calls == []
    [bad] = msg.invalid_tool_calls
    assert bad["name"] == "get_weather"
    assert bad["args"] == '{"city": "Par'
    assert bad["id"] == "call_1_0"
    assert bad["error"]


def test_callable_script_item_and_default(server: OpenAIServer) -> None:
    seen: list[JSON] = []

    def echo(body: JSON) -> Any:
        seen.append(body)
        return text(f"you said {body['messages'][-1]['content']}")

    server.script.append(echo)
    server.default = lambda body: "fallback"
    llm = make_llm(server)
    assert llm.invoke("ping").content == "you said ping"
    assert llm.invoke("again").content == "fallback"
    assert seen == [server.requests[0]]


@pytest.mark.parametrize(
    ("status", "exc_type"), [(429, openai.RateLimitError), (500, openai.InternalServerError)]
)
def test_http_errors_raise_openai_errors(
    server: OpenAIServer, status: int, exc_type: type[Exception]
) -> None:
    server.script.append(error(status, "boom", code="test_code"))
    with pytest.raises(exc_type) as info:
        make_llm(server).invoke("x")
    assert "boom" in str(info.value)
    assert len(server.requests) == 1


def test_failing_callable_is_http_500(server: OpenAIServer) -> None:
    def broken(body: JSON) -> Any:
        raise ValueError("bad script")

    server.script.append(broken)
    with pytest.raises(openai.InternalServerError, match="bad script"):
        make_llm(server).invoke("x")
    assert [type(e) for e in server.errors] == [ValueError]


def test_script_exhausted_is_http_500(server: OpenAIServer) -> None:
    with pytest.raises(openai.InternalServerError, match="exhausted"):
        make_llm(server).invoke("x")


def test_errors_in_stream_mode(server: OpenAIServer) -> None:
    server.script.append(error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        list(make_llm(server, streaming=True).stream("x"))


def test_models_endpoint(server: OpenAIServer) -> None:
    with urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
        data = json.load(resp)
    assert data["object"] == "list"
    assert data["data"][0]["id"] == "m"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(server.base_url + "/nope", timeout=5)
    assert info.value.code == 404


def test_concurrent_requests(server: OpenAIServer) -> None:
    # Every reply waits until all six requests are inside the server at once: a server
    # that answered one request at a time would break the barrier (HTTP 500).
    barrier = threading.Barrier(6, timeout=20)

    def together(body: JSON) -> Any:
        barrier.wait()
        return text(body["messages"][-1]["content"].upper())

    server.default = together
    llm = make_llm(server)
    results: dict[int, Any] = {}

    def worker(i: int) -> None:
        results[i] = llm.invoke(f"msg{i}").content

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert server.errors == []
    assert results == {i: f"MSG{i}" for i in range(6)}
    assert len(server.requests) == 6


# --------------------------------------------------------------------------- OpenAI: SSE


def test_stream_text_deltas_and_usage(server: OpenAIServer) -> None:
    server.script.append(text("The quick brown fox", usage=(3, 4)))
    chunks = list(make_llm(server, stream_usage=True).stream("x"))
    pieces = [c.content for c in chunks if c.content]
    assert len(pieces) >= 2
    assert "".join(str(p) for p in pieces) == "The quick brown fox"
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    assert total.usage_metadata is not None
    assert total.usage_metadata["total_tokens"] == 7
    body = server.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_stream_parallel_tool_call_deltas(server: OpenAIServer) -> None:
    calls = [("get_weather", {"city": "Lima"}), ("get_time", {"zone": "PET"})]
    server.script.append(tool_calls(calls))
    llm = make_llm(server, stream_usage=True).bind_tools([get_weather, get_time])
    chunks = [c for c in llm.stream("x") if isinstance(c, AIMessageChunk)]
    assert sum(len(c.tool_call_chunks) for c in chunks) > 2  # args arrive in fragments
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    assert [(c["name"], c["args"], c["id"]) for c in total.tool_calls] == [
        ("get_weather", {"city": "Lima"}, "call_1_0"),
        ("get_time", {"zone": "PET"}, "call_1_1"),
    ]
    assert total.usage_metadata is not None
    assert total.usage_metadata["input_tokens"] == 10


def test_stream_without_usage_request_sends_no_usage(server: OpenAIServer) -> None:
    server.script.append(text("abc"))
    chunks = list(make_llm(server, stream_usage=False).stream("x"))
    assert all(c.usage_metadata is None for c in chunks)
    assert "stream_options" not in server.requests[0] or not server.requests[0]["stream_options"]


@pytest.mark.asyncio
async def test_astream_tool_call(server: OpenAIServer) -> None:
    server.script.append(tool_calls([("get_weather", {"city": "Rome"})]))
    llm = make_llm(server, stream_usage=True).bind_tools([get_weather])
    total: Any = None
    async for chunk in llm.astream("x"):
        total = chunk if total is None else total + chunk
    assert total.tool_calls[0]["args"] == {"city": "Rome"}
    assert total.usage_metadata["total_tokens"] == 15


# --------------------------------------------------------------------------- pairing rule


def test_check_pairing_on_real_round_trip(server: OpenAIServer) -> None:
    calls = [("get_weather", {"city": "A"}), ("get_time", {})]
    server.script.extend([tool_calls(calls), text("final")])
    llm = make_llm(server).bind_tools([get_weather, get_time])
    history: list[Any] = [HumanMessage("go")]
    ai = llm.invoke(history)
    assert isinstance(ai, AIMessage)
    history += [ai] + [ToolMessage("r", tool_call_id=c["id"]) for c in ai.tool_calls]
    assert llm.invoke(history).content == "final"
    assert check_pairing(server.requests[1]) == []
    assert check_pairing(server.requests[0]) == []


def _assistant(*ids: str) -> JSON:
    """A wire-format assistant message calling ``f`` once per id."""
    fn = {"name": "f", "arguments": "{}"}
    calls = [{"id": i, "type": "function", "function": fn} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _tool(tid: str) -> JSON:
    """A wire-format tool result for ``tid``."""
    return {"role": "tool", "tool_call_id": tid, "content": "r"}


USER = {"role": "user", "content": "q"}


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([USER, _assistant("a", "b"), _tool("a")], "['b']"),
        ([USER, _assistant("a"), USER, _tool("a")], "orphan"),
        ([USER, _assistant("a"), _tool("a"), _tool("z")], "'z' matches no call of 1"),
        ([USER, _assistant("a"), _tool("a"), _tool("a")], "second tool result"),
        ([USER, _tool("a")], "orphan"),
        ([USER, _assistant("a", "a"), _tool("a"), _tool("a")], "duplicate"),
        ([USER, _assistant("a")], "['a']"),
    ],
)
def test_check_pairing_detects_problems(messages: list[JSON], fragment: str) -> None:
    problems = check_pairing({"messages": messages})
    assert problems
    assert any(fragment in p for p in problems), problems


def test_check_pairing_accepts_valid_bodies() -> None:
    answer = {"role": "assistant", "content": "x"}
    body = [USER, _assistant("a", "b"), _tool("b"), _tool("a"), answer, USER, _assistant("c"), _tool("c")]
    assert check_pairing({"messages": body}) == []
    assert check_pairing(body) == []
    no_calls = {"role": "assistant", "content": "hi", "tool_calls": []}
    assert check_pairing({"messages": [USER, no_calls]}) == []


# --------------------------------------------------------------------------- auto reply / CLI


def test_auto_reply_calls_first_tool_then_answers(server: OpenAIServer) -> None:
    server.default = auto_reply
    llm = make_llm(server).bind_tools([get_weather, get_time])
    ai = llm.invoke("go")
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls[0]["name"] == "get_weather"
    assert ai.tool_calls[0]["args"] == {"city": "x"}
    result = ToolMessage("r", tool_call_id=ai.tool_calls[0]["id"])
    done = llm.invoke([HumanMessage("go"), ai, result])
    assert done.content == "Done."
    assert make_llm(server).invoke("no tools").content == "Done."


def test_standalone_module_serves_auto_reply() -> None:
    from tests.support.postgres import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--port", str(port)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"127.0.0.1:{port}/v1" in line, line + (proc.stderr.read() if proc.stderr else "")
        ai = make_llm(f"http://127.0.0.1:{port}/v1").bind_tools([get_time]).invoke("t")
        assert isinstance(ai, AIMessage)
        assert ai.tool_calls[0]["name"] == "get_time"
        assert ai.tool_calls[0]["args"] == {}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------- PostgreSQL


class CountState(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]


def build_counter() -> StateGraph[CountState]:
    """a: n + 1, then b: n * 10."""
    graph = StateGraph(CountState)
    graph.add_node("a", lambda s: {"n": s["n"] + 1, "log": ["a"]})
    graph.add_node("b", lambda s: {"n": s["n"] * 10, "log": ["b"]})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    return graph


def test_fresh_database_is_isolated(pg_server: str) -> None:
    import psycopg

    first, second = fresh_database(pg_server), fresh_database(pg_server)
    assert first != second
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(second) as conn:
        row = conn.execute("SELECT to_regclass('only_here')").fetchone()
    assert row == (None,)


def test_postgres_saver_sync(pg_db: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    cfg: Any = {"configurable": {"thread_id": "t1"}}
    with PostgresSaver.from_conn_string(pg_db) as saver:
        saver.setup()
        app = build_counter().compile(checkpointer=saver)
        assert app.invoke({"n": 1, "log": []}, cfg) == {"n": 20, "log": ["a", "b"]}
        state = app.get_state(cfg)
        assert state.next == ()
        assert state.values == {"n": 20, "log": ["a", "b"]}
        assert len(list(app.get_state_history(cfg))) == 4
    with PostgresSaver.from_conn_string(pg_db) as saver:  # persisted across connections
        assert build_counter().compile(checkpointer=saver).get_state(cfg).values["n"] == 20


@pytest.mark.asyncio
async def test_postgres_saver_async(pg_db: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    cfg: Any = {"configurable": {"thread_id": "t2"}}
    async with AsyncPostgresSaver.from_conn_string(pg_db) as saver:
        await saver.setup()
        app = build_counter().compile(checkpointer=saver)
        assert await app.ainvoke({"n": 2, "log": []}, cfg) == {"n": 30, "log": ["a", "b"]}
        again = await app.ainvoke({"n": 0, "log": []}, cfg)
        assert again["log"] == ["a", "b", "a", "b"]
        state = await app.aget_state(cfg)
        assert state.values["n"] == 10


def test_auto_reply_calls_the_tool_the_user_names(server: OpenAIServer) -> None:
    server.default = auto_reply
    ai = make_llm(server).bind_tools([get_weather, get_time]).invoke("use get_time please")
    assert isinstance(ai, AIMessage)
    assert [c["name"] for c in ai.tool_calls] == ["get_time"]


def _throwaway_dir(root: Path, name: str, *, age_s: float, lock: str | None) -> Path:
    """A fake throwaway-cluster dir ``age_s`` old, with ``lock`` as its postmaster.pid."""
    path = root / (DIR_PREFIX + name)
    (path / "data").mkdir(parents=True)
    if lock is not None:
        (path / "data" / "postmaster.pid").write_text(lock + "\n/tmp/x\n")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_reap_stale_dirs_spares_live_and_young_clusters(tmp_path: Path) -> None:
    """Only dirs of dead or long-abandoned clusters go; a parallel run's initdb is spared.

    ``initdb``'s standalone backend writes its pid negated: reading it as a process group
    once deleted a data directory another CI run was initialising.
    """
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    hour = 3600.0
    old_dead = _throwaway_dir(tmp_path, "old-dead", age_s=hour, lock=str(gone.pid))
    old_bare = _throwaway_dir(tmp_path, "old-bare", age_s=2 * hour, lock=None)
    kept = [
        _throwaway_dir(tmp_path, "initdb", age_s=hour, lock=f"-{os.getpid()}"),
        _throwaway_dir(tmp_path, "server", age_s=hour, lock=str(os.getpid())),
        _throwaway_dir(tmp_path, "young-dead", age_s=60, lock=str(gone.pid)),
        _throwaway_dir(tmp_path, "young-bare", age_s=20 * 60, lock=None),
    ]
    removed = reap_stale_dirs(str(tmp_path))
    assert sorted(removed) == sorted([old_dead, old_bare])
    assert all(path.exists() for path in kept)
    assert not old_dead.exists() and not old_bare.exists()
