"""Core scenarios: a ReAct iteration with parallel tools and a failing tool; a runaway
model stopped by a limit with a clean final answer.

Example:
    >>> [s.key for s in SCENARIOS]
    ['react', 'runaway']
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from rich.console import Console

from langgraph_loop.app.demos.base import Expect, Scenario, print_run
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Iterations
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["SCENARIOS", "checks_summary", "get_weather", "lookup_order"]


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
    print_run(console, "ReAct iteration: parallel tools, one failing", state)
    return state


def checks_summary(messages: list[BaseMessage]) -> str:
    """The runaway model's final answer, true to what its tool calls returned."""
    asked = [c["args"]["city"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = {str(m.content) for m in messages
               if isinstance(m, ToolMessage) and m.status == "success"}
    ran = len(asked) - 1  # the last request was stopped, not run
    return (f"I checked the weather {ran} times ({', '.join(asked[:ran])}); every check returned "
            f"{' / '.join(sorted(results))!r}, so I have no reading for Paris. "
            f"My request for {asked[-1]} was stopped by the call limit.")


def runaway(console: Console, checkpointer: Any) -> dict[str, Any]:
    """A model that never stops calling tools, stopped by the model-call limit."""
    counter = iter(range(1, 10_000))
    model = ScriptedChatModel(
        default=lambda _m: [("get_weather", {"city": f"Paris-{next(counter)}"})],
        no_tools_reply=checks_summary,
    )
    agent = create_loop_agent(model, [get_weather], iterations=Iterations(max_model_calls=4),
                              checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Keep an eye on the weather in Paris.")]},
                         _config("demo-runaway"))
    print_run(console, "Runaway model stopped by Iterations(max_model_calls=4), then a tools-free "
                       "final answer", state)
    console.print("  model_calls=5: the 4 calls max_model_calls allows in an iteration (the 4th one's "
                  "tool call was not run), plus the tools-free final-answer call after the stop",
                  markup=False, highlight=False)
    return state


SCENARIOS = [
    Scenario("react", "ReAct iteration with parallel tools and a failing tool", react, ["core"],
             Expect("completed", iterations=1, loop_warnings=0, model_calls=2)),
    Scenario("runaway", "Runaway model stopped by a limit", runaway, ["core", "limits"],
             Expect("max_model_calls", iterations=1, loop_warnings=0, model_calls=5)),
]

