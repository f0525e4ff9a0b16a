"""LangChain v1 middleware for teams that stay on ``create_agent``: the loop control of
``create_loop_agent``, deciding with the same engine (``graph/engine/detection.py``,
``graph/engine/limits.py``).
"""

from langgraph_loop.middleware.loop_detection import LoopDetectionMiddleware, LoopDetectionState
from langgraph_loop.middleware.token_budget import (
    BudgetExtension,
    TokenBudgetMiddleware,
    TokenBudgetState,
)

__all__ = ["BudgetExtension", "LoopDetectionMiddleware", "LoopDetectionState",
           "TokenBudgetMiddleware", "TokenBudgetState"]
