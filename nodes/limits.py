"""Inner limits as pure decisions: model calls, tool calls, tokens, time, graph steps.

Each check returns a ``Guard`` (``{"guard": "limits", "reason": <StopReason value>,
"limit": ..., "value": ...}``) saying why the run must stop, or None.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> from langgraph_loop.core.config import Limits
    >>> s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    >>> check_limits({"usage": {"total_tokens": 150}}, s, has_calls=True)["reason"]
    'token_budget'
    >>> timeout_guard({"run": {"started_at": 0.0}}, s, now=5.0) is None
    True
"""

from __future__ import annotations

import time
from typing import Any

from langgraph_loop.core.records import Guard
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.steps import can_continue_round

__all__ = ["check_limits", "limit_guard", "stop_answer_text", "stop_instruction", "timeout_guard"]


def limit_guard(reason: StopReason, limit: Any, value: Any) -> Guard:
    """The guard of a limit: which one, its setting, the value reached."""
    return {"guard": "limits", "reason": reason.value, "limit": limit, "value": value}


def timeout_guard(state: LoopState, settings: LoopSettings, now: float | None = None) -> Guard | None:
    """``timeout`` when the run's wall-clock cap is spent, else None (the one time check)."""
    cap = settings.limits.max_duration_s
    started = (state.get("run") or {}).get("started_at")
    if cap is None or started is None:
        return None
    elapsed = (time.time() if now is None else now) - started
    if elapsed < cap:
        return None
    return limit_guard(StopReason.TIMEOUT, cap, round(elapsed, 3))


def check_limits(
    state: LoopState,
    settings: LoopSettings,
    *,
    has_calls: bool,
    gated: bool = False,
    now: float | None = None,
) -> Guard | None:
    """The first limit a model reply hits, or None (checked after every model call)."""
    limits = settings.limits
    total = (state.get("usage") or {}).get("total_tokens", 0)
    if limits.token_budget is not None and total > limits.token_budget:
        return limit_guard(StopReason.TOKEN_BUDGET, limits.token_budget, total)
    timeout = timeout_guard(state, settings, now)
    if timeout is not None or not has_calls:
        return timeout
    calls = (state.get("pass_info") or {}).get("model_calls", 0)
    if limits.max_model_calls is not None and calls >= limits.max_model_calls:
        return limit_guard(StopReason.MAX_MODEL_CALLS, limits.max_model_calls, calls)
    done = (state.get("run") or {}).get("tool_calls", 0)
    if limits.max_tool_calls is not None and done >= limits.max_tool_calls:
        return limit_guard(StopReason.MAX_TOOL_CALLS, limits.max_tool_calls, done)
    remaining = state.get("remaining_steps")
    if not can_continue_round(remaining, settings, gated=gated):
        return limit_guard(StopReason.STEP_LIMIT, "recursion_limit", remaining)
    return None


_EXPLAIN = {
    "max_model_calls": "the model-call limit of this pass was reached",
    "max_tool_calls": "the tool-call limit of this run was reached",
    "token_budget": "the token budget of this run is spent or has no room for another round",
    "timeout": "the time limit of this run is spent",
    "step_limit": "the graph's step limit (recursion_limit) is nearly reached",
    "loop_detected": "a runaway tool loop was detected",
}


def stop_answer_text(guard: Guard) -> str:
    """The error ToolMessage text for calls a stop left unanswered."""
    why = guard.get("detail") or _EXPLAIN.get(guard["reason"], guard["reason"])
    return f"Error: not executed: the run was stopped because {why}."


def stop_instruction(guard: Guard) -> str:
    """The notice the final-answer call sees."""
    why = _EXPLAIN.get(guard["reason"], guard["reason"])
    return (f"The run has been stopped because {why}. Tools are no longer available. "
            "Summarize what you have done so far and give your best final answer now.")
