"""Configuration models: keyword-only, validated, immutable.

Every model raises ``ValueError`` (pydantic's ``ValidationError`` is one) naming
the offending field when a value or a combination is invalid.

Example:
    >>> from langgraph_loop import Limits, LoopDetection
    >>> Limits(max_model_calls=5, max_tool_calls=20).max_tool_calls
    20
    >>> LoopDetection(warn_after=2, stop_after=4).window
    20
    >>> try:
    ...     LoopDetection(warn_after=5, stop_after=3)
    ... except ValueError as exc:
    ...     print("stop_after" in str(exc))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, model_validator

from langgraph_loop.core import prompts
from langgraph_loop.core.loop_config import ArgPolicy, LoopDetection

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
    "StallDetection",
]

class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class Limits(_Config):
    """Hard limits of one run.

    Attributes:
        max_model_calls: model calls per iteration (None = unbounded).
        max_tool_calls: tool executions per run (None = unbounded).
        token_budget: agent tokens (input + output) per run, the final answer included:
            the loop stops while the final answer still fits (None = unbounded).
        max_duration_s: wall-clock seconds per run, checked between steps.
        final_answer: after a stop that left tool calls unanswered, answer them with
            error ToolMessages and make one last model call with no tools bound.
        max_tool_output_chars: longer tool outputs are cut to this size, with a note.
        max_tool_errors: tool-calling rounds in a row whose every result was an error
            after which the run stops (``tool_errors``; None = off).

    Example:
        >>> Limits(token_budget=10_000).final_answer
        True
    """

    max_model_calls: int | None = Field(default=25, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    max_duration_s: float | None = Field(default=None, gt=0)
    final_answer: bool = True
    max_tool_output_chars: int | None = Field(default=100_000, ge=100)
    max_tool_errors: int | None = Field(default=None, ge=1)


class StallDetection(_Config):
    """Stop with ``stalled`` when iterations stop making progress.

    Checked at the end of an iteration that would otherwise continue, over the last
    ``consecutive`` iterations: the same answer text, or the same tool calls with the
    same results, or token totals within ``tolerance`` of each other
    (``max - min <= tolerance * min``). An iteration that ran a tool call no earlier one
    made (new work) is never part of a stall. Details: ``nodes/stall.py``.

    Example:
        >>> StallDetection().consecutive
        3
    """

    consecutive: int = Field(default=3, ge=2)
    tolerance: float = Field(default=0.10, ge=0.0, lt=1.0)


class BudgetPressure(_Config):
    """Finalize-now notice when agent tokens reach ``threshold × Limits.token_budget``.

    The ``instruction`` is queued as a deferred notice (once per run); the model sees
    it as the last message of its next request; the run stops with
    ``budget_pressure`` at the end of that iteration unless it ends as ``completed``
    anyway. Needs ``Limits.token_budget``; exceeding the budget itself stops at once
    with ``token_budget``.

    Example:
        >>> BudgetPressure(threshold=0.7).threshold
        0.7
    """

    threshold: float = Field(default=0.8, gt=0.0, lt=1.0)
    instruction: str = Field(default=prompts.BUDGET_PRESSURE, min_length=1)


class Approval(_Config):
    """Human approval of gated tools through ``interrupt()``.

    Example:
        >>> Approval(tools=["delete_file"]).max_auto_rounds
        3
    """

    tools: tuple[str, ...] = Field(min_length=1)
    resolver: Callable[..., Any] | None = None
    max_auto_rounds: int = Field(default=3, ge=0)
    description: str = "Tool execution requires approval"


class Compaction(_Config):
    """Replace the oldest messages by a summary when a request grows too large.

    Example:
        >>> Compaction(max_tokens=8000).keep_last
        6
    """

    max_tokens: int = Field(ge=100)
    keep_last: int = Field(default=6, ge=1)
    summarizer: BaseChatModel | None = None


class Hooks(_Config):
    """Callbacks around iterations and tool calls; sync or async.

    Order per iteration: ``on_iteration_start(state)``, then ``on_tool_call(record)`` for
    each executed or refused call (``{name, args, status, duration_s, iteration}``),
    then ``on_iteration_end(record, state)`` with the iteration record (a copy);
    returning True stops the run with ``terminated``. A hook that raises stops the
    run with ``graph.callbacks.CallbackError`` naming the hook (the original
    exception is its ``__cause__``); with a checkpointer, ``invoke(None, config)``
    resumes the thread at the failed step. The same events, plus ``loop_warning``,
    ``budget_pressure`` and one ``stop`` per run, are emitted on
    ``stream_mode="custom"`` as JSON-friendly dicts ``{"event": ..., ...}``.

    Example:
        >>> Hooks(on_tool_call=print).on_iteration_start is None
        True
    """

    on_iteration_start: Callable[..., Any] | None = None
    on_iteration_end: Callable[..., Any] | None = None
    on_tool_call: Callable[..., Any] | None = None


class JudgeVerdict(BaseModel):
    """The judge's structured answer.

    Example:
        >>> JudgeVerdict(answered=False, reasoning="the date is missing").answered
        False
    """

    answered: bool = Field(description="True only if the original request is fully answered.")
    reasoning: str = Field(default="", description="Why; what is missing when not answered.")


class Judge(_Config):
    """A second model that decides whether the original request is answered.

    Example:
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> Judge(model=ScriptedChatModel(script=[]), criteria=["cite sources"]).criteria
        ('cite sources',)
    """

    model: BaseChatModel
    criteria: tuple[str, ...] = ()
    instructions: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _tuple_criteria(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("criteria"), str):
            raise ValueError("Judge: criteria must be a list of strings, not one string")
        if isinstance(data, dict) and isinstance(data.get("criteria"), Sequence):
            data = {**data, "criteria": tuple(data["criteria"])}
        return data
