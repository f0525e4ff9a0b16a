"""loopgraph: an agent loop built as a compiled LangGraph graph.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from graph import create_loop_agent, StopReason
    >>> from graph.scripted import ScriptedChatModel
    >>> agent = create_loop_agent(ScriptedChatModel(script=["42"]))
    >>> agent.invoke({"messages": [HumanMessage("answer?")]})["stop_reason"] == StopReason.COMPLETED
    True
"""

from typing import TYPE_CHECKING, Any

from graph.config import (
    Approval,
    ArgPolicy,
    BudgetPressure,
    Compaction,
    Hooks,
    Judge,
    JudgeVerdict,
    Limits,
    LoopDetection,
    StallDetection,
)
from graph.state import LoopState
from graph.stop import StopReason
from graph.todos import set_mode, todos_remaining, todos_remaining_message, write_todos

if TYPE_CHECKING:
    from graph.builder import create_loop_agent


def __getattr__(name: str) -> Any:
    # The builder imports the nodes, which import graph's modules: load it lazily.
    if name == "create_loop_agent":
        from graph.builder import create_loop_agent

        return create_loop_agent
    raise AttributeError(f"module 'graph' has no attribute {name!r}")

__all__ = [
    "Approval",
    "ArgPolicy",
    "BudgetPressure",
    "Compaction",
    "Hooks",
    "Judge",
    "JudgeVerdict",
    "Limits",
    "LoopDetection",
    "LoopState",
    "StallDetection",
    "StopReason",
    "create_loop_agent",
    "set_mode",
    "todos_remaining",
    "todos_remaining_message",
    "write_todos",
]
