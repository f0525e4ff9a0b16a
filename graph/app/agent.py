"""The demo agent the CLI and LangGraph Server use: two demo tools, a model from the environment.
(``make_chat_graph``: the same agent set up for people in a chat UI.)

The model is ``ChatOpenAI`` when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set
(``LANGGRAPH_LOOP_MODEL`` picks the model), else the offline scripted demo model.
Two demo tools: ``get_weather``, and ``send_email`` which needs a human's approval.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> agent = make_graph(env={})
    >>> state = agent.invoke({"messages": [HumanMessage("get_weather for Paris, please")]})
    >>> [m.type for m in state["messages"]], state["messages"][2].content
    (['human', 'ai', 'tool', 'ai'], 'Paris: 18°C, cloudy')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from langgraph_loop.app.env import UsageError, model_from_env
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Approval, Limits, LoopDetection
from langgraph_loop.scripted import ScriptedChatModel

__all__ = [
    "CHAT_TOKEN_BUDGET",
    "GATED_TOOLS",
    "SYSTEM_PROMPT",
    "TOOLS",
    "demo_model",
    "demo_reply",
    "get_weather",
    "make_chat_graph",
    "make_graph",
    "model",
    "send_email",
]

SYSTEM_PROMPT = "You are a helpful assistant. Use the tools when they help; be brief."


@tool
def get_weather(city: str = "Paris") -> str:
    """Current weather in a city."""
    weather = {"Paris": "18°C, cloudy", "Rome": "24°C, sunny", "Oslo": "9°C, rain"}
    return f"{city}: {weather.get(city, 'no data')}"


@tool
def send_email(to: str = "team@example.com", subject: str = "Update", body: str = "") -> str:
    """Send an email (a demo: nothing is sent). Needs a human's approval."""
    return f"email to {to} with subject {subject!r} queued"


TOOLS: tuple[BaseTool, ...] = (get_weather, send_email)
GATED_TOOLS = ("send_email",)


def demo_reply(messages: list[BaseMessage]) -> Any:
    """The offline demo model's policy: call the tool the user names, then answer.

    Example:
        >>> demo_reply([HumanMessage("please send_email")])
        [('send_email', {})]
        >>> demo_reply([HumanMessage("hello")])[:22]
        'Offline demo model: no'
    """
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return str(last.content)
    said = " ".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
    for name in (t.name for t in TOOLS):
        if name in said:
            args = {"city": "Paris"} if name == "get_weather" else {}
            return [(name, args)]
    return ("Offline demo model: no model is configured. Set OPENAI_API_KEY (and "
            "OPENAI_BASE_URL for a compatible server) to use a real one.")


def demo_model() -> ScriptedChatModel:
    """The scripted model used when no provider is configured."""
    return ScriptedChatModel(default=demo_reply)


def model(env: Mapping[str, str] | None = None) -> BaseChatModel:
    """ChatOpenAI from the environment when configured, else the demo model."""
    try:
        return model_from_env(os.environ if env is None else env)
    except UsageError:
        return demo_model()


def make_graph(env: Mapping[str, str] | None = None) -> Any:
    """The loop agent with the demo tools, ``send_email`` gated, no checkpointer."""
    return create_loop_agent(model(env), TOOLS, system_prompt=SYSTEM_PROMPT,
                             approval=Approval(tools=GATED_TOOLS), name="langgraph-loop")


CHAT_TOKEN_BUDGET = 200_000
"""The chat graph's token budget for a whole conversation (``Limits.budget_scope="thread"``)."""


def make_chat_graph(env: Mapping[str, str] | None = None) -> Any:
    """The same agent for people in a chat UI (Agent Chat UI): a loop stop asks the person
    (``LoopDetection(ask_human=True)``), and one token budget per conversation checks in
    with the person when it is spent (``budget_check_in``, ``budget_scope="thread"``)."""
    return create_loop_agent(model(env), TOOLS, system_prompt=SYSTEM_PROMPT,
                             approval=Approval(tools=GATED_TOOLS),
                             loop_detection=LoopDetection(ask_human=True),
                             limits=Limits(token_budget=CHAT_TOKEN_BUDGET, budget_check_in=True,
                                           budget_scope="thread"),
                             name="langgraph-loop")
