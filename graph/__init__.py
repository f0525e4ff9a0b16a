"""langgraph-loop: an agent loop built as a compiled LangGraph graph.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langgraph_loop import create_loop_agent, StopReason
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> agent = create_loop_agent(ScriptedChatModel(script=["42"]))
    >>> agent.invoke({"messages": [HumanMessage("answer?")]})["stop_reason"] == StopReason.COMPLETED
    True
"""

from importlib.metadata import version

from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import (
    Approval,
    ArgPolicy,
    BudgetPressure,
    Calls,
    Compaction,
    Cycle,
    Drift,
    Hooks,
    Iterations,
    Judge,
    JudgeVerdict,
    Limits,
    LoopDetection,
    NoProgress,
    Repeat,
    SameReply,
    StallDetection,
)
from langgraph_loop.core.history import ThreadBusyError
from langgraph_loop.core.messages import is_notice
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.todos import set_mode, todos_remaining, todos_remaining_message, write_todos

__version__ = version("langgraph-loop")

__all__ = ["Approval", "ArgPolicy", "BudgetPressure", "Calls", "Compaction", "Cycle", "Drift",
           "Hooks", "Iterations", "Judge", "JudgeVerdict", "Limits", "LoopDetection",
           "LoopDetectionMiddleware", "LoopState", "NoProgress", "Repeat", "SameReply",
           "StallDetection", "StopReason", "ThreadBusyError", "TokenBudgetMiddleware",
           "__version__", "create_loop_agent", "is_notice", "set_mode", "todos_remaining",
           "todos_remaining_message", "write_todos"]
