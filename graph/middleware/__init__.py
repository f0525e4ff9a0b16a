"""LangChain v1 middleware for teams that stay on ``create_agent``: the loop control of
``create_loop_agent``, deciding with the same engine (``graph/engine/detection.py``,
``graph/engine/limits.py``).

Example:
    >>> from langchain.agents import create_agent
    >>> from langgraph_loop.middleware import LoopDetectionMiddleware
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> agent = create_agent(ScriptedChatModel(script=["hi"]), [],
    ...                      middleware=[LoopDetectionMiddleware()])
    >>> agent.invoke({"messages": [("user", "hello")]})["messages"][-1].content
    'hi'
"""

from langgraph_loop.middleware.loop_detection import LoopDetectionMiddleware, LoopDetectionState
from langgraph_loop.middleware.token_budget import (
    BudgetExtension,
    TokenBudgetMiddleware,
    TokenBudgetState,
)

__all__ = ["BudgetExtension", "LoopDetectionMiddleware", "LoopDetectionState",
           "TokenBudgetMiddleware", "TokenBudgetState"]
