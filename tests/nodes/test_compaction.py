"""Compaction: old messages replaced in state by one summary before a too-large request."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Overwrite

from langgraph_loop import Compaction, StopReason, create_loop_agent
from langgraph_loop.engine.limits import count_tokens
from langgraph_loop.nodes.compaction import (
    SUMMARY_NAME,
    compaction_writes,
    plan_compaction,
    render,
    summary_message,
)
from langgraph_loop.scripted import ScriptedChatModel

# ---------------------------------------------------------------- pure decisions


def _ai(call_id: str, mid: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "search", "args": {"q": call_id}, "id": call_id}], id=mid)


def _tool(call_id: str, mid: str) -> ToolMessage:
    return ToolMessage(f"result {call_id}", tool_call_id=call_id, id=mid)


TRANSCRIPT: list[BaseMessage] = [
    SystemMessage("stored system", id="s"),
    HumanMessage("earlier question", id="h0"),
    AIMessage("earlier answer", id="a0"),
    HumanMessage("the task", id="h1"),
    _ai("c1", "a1"), _tool("c1", "t1"),
    _ai("c2", "a2"), _tool("c2", "t2"),
]


def test_plan_keeps_system_request_and_tail() -> None:
    split = plan_compaction(TRANSCRIPT, keep_last=2, keep_ids={"h1"})
    assert split is not None
    assert [m.id for m in split.head] == ["s", "h1"]
    assert [m.id for m in split.old] == ["h0", "a0", "a1", "t1"]
    assert [m.id for m in split.tail] == ["a2", "t2"]


def test_plan_never_separates_an_ai_message_from_its_tool_messages() -> None:
    parallel = AIMessage("", tool_calls=[{"name": "s", "args": {}, "id": "x1"},
                                         {"name": "s", "args": {}, "id": "x2"}], id="ap")
    messages = [*TRANSCRIPT, parallel, _tool("x1", "tx1"), _tool("x2", "tx2")]
    split = plan_compaction(messages, keep_last=1, keep_ids={"h1"})
    assert split is not None
    assert [m.id for m in split.tail] == ["ap", "tx1", "tx2"]
    assert split.old[-1].id == "t2"


def test_plan_with_nothing_old_is_none() -> None:
    assert plan_compaction(TRANSCRIPT[:4], keep_last=3, keep_ids={"h1"}) is None
    assert plan_compaction(TRANSCRIPT, keep_last=20) is None


def test_writes_leave_head_summary_tail_in_the_channel() -> None:
    split = plan_compaction(TRANSCRIPT, keep_last=2, keep_ids={"h1"})
    assert split is not None
    summary = summary_message("they searched c1", len(split.old))
    summary.id = "sum"
    write = compaction_writes(split, summary)
    assert isinstance(write, Overwrite)  # stored as a snapshot: a load replays none of the old
    after = write.value
    assert [m.id for m in after] == ["s", "h1", "sum", "a2", "t2"]
    assert after[2].name == SUMMARY_NAME
    assert after[2].additional_kwargs["langgraph_loop"] == {"kind": "summary", "replaced": 4}


def test_render_shows_tool_calls() -> None:
    text = render(TRANSCRIPT[4:6])
    assert text == '[ai] [tool calls] search({"q": "c1"})\n\n[tool] result c1'


class Counting(ScriptedChatModel):
    """A scripted model with its own token counter."""

    tokens: int = 0
    broken: bool = False

    def get_num_tokens_from_messages(self, messages: list[BaseMessage],
                                     tools: Any = None) -> int:
        if self.broken:
            raise RuntimeError("tokenizer not available offline")
        return self.tokens


def test_count_tokens_prefers_the_models_counter() -> None:
    messages = [HumanMessage("x" * 400)]
    assert count_tokens(Counting(tokens=7), messages) == 7
    approx = count_tokens(ScriptedChatModel(), messages)
    assert approx > 100
    assert count_tokens(Counting(tokens=7, broken=True), messages) == approx


# ---------------------------------------------------------------- end to end


@tool
def search(q: str) -> str:
    """Search the web."""
    return f"result for {q}: " + "lorem ipsum dolor " * 30


class Tags(BaseCallbackHandler):
    """Records the tags of every chat model call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            tags: list[str] | None = None, **kwargs: Any) -> None:
        self.calls.append(list(tags or []))


SEARCHES = [[("search", {"q": f"q{i}"})] for i in range(4)]


def _types(request: list[BaseMessage]) -> list[str]:
    return [m.type + (f":{m.name}" if m.name else "") for m in request]


