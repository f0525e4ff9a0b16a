"""Issue 21, text: odd text in a tool result or in a model's tool-call arguments neither
crashes the run nor breaks the stored thread.

Lone surrogates are ordinary Python text: ``os.listdir`` returns a non-UTF-8 file name as
``'report\\udcff.txt'`` (``surrogateescape``), and a JSON string may hold ``"\\udce9"``.
Both tests run through a real provider client (``langchain-openai`` against the loopback
server), because fixing the digest alone is not enough: the ``openai`` SDK encodes the
request body as strict UTF-8 and raises ``UnicodeEncodeError`` on the next request that
echoes the text. The loop must therefore make the text it records encodable.

Recommended repair: where text enters the transcript (tool results, a model's tool-call
arguments) a lone surrogate is written as the escape ``\\udcff`` (readable, nothing
silently dropped), once, before it is stored, so the request, the transcript and the
checkpoint agree (LangGraph's checkpoint serializer would otherwise store it as ``?``).
The tests assert what a user notices: the run completes, the call ran once, the model was
sent the text in a form it can read, and the thread goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from langgraph_loop import create_loop_agent
from tests.faults.support import assert_valid, thread
from tests.support.openai_server import OpenAIServer, text, tool_calls
from tests.support.savers import sync_saver

OPENED: list[str] = []


@tool
def list_files() -> str:
    """List the files of the working directory."""
    return "report\udcff.txt"


@tool
def open_file(name: str) -> str:
    """Open a file by name."""
    OPENED.append(name)
    return "opened"


def _llm(server: OpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("x"), model="m", max_retries=0)


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_a_lone_surrogate_in_a_tool_result_does_not_crash_the_run(
        openai_server: OpenAIServer, tmp_path: Path) -> None:
    """Today: ``UnicodeEncodeError`` in the result digest, again on every resume."""
    openai_server.script += [tool_calls([("list_files", {})]), text("One report."),
                             text("You're welcome.")]
    with sync_saver("sqlite", str(tmp_path / "threads.sqlite")) as saver:
        agent = create_loop_agent(_llm(openai_server), [list_files], checkpointer=saver)
        result = agent.invoke({"messages": [HumanMessage("what is here?")]}, thread("ls"))
        assert result["stop_reason"] == "completed"
        (sent,) = _tool_results(openai_server.requests[1])
        assert sent.startswith("report") and sent.endswith(".txt") and len(sent) > 10, sent
        again = agent.invoke({"messages": [HumanMessage("thanks")]}, thread("ls"))
    assert again["messages"][-1].content == "You're welcome."
    assert _tool_results(openai_server.requests[2]) == [sent]
    assert_valid(again["messages"])


def test_a_lone_surrogate_in_model_json_args_does_not_crash_the_run(
        openai_server: OpenAIServer, tmp_path: Path) -> None:
    """The provider's arguments ``{"name": "caf\\udce9.txt"}`` parse into a ``str`` holding a
    lone surrogate. Today: ``UnicodeEncodeError`` in the call signature, and the thread is
    left looking finished with the call unanswered. Fixed: the call runs once, the run
    completes, and the request echoing the call is sent."""
    OPENED.clear()
    openai_server.script += [tool_calls([("open_file", '{"name": "caf\\udce9.txt"}')]),
                             text("Opened it.")]
    with sync_saver("sqlite", str(tmp_path / "threads.sqlite")) as saver:
        agent = create_loop_agent(_llm(openai_server), [open_file], checkpointer=saver)
        result = agent.invoke({"messages": [HumanMessage("open the café file")]},
                              thread("args"))
        stored = agent.get_state(thread("args")).values["messages"]
    assert len(OPENED) == 1 and OPENED[0].startswith("caf") and OPENED[0].endswith(".txt")
    assert result["stop_reason"] == "completed"
    assert len(openai_server.requests) == 2 and _tool_results(openai_server.requests[1]) == [
        "opened"]
    assert [m.content for m in stored][-2:] == ["opened", "Opened it."]
    assert_valid(stored)


@tool
def store(data: list[Any]) -> str:
    """Store nested data."""
    inner: Any = data
    while isinstance(inner, list):
        inner = inner[0]
    OPENED.append(inner)
    return "stored"


def test_deeply_nested_model_args_with_or_without_a_lone_surrogate_run_once(
        openai_server: OpenAIServer) -> None:
    """Arguments nested deeper than a recursion looks (100 lists) are looked through by the
    walk: the call runs once either way, and the request echoing it is sent."""
    OPENED.clear()
    deep = "[" * 100 + '"caf\\udce9"' + "]" * 100
    plain = "[" * 100 + '"cafe"' + "]" * 100
    openai_server.script += [tool_calls([("store", f'{{"data": {deep}}}')]), text("Stored."),
                             tool_calls([("store", f'{{"data": {plain}}}')]), text("Stored too.")]
    agent = create_loop_agent(_llm(openai_server), [store])
    first = agent.invoke({"messages": [HumanMessage("store the odd one")]})
    second = agent.invoke({"messages": [HumanMessage("store the plain one")]})
    assert (first["stop_reason"], second["stop_reason"]) == ("completed", "completed")
    assert len(OPENED) == 2 and OPENED[0].startswith("caf") and OPENED[1] == "cafe"
    assert [len(openai_server.requests), _tool_results(openai_server.requests[1]),
            _tool_results(openai_server.requests[3])] == [4, ["stored"], ["stored"]]
    assert_valid(first["messages"]) and assert_valid(second["messages"])
