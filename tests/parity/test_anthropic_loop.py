"""The whole loop with ``ChatAnthropic`` against the loopback Anthropic server, which rejects
(HTTP 400) every request the real API would reject; the ``anthropic_server`` fixture fails the
test if any request was rejected (issue 20, item 5)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import (
    Approval,
    Compaction,
    Iterations,
    Limits,
    LoopDetection,
    Repeat,
    StopReason,
    create_loop_agent,
)
from tests.support.anthropic_server import JSON, AnthropicServer, Reply, text, tool_use

ASK = {"messages": [HumanMessage("Find out about the weather.")]}
FINAL = "Here is my final answer."


@tool
def search(query: str) -> str:
    """Search the web."""
    time.sleep(0.02)
    return f"results for {query}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def claude(server: AnthropicServer) -> ChatAnthropic:
    return ChatAnthropic(model="claude-test", base_url=server.base_url, api_key="test",  # type: ignore[call-arg]
                         max_retries=0)


def is_final_call(body: JSON) -> bool:
    """A request that may not use tools: ``tool_choice`` none, or no tools at all."""
    return body.get("tool_choice") == {"type": "none"} or not body.get("tools")


def agent_script(call: Callable[[], tuple[str, dict[str, Any]]]) -> Callable[[JSON], Reply]:
    """Answer a final-answer call with text, any other call with one tool call from ``call``."""
    return lambda body: text(FINAL) if is_final_call(body) else tool_use([call()])


def same_search() -> tuple[str, dict[str, Any]]:
    return ("search", {"query": "weather"})


def fresh_searches() -> Callable[[], tuple[str, dict[str, Any]]]:
    counter = itertools.count()
    return lambda: ("search", {"query": f"weather {next(counter)}"})


def user_turns(body: JSON) -> list[list[JSON]]:
    """The request's user turns, merged as the API merges them, as lists of blocks."""
    turns: list[list[JSON]] = []
    previous = None
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if message["role"] == "user":
            if previous == "user":
                turns[-1].extend(blocks)
            else:
                turns.append(blocks)
        previous = message["role"]
    return turns


# --------------------------------------------------------------------------- a normal run


def test_tool_round(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script += [tool_use([("search", {"query": "paris"})]), text("Sunny in Paris.")]
    result = create_loop_agent(claude(anthropic_server), [search]).invoke(ASK)
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["messages"][-1].content == "Sunny in Paris."
    assert len(anthropic_server.requests) == 2
    assert user_turns(anthropic_server.requests[1])[-1][0]["type"] == "tool_result"


def test_tool_round_streamed(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script += [tool_use([("search", {"query": "paris"})]), text("Sunny in Paris.")]
    agent = create_loop_agent(claude(anthropic_server), [search])
    tokens = [chunk.content for chunk, _ in agent.stream(ASK, stream_mode="messages")]
    assert tokens
    assert all(body.get("stream") for body in anthropic_server.requests)


# --------------------------------------------------------------------------- loop warning


def test_loop_warning_sits_after_the_tool_results(anthropic_server: AnthropicServer) -> None:
    """A repeated call draws a warning; the model sees it after the tool results of its turn
    (``tool_result`` blocks first, as Anthropic requires)."""
    anthropic_server.script += [tool_use([same_search()])] * 3 + [text("I will stop repeating.")]
    agent = create_loop_agent(claude(anthropic_server), [search],
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2)))
    result = agent.invoke(ASK)
    warnings = [m for m in result["messages"] if m.type == "human" and m.name == "loop_notice"]
    assert warnings, "no loop warning was given"
    warned = [body for body in anthropic_server.requests
              if any(b.get("type") == "text" and str(warnings[0].content)[:30] in b.get("text", "")
                     for b in user_turns(body)[-1])]
    assert warned, "the warning never reached the model"
    last_turn = user_turns(warned[0])[-1]
    assert last_turn[0]["type"] == "tool_result"
    assert last_turn[-1]["type"] == "text"


