"""Core scenarios: a ReAct pass with parallel tools and a failing tool; a runaway
model stopped by a limit with a clean final answer.

Example:
    >>> [s.key for s in SCENARIOS]
    ['react', 'runaway']
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from rich.console import Console

from langgraph_loop.app.demos.base import Scenario, print_run
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Limits
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["SCENARIOS", "get_weather", "lookup_order"]


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return {"Paris": "18°C, cloudy", "Rome": "24°C, sunny"}.get(city, "unknown city")


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order in the shop database."""
    raise ConnectionError("order database unreachable")


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def react(console: Console, checkpointer: Any) -> dict[str, Any]:
    """Parallel tool calls, one of which fails, then an answer."""
    model = ScriptedChatModel(script=[
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}),
         ("lookup_order", {"order_id": "A-17"})],
        "Paris is 18°C and cloudy, Rome 24°C and sunny. I could not check order A-17: "
        "the order database is unreachable.",
    ])
    agent = create_loop_agent(model, [get_weather, lookup_order], checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage(
        "Weather in Paris and Rome? And where is my order A-17?")]}, _config("demo-react"))
    print_run(console, "ReAct pass: parallel tools, one failing", state)
    return state


def runaway(console: Console, checkpointer: Any) -> dict[str, Any]:
    """A model that never stops calling tools, stopped by the model-call limit."""
    counter = iter(range(1, 10_000))
    model = ScriptedChatModel(
        default=lambda _m: [("get_weather", {"city": f"Paris-{next(counter)}"})],
        no_tools_reply="I checked the weather four times: Paris is 18°C and cloudy.",
    )
    agent = create_loop_agent(model, [get_weather], limits=Limits(max_model_calls=4),
                              checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Keep an eye on the weather in Paris.")]},
                         _config("demo-runaway"))
    print_run(console, "Runaway model stopped by Limits(max_model_calls=4), final answer", state)
    return state


SCENARIOS = [
    Scenario("react", "ReAct pass with parallel tools and a failing tool", react, ["core"]),
    Scenario("runaway", "Runaway model stopped by a limit", runaway, ["core", "limits"]),
]