def test_compaction_replaces_old_messages_with_one_summary(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[*SEARCHES, "Found it."])
    summarizer = ScriptedChatModel(default="They searched q0 to q2; q2 had the answer.")
    scripted += [model, summarizer]
    agent = create_loop_agent(model, [search], system_prompt="Be thorough.",
                              compaction=Compaction(max_tokens=450, keep_last=2,
                                                    summarizer=summarizer))
    tags = Tags()
    result = agent.invoke({"messages": [HumanMessage("Find the answer.", id="req")]},
                          {"callbacks": [tags]})
    assert result["stop_reason"] == StopReason.COMPLETED
    sizes = [len(r) for r in model.requests]
    assert sizes == [2, 4, 6, 5, 7]  # without compaction: [2, 4, 6, 8, 10]
    compacted = next(r for r in model.requests if any(m.name == SUMMARY_NAME for m in r))
    assert _types(compacted) == ["system", "human", f"human:{SUMMARY_NAME}", "ai", "tool:search"]
    assert compacted[1].content == "Find the answer."
    assert "q2 had the answer" in compacted[2].content
    summary_request = summarizer.requests[0]
    assert summary_request[0].type == "system" and "[tool calls] search" in summary_request[1].content
    assert "Find the answer." not in summary_request[1].content  # the request is kept, not summarized
    assert [t for t in tags.calls if "compaction" in t] and len(tags.calls) == model.calls + summarizer.calls
    assert result["iterations"][0]["compacted"] == 4  # two searches and their results
    assert _types(result["messages"]) == ["human", f"human:{SUMMARY_NAME}", "ai", "tool:search",
                                          "ai", "tool:search", "ai"]
    assert result["messages"][1].additional_kwargs["langgraph_loop"] == {"kind": "summary", "replaced": 4}


def test_no_compaction_under_the_limit(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[*SEARCHES, "Found it."])
    scripted.append(model)
    agent = create_loop_agent(model, [search], compaction=Compaction(max_tokens=100_000))
    result = agent.invoke({"messages": [HumanMessage("Find the answer.")]})
    assert [len(r) for r in model.requests] == [1, 3, 5, 7, 9]
    assert result["iterations"][0]["compacted"] == 0


def test_default_summarizer_is_the_agents_model(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[*SEARCHES, "Found it."], no_tools_reply="SUMMARY")
    scripted.append(model)
    agent = create_loop_agent(model, [search], compaction=Compaction(max_tokens=500, keep_last=2))
    result = agent.invoke({"messages": [HumanMessage("Find the answer.")]})
    summary_calls = [i for i, tools in enumerate(model.request_tools) if not tools]
    assert summary_calls and all("Conversation to summarize" in model.requests[i][-1].content
                                 for i in summary_calls)
    assert result["messages"][1].content.endswith("SUMMARY")
    assert result["stop_reason"] == StopReason.COMPLETED


def test_the_models_token_counter_decides(scripted: list[ScriptedChatModel]) -> None:
    model = Counting(script=["short answer"], tokens=10_000, no_tools_reply="S")
    scripted.append(model)
    agent = create_loop_agent(model, [search], compaction=Compaction(max_tokens=5_000, keep_last=1))
    thread = {"configurable": {"thread_id": "t"}}
    saver_agent = create_loop_agent(model, [search], checkpointer=InMemorySaver(),
                                    compaction=Compaction(max_tokens=5_000, keep_last=1))
    saver_agent.invoke({"messages": [HumanMessage("one")]}, thread)
    model.script.append("second answer")
    result = saver_agent.invoke({"messages": [HumanMessage("two")]}, thread)
    assert _types(result["messages"]) == [f"human:{SUMMARY_NAME}", "human", "ai"]
    assert result["messages"][1].content == "two"  # this run's request is kept
    assert result["iterations"][0]["compacted"] == 2  # the first run's question and answer
    model.tokens = 10
    model.script.append("third answer")
    assert agent.invoke({"messages": [HumanMessage("x")]})["iterations"][0]["compacted"] == 0


async def test_async_compaction_persists_and_thread_goes_on(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[*SEARCHES, "Found it.", [("search", {"q": "more"})], "Again."],
                              no_tools_reply="SUMMARY")
    scripted.append(model)
    agent = create_loop_agent(model, [search], checkpointer=InMemorySaver(),
                              compaction=Compaction(max_tokens=600, keep_last=3))
    cfg = {"configurable": {"thread_id": "a"}}
    first = await agent.ainvoke({"messages": [HumanMessage("Find the answer.")]}, cfg)
    stored = (await agent.aget_state(cfg)).values["messages"]
    assert stored == first["messages"] and any(m.name == SUMMARY_NAME for m in stored)
    second = await agent.ainvoke({"messages": [HumanMessage("And more?")]}, cfg)
    assert second["stop_reason"] == StopReason.COMPLETED
    assert second["messages"][-1].content == "Again."


@pytest.mark.parametrize("keep_last", [1, 2, 3, 4])
def test_every_compacted_request_is_provider_valid(scripted: list[ScriptedChatModel],
                                                   keep_last: int) -> None:
    parallel = [("search", {"q": "a"}), ("search", {"q": "b"}), ("search", {"q": "c"})]
    model = ScriptedChatModel(script=[parallel, *SEARCHES, parallel, "Done."],
                              no_tools_reply="SUMMARY")
    scripted.append(model)
    agent = create_loop_agent(model, [search], loop_detection=None,
                              compaction=Compaction(max_tokens=700, keep_last=keep_last))
    result = agent.invoke({"messages": [HumanMessage("Find the answer.")]})
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["iterations"][0]["compacted"] > 0


def test_demo_shows_a_compaction() -> None:
    import io

    from rich.console import Console

    from langgraph_loop.app.demos.approval import compaction

    out = io.StringIO()
    state = compaction(Console(file=out, width=200), InMemorySaver())
    assert f"[{SUMMARY_NAME}] Summary of the earlier conversation" in out.getvalue()
    assert state["iterations"][0]["compacted"] > 0
    assert state["stop_reason"] == StopReason.COMPLETED
