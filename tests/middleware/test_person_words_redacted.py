"""Issue 43.3: a person's words pass through the ``before_model`` hooks, so LangChain's
``PIIMiddleware`` redacts them as it redacts a user's message: the model never reads the address
and the thread keeps the redacted text. ``create_loop_agent(middleware=[PIIMiddleware(...)])``:
a budget check-in's redirect and a loop question's hint; ``create_agent`` with
``LoopDetectionMiddleware(ask_human=True)`` listed after (and before) ``PIIMiddleware``: the hint."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import PIIMiddleware
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Limits, LoopDetection, create_loop_agent
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens, researcher

ADDRESS = "jane.doe@example.com"
REDACTED = "[REDACTED_EMAIL]"


@tool
def research(query: str) -> str:
    """Research a query."""
    return f"results for {query}: " + "lorem ipsum " * 60


@tool
def status(job: str) -> str:
    """The status of a build job."""
    return f"{job}: pending"


def poller() -> ScriptedChatModel:
    """Polls the same status until a hint tells it where to look."""
    def script(messages: list[BaseMessage]) -> Any:
        if any("Ask" in str(m.content) for m in messages if m.type == "human"):
            return "I asked them."
        return [("status", {"job": "build"})]
    return ScriptedChatModel(default=script, no_tools_reply="final")


def pii() -> PIIMiddleware:
    return PIIMiddleware("email", strategy="redact", apply_to_input=True)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def person_words(messages: list[BaseMessage], marker: str) -> list[str]:
    """The texts of the human messages holding ``marker``."""
    return [str(m.content) for m in messages if m.type == "human" and marker in str(m.content)]


def assert_redacted(model: ScriptedChatModel, messages: list[BaseMessage], marker: str) -> None:
    """No request the model got holds the address; the person's words reached it redacted,
    after the tool results; the thread keeps the redacted text."""
    assert not any(ADDRESS in str(m.content) for request in model.requests for m in request)
    last = model.requests[-1]
    assert REDACTED in str(last[-1].content) and marker in str(last[-1].content)
    assert last[-2].type == "tool"  # the pairing holds: the words come after the results
    (kept,) = person_words(messages, marker)
    assert REDACTED in kept and ADDRESS not in kept


REDIRECT = f"Please wrap up now and mail it to {ADDRESS}."
HINT = {"decisions": [{"type": "edit", "edited_action": {
    "name": "Loop detected: status", "args": {"hint": f"Ask {ADDRESS} for the build log."}}}]}


def test_loop_agent_redacts_a_budget_redirect() -> None:
    model = researcher()
    agent = create_loop_agent(model, [research], checkpointer=InMemorySaver(), middleware=[pii()],
                              limits=Limits(token_budget=3000, budget_check_in=True))
    config = thread()
    assert agent.invoke({"messages": [HumanMessage("research this")]}, config)["__interrupt__"]
    done = agent.invoke(Command(resume=add_tokens(2000, REDIRECT)), config)
    assert done["messages"][-1].content == "Summary sent."
    assert_redacted(model, agent.get_state(config).values["messages"], "wrap up")


def test_loop_agent_redacts_a_loop_hint() -> None:
    model = poller()
    agent = create_loop_agent(model, [status], checkpointer=InMemorySaver(), middleware=[pii()],
                              loop_detection=LoopDetection(ask_human=True))
    config = thread()
    assert agent.invoke({"messages": [HumanMessage("is the build done?")]}, config)["__interrupt__"]
    done = agent.invoke(Command(resume=HINT), config)
    assert done["messages"][-1].content == "I asked them."
    assert_redacted(model, agent.get_state(config).values["messages"], "build log")


@pytest.mark.parametrize("ours_first", [False, True])
def test_create_agent_redacts_a_loop_hint(ours_first: bool) -> None:
    model = poller()
    detector = LoopDetectionMiddleware(LoopDetection(ask_human=True))
    agent = create_agent(model, [status], checkpointer=InMemorySaver(),
                         middleware=[detector, pii()] if ours_first else [pii(), detector])
    config = thread()
    assert agent.invoke({"messages": [HumanMessage("is the build done?")]}, config)["__interrupt__"]
    done = agent.invoke(Command(resume=HINT), config)
    assert done["messages"][-1].content == "I asked them."
    assert_redacted(model, agent.get_state(config).values["messages"], "build log")
