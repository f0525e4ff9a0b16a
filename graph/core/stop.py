"""Where a run stops and why: stop reasons, guards (``state["stop_guard"]``: which guard, the
``StopReason``, details), their wording, and the one function that applies a stop (``stop_update``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, Required, cast

from typing_extensions import TypedDict

from langgraph_loop.core import prompts

__all__ = ["Guard", "GuardName", "StopFields", "StopReason", "guard", "limit_guard", "person_stop",
           "stop_answer_text", "stop_fields", "stop_instruction", "stop_update"]


class StopReason(StrEnum):
    """Every way a run can end; stored as ``state["stop_reason"]`` (None while paused)."""

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    MAX_MODEL_CALLS = "max_model_calls"
    MAX_TOOL_CALLS = "max_tool_calls"
    TOKEN_BUDGET = "token_budget"
    BUDGET_PRESSURE = "budget_pressure"
    LOOP_DETECTED = "loop_detected"
    TOOL_ERRORS = "tool_errors"
    STALLED = "stalled"
    TIMEOUT = "timeout"
    TERMINATED = "terminated"
    STEP_LIMIT = "step_limit"


GuardName = Literal["limits", "loop_detector", "stall_detection", "budget_pressure",
                    "max_iterations", "hooks", "router", "tools"]
"""Which guard stopped a run (``Guard["guard"]``)."""


class Guard(TypedDict, total=False):
    """Why a run stopped: which guard, the ``StopReason`` value, and the guard's details."""

    guard: Required[GuardName]
    reason: Required[str]
    limit: Any
    value: Any
    detail: str
    layer: str
    final_answer: str
    estimate: int
    tool: str
    args: str | None
    calls: list[str]
    count: int
    threshold: float
    turns: int
    progressing: bool
    iterations: list[Any]
    totals: list[int]
    rung: str
    began: dict[str, Any]
    checkpoint_id: str | None
    human: dict[str, Any]


def guard(name: GuardName, reason: StopReason | str, **details: Any) -> Guard:
    """A guard: which guard, the stop reason's value, and the details."""
    return cast(Guard, {"guard": name, "reason": StopReason(reason).value, **details})


def limit_guard(reason: StopReason, limit: Any, value: Any) -> Guard:
    """The guard of a limit: which one, its setting, the value reached."""
    return guard("limits", reason, limit=limit, value=value)


def person_stop(message: str | None) -> dict[str, Any]:
    """A guard's ``human`` record of a stop a person chose at a question (with their reason)."""
    return {"action": "stop", **({"message": message} if message else {})}


class StopFields(TypedDict):
    """The stop record, as both front doors store it: the reason and the guard."""

    stop_reason: str
    stop_guard: Guard


def stop_fields(why: Guard) -> StopFields:
    """The stop record of ``why``: the keys a stop writes, at both front doors."""
    return StopFields(stop_reason=why["reason"], stop_guard=why)


def stop_update(run: Mapping[str, Any], why: Guard, *, finalized: bool | None = None) -> dict[str, Any]:
    """The graph's update that stops the run (the one place it writes a stop): the stop record,
    and ``run["finalized"]`` (True: no final-answer call follows)."""
    new_run = dict(run)
    if finalized is not None:
        new_run["finalized"] = finalized
    return {**stop_fields(why), "run": new_run}


EXPLAIN: dict[str, str] = {
    "max_model_calls": "the model-call limit of this iteration was reached",
    "max_tool_calls": "the tool-call limit of this run was reached",
    "token_budget": "the token budget of this run is spent or has no room for another round",
    "timeout": "the time limit of this run is spent",
    "step_limit": "the graph's step limit (recursion_limit) is nearly reached",
    "loop_detected": "a runaway tool loop was detected",
    "loop_detected:text": "your replies kept repeating the same text",
    "tool_errors": "the tool calls failed too many times in a row",
}
"""Why a stop happened, in words; a ``reason:layer`` key words one loop layer's stop."""


def _explain(why: Guard, said: str | None = None) -> str:
    """Why this stop happened, in words (``said``, else its layer's, else its reason's)."""
    said = said or EXPLAIN.get(f"{why['reason']}:{why.get('layer')}") or EXPLAIN.get(
        why["reason"], why["reason"])
    return prompts.STOPPED_BY_PERSON.format(why=said) if why.get("human") else said


def stop_answer_text(why: Guard) -> str:
    """The error ToolMessage text for calls a stop left unanswered."""
    return prompts.STOP_ANSWER.format(why=_explain(why, why.get("detail")))


def stop_instruction(why: Guard) -> str:
    """The notice the final-answer call sees (a loop stop's own wording; a person's reason after it)."""
    template = (prompts.LOOP_STOP_INSTRUCTION if why["reason"] == StopReason.LOOP_DETECTED
                else prompts.STOP_INSTRUCTION)
    text = template.format(why=_explain(why))
    message = (why.get("human") or {}).get("message")
    return f"{text} {prompts.PERSON_SAID.format(message=message)}" if message else text
