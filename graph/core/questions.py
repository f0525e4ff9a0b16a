"""The questions a person answers about a run (the loop question, the budget check-in) in
LangChain's human-in-the-loop format, the one chat UIs give buttons to.

A question is a ``HITLRequest`` with one action: its ``name`` is what a UI shows as the
panel's title, so it says why the run is asking ("Loop detected: search"); its
``description`` says what each decision does; its ``args`` are the few values a person may
edit. The answer is LangChain's ``{"decisions": [{"type": "approve" | "edit" | "reject",
...}]}`` with one decision; any other shape (0.3's ``{"action": ...}`` or an action name
included) is a ``ValueError`` naming this one, raised inside ``interrupt()`` so the run stays
paused and can be resumed with a right answer.

Example:
    >>> request = one_action("Loop detected: search", {"hint": ""}, "What to do.")
    >>> request["review_configs"]
    [{'action_name': 'Loop detected: search', 'allowed_decisions': ['approve', 'edit', 'reject']}]
    >>> the_decision({"decisions": [{"type": "approve"}]}, "loop question")
    {'type': 'approve'}
    >>> try:
    ...     the_decision({"action": "stop"}, "loop question")  # 0.3's shape
    ... except ValueError as exc:
    ...     print(str(exc)[:60])
    loop question: {'action': 'stop'} is not an answer 0.4 takes
    >>> whole_number("20,000", "tokens")
    20000
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    ApproveDecision,
    DecisionType,
    EditDecision,
    HITLRequest,
    RejectDecision,
    ReviewConfig,
)
from pydantic import Discriminator
from typing_extensions import TypedDict

__all__ = ["DECISIONS", "Decision", "Decisions", "decisions_shape", "one_action", "the_decision",
           "whole_number"]

DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")
"""The decisions a question takes (LangChain's, without ``respond``)."""

Decision = Annotated[ApproveDecision | EditDecision | RejectDecision, Discriminator("type")]
"""One decision: LangChain's human-in-the-loop decision types, without ``respond``."""


class Decisions(TypedDict):
    """A person's answer: one decision (LangChain's ``HITLResponse``)."""

    decisions: list[Decision]


def one_action(name: str, args: dict[str, Any], description: str) -> HITLRequest:
    """A one-action ``HITLRequest``: approve, edit or reject the action ``name``."""
    return HITLRequest(action_requests=[ActionRequest(name=name, args=args, description=description)],
                       review_configs=[ReviewConfig(action_name=name,
                                                    allowed_decisions=list(DECISIONS))])


def decisions_shape(value: Any, what: str) -> Any:
    """``value`` if it is ``{"decisions": [...]}``; else a ``ValueError`` naming that shape
    (0.3's ``{"action": ...}`` answers and action names were removed in 0.4)."""
    if not (isinstance(value, Mapping) and "decisions" in value):
        raise ValueError(f"{what}: {value!r:.80} is not an answer 0.4 takes (0.3's answer shapes "
                         f"were removed): answer with LangChain's human-in-the-loop decisions, "
                         f"{{'decisions': [{{'type': 'approve' | 'edit' | 'reject', ...}}]}} "
                         f"(docs/deployment.md)")
    return value


def the_decision(value: Any, what: str) -> dict[str, Any]:
    """The one decision of a ``{"decisions": [...]}`` answer (else a ``ValueError``)."""
    decisions = decisions_shape(value, what)["decisions"]
    if not isinstance(decisions, list) or len(decisions) != 1 or not isinstance(decisions[0], Mapping):
        raise ValueError(f"{what}: answer with {{'decisions': [one decision]}}, got {value!r}")
    decision = dict(decisions[0])
    if decision.get("type") not in DECISIONS:
        raise ValueError(f"{what}: the decision's type must be one of {', '.join(DECISIONS)}, "
                         f"got {decision.get('type')!r}")
    return decision


def whole_number(value: Any, what: str) -> int:
    """A whole number >= 1 (else a ``ValueError``) from an edited value: a UI sends an edited
    number as text (``"20000"``; ``,``, ``_`` and spaces between digits are taken)."""
    number: Any = value
    if isinstance(value, str):
        digits = value.strip().replace(",", "").replace("_", "").replace(" ", "")
        number = int(digits) if digits.isdigit() else None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    return number
