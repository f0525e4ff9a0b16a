"""Security: gated tools never run without a decision; API keys never leave the model client.

- A gated call runs only with its own approve/edit decision: not through an edit that
  renames it to another gated tool (refused, tested in ``test_approval.py``), not
  through an edit to a tool the tool filter hides, not when the gated tool itself is
  filtered out, and not because a resolver that handed over to a human changes its
  mind when the run resumes.
- The API key of a real ``langchain_openai.ChatOpenAI`` client (talking to a loopback
  OpenAI-compatible server) reaches the server, and nothing else: not the checkpoints
  (SQLite file bytes and every stored value), not the logs (DEBUG, every logger), not
  any stream mode, not ``astream_events``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from pydantic import SecretStr

from langgraph_loop import Approval, Hooks, LoopDetection, Repeat, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.openai_server import OpenAIServer, text, tool_calls

SECRET = "sk-langgraph-loop-TEST-9f8e7d6c5b4a3210"
RAN: list[str] = []


@tool
def deploy(env: str) -> str:
    """Deploy to an environment (gated)."""
    RAN.append(f"deploy {env}")
    return f"deployed to {env}"


@tool
def shell(cmd: str) -> str:
    """Run a shell command (ungated, but hidden by the tool filter)."""
    RAN.append(f"shell {cmd}")
    return "ok"


@tool
def status() -> str:
    """Read the status."""
    RAN.append("status")
    return "green"


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _no_shell(state: Any, tools: list[Any]) -> list[Any]:
    return [t for t in tools if t.name != "shell"]


def test_edit_into_a_filtered_out_tool_does_not_run_it(scripted: list[ScriptedChatModel]) -> None:
    RAN.clear()
    model = ScriptedChatModel(script=[[("deploy", {"env": "prod"})], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [deploy, shell, status], hooks=Hooks(tool_filter=_no_shell),
                              approval=Approval(tools=["deploy"]), checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("ship it")]}, _cfg("edit-filtered"))
    edit = {"type": "edit", "edited_action": {"name": "shell", "args": {"cmd": "rm -rf /"}}}
    result = agent.invoke(Command(resume={"decisions": [edit]}), _cfg("edit-filtered"))
    assert RAN == []
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error" and "'shell' is not available" in str(answer.content)
    assert model.request_tools[0] == ["deploy", "status"]
    assert result["stop_reason"] == "completed"


def test_filtered_out_gated_tool_does_not_run_even_when_approved(
        scripted: list[ScriptedChatModel]) -> None:
    RAN.clear()
    model = ScriptedChatModel(script=[[("deploy", {"env": "prod"}), ("status", {})], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [deploy, status], approval=Approval(tools=["deploy"]),
                              hooks=Hooks(tool_filter=lambda s, tools: [t for t in tools
                                                                        if t.name == "status"]),
                              checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("ship it")]}, _cfg("gated-filtered"))
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}),
                          _cfg("gated-filtered"))
    assert RAN == ["status"]
    refused = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.name for m in refused] == ["deploy"]


@pytest.mark.parametrize("second_opinion", ["approve", "edit"])
def test_resolver_that_handed_over_is_not_asked_again_on_resume(
        scripted: list[ScriptedChatModel], second_opinion: str) -> None:
    """The resolver hands the decision to a human; the human rejects. On resume the
    resolver is not asked again, so its new answer cannot replace the human's."""
    RAN.clear()
    asked: list[int] = []

    def resolver(request: dict[str, Any]) -> dict[str, Any] | None:
        asked.append(len(request["action_requests"]))
        if len(asked) == 1:
            return None  # "a human should decide this one"
        decision: dict[str, Any] = {"type": "approve"}
        if second_opinion == "edit":
            decision = {"type": "edit", "edited_action": {"name": "deploy", "args": {"env": "dev"}}}
        return {"decisions": [decision]}

    model = ScriptedChatModel(script=[[("deploy", {"env": "prod"})], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [deploy], checkpointer=InMemorySaver(),
                              approval=Approval(tools=["deploy"], resolver=resolver))
    paused = agent.invoke({"messages": [HumanMessage("ship it")]}, _cfg("handover"))
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "deploy"
    reject = {"type": "reject", "message": "not on a Friday"}
    result = agent.invoke(Command(resume={"decisions": [reject]}), _cfg("handover"))
    assert RAN == [] and asked == [1]
    answer = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "not on a Friday" in str(answer.content)


# --- API keys ------------------------------------------------------------------------------

@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    script = [tool_calls([("status", {})]), tool_calls([("status", {})]),
              tool_calls([("status", {})]), text("All green.")]
    with OpenAIServer(script) as srv:
        yield srv


def _stored_bytes(path: Path) -> bytes:
    """Every byte of every row the SQLite checkpointer wrote."""
    out = bytearray()
    with sqlite3.connect(path) as conn:
        for table in ("checkpoints", "writes"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                for value in row:
                    out += value if isinstance(value, bytes) else str(value).encode()
    return bytes(out)


def test_api_key_reaches_the_provider_and_nothing_else(
        server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    RAN.clear()
    llm = ChatOpenAI(base_url=server.base_url, api_key=SecretStr(SECRET), model="m",
                     max_retries=0)
    db = tmp_path / "threads.sqlite"
    caplog.set_level(logging.DEBUG)
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        agent = create_loop_agent(llm, [status], checkpointer=SqliteSaver(conn),
                                  loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)))
        events = list(agent.stream({"messages": [HumanMessage("status?")]}, _cfg("keys"),
                                   stream_mode=["values", "updates", "messages", "custom",
                                                "debug", "tasks", "checkpoints"]))
        state = agent.get_state(_cfg("keys"))
        history = list(agent.get_state_history(_cfg("keys")))
    finally:
        conn.close()
    assert state.values["stop_reason"] == "completed" and RAN == ["status"] * 3
    assert any(h.get("authorization") == f"Bearer {SECRET}" for h in server.headers)
    seen = repr(events) + repr(state) + repr(history)
    assert "loop_warning" in seen  # the run really streamed warnings, values and checkpoints
    assert SECRET not in seen
    assert SECRET.encode() not in db.read_bytes() + _stored_bytes(db)
    assert caplog.records and SECRET not in caplog.text


async def test_api_key_stays_out_of_astream_events(server: OpenAIServer) -> None:
    llm = ChatOpenAI(base_url=server.base_url, api_key=SecretStr(SECRET), model="m",
                     max_retries=0)
    agent = create_loop_agent(llm, [status], checkpointer=InMemorySaver())
    events = [e async for e in agent.astream_events({"messages": [HumanMessage("status?")]},
                                                    _cfg("events"), version="v2")]
    assert any(e["event"] == "on_chat_model_start" for e in events)
    assert SECRET not in repr(events)