# --------------------------------------------------------------------------- stops with a final answer


STOPS: dict[str, tuple[Callable[[], tuple[str, dict[str, Any]]] | None, dict[str, Any], dict[str, Any]]] = {
    # stop reason: (call maker (None = a fresh search each time), builder kwargs, run config)
    StopReason.LOOP_DETECTED: (same_search, {}, {}),
    StopReason.MAX_MODEL_CALLS: (None, {"iterations": Iterations(max_model_calls=3)}, {}),
    StopReason.MAX_TOOL_CALLS: (None, {"limits": Limits(max_tool_calls=2)}, {}),
    StopReason.TOKEN_BUDGET: (None, {"limits": Limits(token_budget=400)}, {}),
    StopReason.TIMEOUT: (None, {"limits": Limits(max_duration_s=0.2)}, {}),
    StopReason.STEP_LIMIT: (None, {}, {"recursion_limit": 8}),
}


@pytest.mark.parametrize("reason", sorted(STOPS))
def test_stop_then_final_answer_keeps_tools_defined(anthropic_server: AnthropicServer, reason: str) -> None:
    """After a stop that leaves tool calls behind, the final-answer call still defines the tools
    (the history holds tool_use/tool_result blocks) and forbids their use with
    ``tool_choice: {"type": "none"}``."""
    maker, kwargs, config = STOPS[reason]
    anthropic_server.default = agent_script(maker or fresh_searches())
    result = create_loop_agent(claude(anthropic_server), [search], **kwargs).invoke(ASK, config or None)
    assert result["stop_reason"] == reason
    assert result["messages"][-1].content == FINAL
    final = anthropic_server.requests[-1]
    assert final.get("tools"), "the final-answer call must keep the tools defined"
    assert final.get("tool_choice") == {"type": "none"}
    assert any(b.get("type") == "tool_result" for turn in user_turns(final) for b in turn)


# --------------------------------------------------------------------------- approval


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_approval_interrupt_and_resume(anthropic_server: AnthropicServer, decision: str) -> None:
    anthropic_server.script += [tool_use([("send_email", {"to": "ada@example.com", "body": "hi"})]),
                                text("Done.")]
    agent = create_loop_agent(claude(anthropic_server), [send_email], approval=Approval(tools=["send_email"]),
                              checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke(ASK, config)
    [request] = paused["__interrupt__"]
    assert request.value["action_requests"][0]["name"] == "send_email"
    answer = {"type": "approve"} if decision == "approve" else {"type": "reject", "message": "not now"}
    result = agent.invoke(Command(resume={"decisions": [answer]}), config)
    assert result["messages"][-1].content == "Done."
    [result_block] = [b for b in user_turns(anthropic_server.requests[-1])[-1] if b["type"] == "tool_result"]
    assert bool(result_block.get("is_error")) is (decision == "reject")
    # the thread stays valid for the next user turn
    anthropic_server.script.append(text("You're welcome."))
    after = agent.invoke({"messages": [HumanMessage("thanks")]}, config)
    assert after["messages"][-1].content == "You're welcome."


# --------------------------------------------------------------------------- compaction


def test_compaction_keeps_requests_valid(anthropic_server: AnthropicServer) -> None:
    """Compaction summarises old messages (with the agent's model) without splitting a tool_use
    from its tool_result, and the summary request itself is valid."""
    searches = fresh_searches()
    rounds = itertools.count()

    def reply(body: JSON) -> Reply:
        if not body.get("tools") or body.get("tool_choice") == {"type": "none"}:
            return text("Summary: searched the weather several times.")
        return tool_use([searches()]) if next(rounds) < 6 else text(FINAL)

    anthropic_server.default = reply
    agent = create_loop_agent(claude(anthropic_server), [search], loop_detection=None,
                              compaction=Compaction(max_tokens=100, keep_last=3))
    result = agent.invoke(ASK)
    assert result["messages"][-1].content == FINAL
    assert any("Summary:" in str(m.content) for m in result["messages"]), "compaction never ran"
