"""The edges of the message contract (issue 31.7), each through the public API on SQLite:
a removal of an id the thread does not hold, a removal that would orphan tool results, a
continuation that answers None, a final answer that only asks for tools, and langchain-openai's
tool-schema counting warning."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import SecretStr

from langgraph_loop import Compaction, Iterations, Limits, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread, thread
from tests.support.openai_server import OpenAIServer, text, tool_calls


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as s:
        yield s


def _one_round(saver: SqliteSaver, model: ScriptedChatModel, tid: str) -> Any:
    agent = create_loop_agent(model, [add], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("1+2?", id="h1")]}, thread(tid))
    return agent


def test_update_state_removing_an_unknown_id_is_refused_as_add_messages_does(
        saver: SqliteSaver) -> None:
    agent = _one_round(saver, ScriptedChatModel(script=["3"]), "rm-unknown")
    before = agent.get_state(thread("rm-unknown")).values["messages"]
    with pytest.raises(ValueError, match=r"delete a message with an ID that doesn't exist \('no-such-id'\)"):
        agent.update_state(thread("rm-unknown"), {"messages": [RemoveMessage(id="no-such-id")]})
    assert agent.get_state(thread("rm-unknown")).values["messages"] == before  # nothing written


async def test_aupdate_state_removing_an_unknown_id_is_refused(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        agent = create_loop_agent(ScriptedChatModel(script=["3"]), [add], checkpointer=saver)
        await agent.ainvoke({"messages": [HumanMessage("1+2?")]}, thread("rm-unknown-async"))
        with pytest.raises(ValueError, match="doesn't exist"):
            await agent.aupdate_state(thread("rm-unknown-async"),
                                      {"messages": [RemoveMessage(id="x")]})


def test_removing_the_ai_message_that_made_a_call_takes_its_results_too(saver: SqliteSaver) -> None:
    """Its ToolMessages would answer no call: the model would get an orphan tool result."""
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], "3", "Hello again."])
    agent = _one_round(saver, model, "rm-ai")
    messages = agent.get_state(thread("rm-ai")).values["messages"]
    call = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    agent.update_state(thread("rm-ai"), {"messages": [RemoveMessage(id=str(call.id))]})
    stored = agent.get_state(thread("rm-ai")).values["messages"]
    assert not any(isinstance(m, ToolMessage) for m in stored)
    assert_valid_thread(stored)
    agent.invoke({"messages": [HumanMessage("hi")]}, thread("rm-ai"))
    assert [m.type for m in model.requests[-1]] == ["human", "ai", "human"]


def test_removing_it_through_invoke_takes_its_results_too(saver: SqliteSaver) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], "3", "Hello again."])
    agent = _one_round(saver, model, "rm-ai-invoke")
    messages = agent.get_state(thread("rm-ai-invoke")).values["messages"]
    call = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    agent.invoke({"messages": [RemoveMessage(id=str(call.id)), HumanMessage("hi")]},
                 thread("rm-ai-invoke"))
    assert [m.type for m in model.requests[-1]] == ["human", "ai", "human"]


def test_a_continuation_that_answers_none_never_sends_the_text_none(saver: SqliteSaver) -> None:
    model = ScriptedChatModel(script=["draft", "final"])
    agent = create_loop_agent(model, [add], checkpointer=saver, iterations=Iterations(
        max=2, should_continue=lambda s: True, continuation=lambda state, feedback: None))
    agent.invoke({"messages": [HumanMessage("Write a haiku.")]}, thread("continuation"))
    sent = [str(m.content) for m in model.requests[-1]]
    assert "None" not in sent
    assert sent[-1] == "Write a haiku."  # None: the previous iteration's input again


def test_a_final_answer_that_only_asks_for_tools_still_ends_on_text(saver: SqliteSaver) -> None:
    repeat = [("add", {"a": 1, "b": 1})]
    model = ScriptedChatModel(script=[repeat] * 5)  # the final answer asks for add again
    agent = create_loop_agent(model, [add], checkpointer=saver)
    state = agent.invoke({"messages": [HumanMessage("1+1?")]}, thread("final-calls"))
    assert state["stop_reason"] == StopReason.LOOP_DETECTED
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert "loop_detected" in str(last.content) and "add" in str(last.content)
    assert_valid_thread(state["messages"])


def test_chatopenai_with_compaction_prints_no_tool_schema_warning(
        openai_server: OpenAIServer) -> None:
    """Our counter never hands langchain-openai tools it would only warn about."""
    openai_server.script += [tool_calls([("add", {"a": i, "b": 1})]) for i in range(3)]
    openai_server.script += [text("A summary."), text("Done.")]
    model = ChatOpenAI(base_url=openai_server.base_url, api_key=SecretStr("t"), model="gpt-4o-mini",
                       max_retries=0)
    agent = create_loop_agent(model, [add], limits=Limits(token_budget=100_000),
                              compaction=Compaction(max_tokens=150, keep_last=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = agent.invoke({"messages": [HumanMessage("add " + "please " * 30)]})
    assert state["iterations"][0]["compacted"] > 0
    assert [str(w.message) for w in caught if "tool schemas" in str(w.message)] == []
