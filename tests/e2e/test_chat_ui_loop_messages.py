"""The loop's own user-role messages in a chat UI: the continuation that starts the next pass
and the summary that replaces compacted history get ids Agent Chat UI does not render
(``do-not-render-``), like the notices (``tests/e2e/test_chat_ui.py``); the model still reads
them; ``show_notices=True`` gives them ids a UI renders. (``create_agent`` has no passes, and
its ``SummarizationMiddleware`` is LangChain's: this is the graph's front door only.)"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from langgraph_loop import Compaction, Iterations, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel

HIDDEN = "do-not-render-"


@tool
def search(query: str) -> str:
    """Search the docs."""
    return f"results for {query}: " + "a long page of results " * 20


def researching(messages: list[BaseMessage]) -> Any:
    """Search, then answer once the result is back."""
    if isinstance(messages[-1], ToolMessage):
        return f"Draft {len(messages)}."
    return [("search", {"query": f"topic {len(messages)}"})]


CONTINUATIONS = {"default": None, "callback": lambda state, feedback: "Now add the sources.",
                 "resend": lambda state, feedback: None}


def run(scripted: list[ScriptedChatModel], continuation: Any, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    model = ScriptedChatModel(default=researching)
    summarizer = ScriptedChatModel(default=lambda messages: "They searched two topics.")
    scripted.append(model)
    agent = create_loop_agent(model, [search], compaction=Compaction(
        max_tokens=400, keep_last=3, summarizer=summarizer), iterations=Iterations(
        max=3, should_continue=lambda state: True, continuation=continuation), **kwargs)
    return agent.invoke({"messages": [HumanMessage("research the topic", id="typed")]}), model


@pytest.mark.parametrize("continuation", CONTINUATIONS.values(), ids=CONTINUATIONS.keys())
def test_continuations_and_summaries_are_not_rendered_and_the_model_reads_them(
        scripted: list[ScriptedChatModel], continuation: Any) -> None:
    out, model = run(scripted, continuation)
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS
    written = [m for m in out["messages"] if m.name in ("loop_continue", "loop_summary")]
    assert {m.name for m in written} == {"loop_continue", "loop_summary"}
    assert all(str(m.id).startswith(HIDDEN) for m in written)
    sent = {m.id for request in model.requests for m in request}
    assert {m.id for m in written} <= sent
    rendered = [m for m in out["messages"] if m.type == "human" and not str(m.id).startswith(HIDDEN)]
    assert [m.id for m in rendered] == ["typed"]


def test_show_notices_renders_them(scripted: list[ScriptedChatModel]) -> None:
    out, _ = run(scripted, None, show_notices=True)
    written = [m for m in out["messages"] if m.name in ("loop_continue", "loop_summary")]
    assert {m.name for m in written} == {"loop_continue", "loop_summary"}
    assert not any(str(m.id).startswith(HIDDEN) for m in written)
