"""Issue 21, text: digests and signatures accept any ``str`` (lone surrogates included) and
any JSON value, so odd text in a tool result or in a model's tool-call arguments neither
crashes the run nor breaks the stored thread.

Lone surrogates are ordinary Python text: ``os.listdir`` returns a non-UTF-8 file name as
``'report\\udcff.txt'`` (``surrogateescape``), and a JSON string may hold ``"\\udce9"``.
The loop passes such text through unchanged (the model may need the exact name to open the
file again); how to put it on the wire is the provider client's business.

Not ours, so not asserted: LangGraph's checkpoint serializer (msgpack needs valid UTF-8)
stores a lone surrogate as ``?``, so a thread loaded back from a checkpoint holds
``'report?.txt'``.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.faults.support import assert_valid, texts, thread
from tests.support.openai_server import OpenAIServer, text, tool_calls
from tests.support.savers import sync_saver

ODD_NAME = "report\udcff.txt"
OPENED: list[str] = []


@tool
def list_files() -> str:
    """List the files of the working directory."""
    return ODD_NAME


@tool
def open_file(name: str) -> str:
    """Open a file by name."""
    OPENED.append(name)
    return "opened"


def test_a_lone_surrogate_in_a_tool_result_reaches_the_model_unchanged(
        tmp_path: Path, scripted: list[ScriptedChatModel]) -> None:
    """The run completes (today: ``UnicodeEncodeError`` in the result digest, and again on
    every resume); the model sees the exact name; the thread, stored in SQLite, goes on
    (loaded back, it holds the name as LangGraph's serializer stored it)."""
    model = ScriptedChatModel(script=[[("list_files", {})], "one file", "you're welcome"])
    scripted.append(model)
    with sync_saver("sqlite", str(tmp_path / "threads.sqlite")) as saver:
        agent = create_loop_agent(model, [list_files], checkpointer=saver)
        result = agent.invoke({"messages": [HumanMessage("what is here?")]}, thread("ls"))
        assert result["stop_reason"] == "completed"
        answer = model.requests[1][-1]
        assert isinstance(answer, ToolMessage) and answer.content == ODD_NAME
        again = agent.invoke({"messages": [HumanMessage("thanks")]}, thread("ls"))
    stored_name = texts(again["messages"])[2]
    assert stored_name in (ODD_NAME, "report?.txt"), stored_name
    assert texts(again["messages"]) == ["what is here?", "", stored_name, "one file", "thanks",
                                        "you're welcome"]
    assert_valid(again["messages"])


def test_a_lone_surrogate_in_model_json_args_reaches_the_tool_unchanged(
        openai_server: OpenAIServer, tmp_path: Path) -> None:
    """A real provider client (``langchain-openai`` against the loopback server) parses
    ``{"name": "caf\\udce9.txt"}`` into a ``str`` holding a lone surrogate. The run completes
    (today: ``UnicodeEncodeError`` in the call signature, and the thread is left looking
    finished with the call unanswered), and the tool gets the name as the model wrote it."""
    OPENED.clear()
    openai_server.script += [tool_calls([("open_file", '{"name": "caf\\udce9.txt"}')]),
                             text("Opened it.")]
    llm = ChatOpenAI(base_url=openai_server.base_url, api_key=SecretStr("x"), model="m",
                     max_retries=0)
    with sync_saver("sqlite", str(tmp_path / "threads.sqlite")) as saver:
        agent = create_loop_agent(llm, [open_file], checkpointer=saver)
        result = agent.invoke({"messages": [HumanMessage("open the café file")]},
                              thread("args"))
        stored = agent.get_state(thread("args")).values["messages"]
    assert OPENED == ["caf\udce9.txt"]
    assert result["stop_reason"] == "completed"
    assert texts(stored)[-2:] == ["opened", "Opened it."]
    assert_valid(stored)
