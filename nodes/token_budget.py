"""The token-budget guard: stop while the final answer still fits in what is left.

``Limits.token_budget`` is a cost cap on the agent's tokens in a run. Before each regular
model call, the loop stops (``token_budget``) unless what is left covers this call and a
tools-free final answer after it; the final-answer call is then bound with ``max_tokens``
(where the model takes it) to the room left, and skipped when that room is below
``MIN_FINAL_OUTPUT``.

Example:
    >>> from langchain_core.messages import HumanMessage, ToolMessage
    >>> ai = AIMessage("", usage_metadata={"input_tokens": 40, "output_tokens": 10,
    ...                                    "total_tokens": 50})
    >>> estimate_input([HumanMessage("hi"), ai, ToolMessage("x" * 40, tool_call_id="c")])
    72
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_loop.core.records import Guard
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.limits import limit_guard, stop_instruction

__all__ = ["MIN_FINAL_OUTPUT", "budget_guard", "estimate_input", "final_answer_room", "max_tokens_of"]

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
    guard = limit_guard(StopReason.TOKEN_BUDGET, settings.limits.token_budget,
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
