"""Inner limits as pure decisions: model calls, tool calls, tokens, time, graph steps.

A *guard* is a dict describing why a run must stop: ``{"guard": "limits",
"reason": <StopReason value>, "limit": ..., "value": ...}``.

LangGraph's recursion limit is handled with ``RemainingSteps``: a node that sees
``remaining`` may still schedule ``remaining - 1`` steps. The loop continues only
while the steps to finish cleanly (answer pending calls, final answer, router)
would still fit after the next round, so ``GraphRecursionError`` never escapes.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> from langgraph_loop.core.config import Limits
    >>> s = LoopSettings.build(ScriptedChatModel(), limits=Limits(token_budget=100))
    >>> check_limits({"usage": {"total_tokens": 150}}, s, has_calls=True)["reason"]
    'token_budget'
    >>> finish_steps(s), can_continue_round(7, s, gated=False), can_continue_round(6, s, gated=False)
    (3, True, False)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason

__all__ = [
    "MIN_FINAL_OUTPUT",
    "budget_guard",
    "can_continue_round",
    "can_start_pass",
    "check_limits",
    "estimate_input",
    "final_answer_room",
    "finish_steps",
    "fits",
    "max_tokens_of",
    "pressure_due",
    "start_steps",
    "stop_answer_text",
    "stop_instruction",
]

Guard = dict[str, Any]


def _guard(reason: StopReason, limit: Any, value: Any) -> Guard:
    return {"guard": "limits", "reason": reason.value, "limit": limit, "value": value}


def _pass_end_steps(settings: LoopSettings) -> int:
    """A text reply ends the pass: [judge] router."""
    return 1 + (1 if settings.judge is not None else 0)


def finish_steps(settings: LoopSettings) -> int:
    """Graph steps needed after ``loop_detector`` decides, whatever it decides.

    A stop: [compaction] model (final answer), loop_detector, router; or only the router
    without a final answer. A pass end: [judge] router. Then [respond].
    """
    stop_path = 3 + (1 if settings.compaction is not None else 0)
    if not settings.limits.final_answer:
        stop_path = 1
    respond = 1 if settings.response_format is not None else 0
    return max(stop_path, _pass_end_steps(settings)) + respond


def _model_steps(settings: LoopSettings) -> int:
    return 1 + (1 if settings.compaction is not None else 0)


def fits(remaining: int | None, steps: int) -> bool:
    """May a node that sees ``remaining`` still schedule ``steps`` more steps?"""
    return remaining is None or remaining - 1 >= steps


def start_steps(settings: LoopSettings) -> int:
    """Steps a run needs at least: [compaction] model, loop_detector, [judge] router."""
    return _model_steps(settings) + 1 + _pass_end_steps(settings)


def can_continue_round(remaining: int | None, settings: LoopSettings, *, gated: bool) -> bool:
    """At ``loop_detector``: may the tools run and the model be called again?"""
    round_steps = (1 if gated else 0) + 1 + _model_steps(settings) + 1
    return fits(remaining, round_steps + finish_steps(settings))


def can_start_pass(remaining: int | None, settings: LoopSettings) -> bool:
    """At ``router``: may another pass start?"""
    return fits(remaining, _model_steps(settings) + 1 + finish_steps(settings))


def check_limits(
    state: LoopState,
    settings: LoopSettings,
    *,
    has_calls: bool,
    gated: bool = False,
    now: float | None = None,
) -> Guard | None:
    """The first limit a model reply hits, or None (checked in ``loop_detector``)."""
    limits = settings.limits
    total = (state.get("usage") or {}).get("total_tokens", 0)
    if limits.token_budget is not None and total > limits.token_budget:
        return _guard(StopReason.TOKEN_BUDGET, limits.token_budget, total)
    started = (state.get("run") or {}).get("started_at")
    if limits.max_duration_s is not None and started is not None:
        elapsed = (time.time() if now is None else now) - started
        if elapsed >= limits.max_duration_s:
            return _guard(StopReason.TIMEOUT, limits.max_duration_s, round(elapsed, 3))
    if not has_calls:
        return None
    calls = (state.get("pass_info") or {}).get("model_calls", 0)
    if limits.max_model_calls is not None and calls >= limits.max_model_calls:
        return _guard(StopReason.MAX_MODEL_CALLS, limits.max_model_calls, calls)
    done = (state.get("run") or {}).get("tool_calls", 0)
    if limits.max_tool_calls is not None and done >= limits.max_tool_calls:
        return _guard(StopReason.MAX_TOOL_CALLS, limits.max_tool_calls, done)
    remaining = state.get("remaining_steps")
    if not can_continue_round(remaining, settings, gated=gated):
        return _guard(StopReason.STEP_LIMIT, "recursion_limit", remaining)
    return None


MIN_FINAL_OUTPUT = 50
"""The least output room (tokens) worth a final-answer call under a token budget."""

PER_MESSAGE = 10
"""Tokens counted per added message on top of ~4 characters per token (conservative)."""


def _estimate(request: Sequence[BaseMessage]) -> tuple[int, int]:
    """(reported tokens of the newest reply's call, approximate tokens added after it)."""
    for i in range(len(request) - 1, -1, -1):
        message = request[i]
        if isinstance(message, AIMessage) and message.usage_metadata:
            usage = message.usage_metadata
            added = count_tokens_approximately(request[i + 1:], extra_tokens_per_message=PER_MESSAGE)
            return usage["input_tokens"] + usage["output_tokens"], added
    return 0, count_tokens_approximately(request, extra_tokens_per_message=PER_MESSAGE)


def estimate_input(request: Sequence[BaseMessage]) -> int:
    """Input tokens of a request: the newest reply's reported input and output tokens plus
    an approximation of the messages added after it (the whole request without one).

    Example:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> ai = AIMessage("", usage_metadata={"input_tokens": 40, "output_tokens": 10,
        ...                                    "total_tokens": 50})
        >>> estimate_input([HumanMessage("hi"), ai, ToolMessage("x" * 40, tool_call_id="c")])
        72
    """
    reported, added = _estimate(request)
    return reported + added


def _left(state: LoopState, settings: LoopSettings) -> int | None:
    budget = settings.limits.token_budget
    if budget is None:
        return None
    return budget - (state.get("usage") or {}).get("total_tokens", 0)


def _last_output(state: LoopState) -> int:
    for message in reversed(state.get("messages") or []):
        if isinstance(message, AIMessage) and message.usage_metadata:
            return int(message.usage_metadata["output_tokens"])
    return MIN_FINAL_OUTPUT


def budget_guard(state: LoopState, settings: LoopSettings, request: Sequence[BaseMessage]) -> Guard | None:
    """Before a regular call: stop (``token_budget``) unless what is left covers this call
    and a final answer after it, so the final answer still fits once the loop stops.

    This call is estimated as its input plus the previous reply's output; the final answer
    after it as that, plus as much again as this round added (its results), the stop
    notice and ``MIN_FINAL_OUTPUT``.
    """
    left = _left(state, settings)
    if left is None:
        return None
    reported, added = _estimate(request)
    this_call = reported + added + _last_output(state)
    guard = _guard(StopReason.TOKEN_BUDGET, settings.limits.token_budget,
                   (state.get("usage") or {}).get("total_tokens", 0))
    notice = count_tokens_approximately([HumanMessage(stop_instruction(guard))],
                                        extra_tokens_per_message=PER_MESSAGE)
    needed = this_call + (this_call + added + notice + MIN_FINAL_OUTPUT)
    if needed <= left:
        return None
    guard["estimate"] = needed
    return guard


def final_answer_room(state: LoopState, settings: LoopSettings,
                      request: Sequence[BaseMessage]) -> int | None:
    """Output tokens the final-answer call may use (None: no budget); below
    ``MIN_FINAL_OUTPUT`` the call is skipped."""
    left = _left(state, settings)
    return None if left is None else left - estimate_input(request)


def max_tokens_of(model: BaseChatModel) -> tuple[bool, int | None]:
    """Does the model take a ``max_tokens`` setting, and its configured value."""
    fields = getattr(type(model), "model_fields", {})
    if "max_tokens" not in fields:
        return False, None
    value = getattr(model, "max_tokens", None)
    return True, value if isinstance(value, int) else None


def pressure_due(state: LoopState, settings: LoopSettings) -> bool:
    """True when the budget-pressure notice should be queued now (once per run)."""
    pressure, budget = settings.budget_pressure, settings.limits.token_budget
    if pressure is None or budget is None:
        return False
    if (state.get("run") or {}).get("pressure_queued"):
        return False
    total = (state.get("usage") or {}).get("total_tokens", 0)
    return total >= pressure.threshold * budget


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
    why = guard.get("detail") or _EXPLAIN.get(str(guard.get("reason")), str(guard.get("reason")))
    return f"Error: not executed: the run was stopped because {why}."


def stop_instruction(guard: Guard) -> str:
    """The notice the final-answer call sees."""
    why = _EXPLAIN.get(str(guard.get("reason")), str(guard.get("reason")))
    return (f"The run has been stopped because {why}. Tools are no longer available. "
            "Summarize what you have done so far and give your best final answer now.")
