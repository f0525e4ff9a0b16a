"""The questions a person answers about a run (the loop question, the budget check-in) in
LangChain's human-in-the-loop format: a one-action ``HITLRequest`` whose ``name`` is the title
a chat UI shows, answered with ``{"decisions": [one decision]}``. Any other shape is a
``ValueError`` naming this one, raised inside ``interrupt()`` (the run stays paused) and, for
our questions only, before a run starts (``answer_problem``): docs/deployment.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from langgraph.types import interrupt
from pydantic import BeforeValidator, Discriminator, ValidationError
from typing_extensions import TypedDict

__all__ = ["ASKED_BY", "BUDGET_TITLE", "DECISIONS", "MAX_NUMBER", "Decision", "Decisions", "answer_problem",
           "answer_schema", "ask_plainly", "decisions_shape", "one_action", "the_decision", "whole_number"]

DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")
"""The decisions a question takes (LangChain's, without ``respond``)."""

MAX_NUMBER = 10**12
"""The most an edited number may be (the tokens one budget answer adds)."""

BUDGET_TITLE = "Token budget reached: add more?"
"""The budget check-in's action name: the title a chat UI shows."""

ASKED_BY = {"approval": "approval", "loop_detector": "loop question", "model": "token budget"}
"""The nodes of ``create_loop_agent`` that ask our questions, and the question's name in errors."""

Decision = Annotated[ApproveDecision | EditDecision | RejectDecision, Discriminator("type")]
"""One decision: LangChain's human-in-the-loop decision types, without ``respond``."""


class Decisions(TypedDict):
    """A person's answer (LangChain's ``HITLResponse``): a decision per action asked about."""

    decisions: list[Decision]


def answer_schema(parse: Callable[[Any], Any]) -> Any:
    """A question's resume schema: ``Decisions`` that ``parse`` reads (checked in ``interrupt()``)."""
    def checked(value: Any) -> Any:
        parse(value)
        return value

    return Annotated[Decisions, BeforeValidator(checked)]


def one_action(name: str, args: dict[str, Any], description: str) -> HITLRequest:
    """A one-action ``HITLRequest``: approve, edit or reject the action ``name``."""
    return HITLRequest(action_requests=[ActionRequest(name=name, args=args, description=description)],
                       review_configs=[ReviewConfig(action_name=name,
                                                    allowed_decisions=list(DECISIONS))])


def decisions_shape(value: Any, what: str) -> Any:
    """``value`` if it is ``{"decisions": [...]}``; else a ``ValueError`` naming that shape."""
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
    """A whole number from 1 to ``MAX_NUMBER`` from an edited value, as a UI sends it too
    (``"20 000"``; ``,``, ``_`` and spaces between digits taken); else a ``ValueError``."""
    number: Any = value
    if isinstance(value, str):
        digits = value.strip().replace(",", "").replace("_", "").replace(" ", "")
        number = int(digits) if digits.isdigit() else None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {value!r}")
    if number > MAX_NUMBER:
        raise ValueError(f"{what} must be at most {MAX_NUMBER:,} (a checkpoint stores 64-bit "
                         f"integers), got {value!r:.40}")
    return number


Pending = Sequence[tuple[str, str, Any]]
"""The open interrupts of a thread: ``(node, interrupt id, value)`` each."""


def answer_problem(pending: Pending, resume: Any) -> str | None:
    """Why ``resume`` (one answer, or answers by interrupt id) does not answer our pending
    question it is for (None: it does, or it is for another interrupt, such as a tool's)."""
    if isinstance(resume, Mapping) and resume and set(resume) <= {i for _, i, _ in pending}:
        answers = [(node, value, resume[i]) for node, i, value in pending if i in resume]
    elif len(pending) == 1:
        answers = [(pending[0][0], pending[0][2], resume)]
    else:
        return None
    return next((p for node, value, answer in answers
                 if (p := _problem(node, value, answer)) is not None), None)


def _problem(node: str, question: Any, answer: Any) -> str | None:
    what = ASKED_BY.get(node)
    if what is None or not isinstance(question, Mapping):
        return None
    actions = [a for a in question.get("action_requests") or [] if isinstance(a, Mapping)]
    if not actions or (node == "model" and actions[0].get("name") != BUDGET_TITLE):
        return None  # a hosted middleware's own interrupt in the model node
    allowed = {c.get("action_name"): c.get("allowed_decisions")
               for c in question.get("review_configs") or [] if isinstance(c, Mapping)}
    try:
        decisions = decisions_shape(answer, what)["decisions"]
        if not isinstance(decisions, list) or len(decisions) != len(actions):
            count = "one decision" if len(actions) == 1 else f"{len(actions)} decisions"
            raise ValueError(f"{what}: expected {count} (one per action), got {answer!r:.80}")
        for action, decision in zip(actions, decisions, strict=True):
            _decision(what, action, decision, allowed.get(action.get("name")) or list(DECISIONS))
    except ValueError as exc:
        return _refused(str(exc), actions)
    return None


def _refused(problem: str, actions: Sequence[Mapping[str, Any]]) -> str:
    """A refused answer's error: the problem, what the question takes and a valid answer."""
    title = ", ".join(str(a.get("name")) for a in actions)
    example = {"decisions": [{"type": "approve"} for _ in actions]}
    return (f"resume: {problem}; its question {title!r} takes {{'decisions': [{{'type': 'approve' "
            f"| 'edit' | 'reject', ...}}]}}, e.g. {example!r}; nothing was resumed")


def ask_plainly(question: HITLRequest, schema: Any) -> Any:
    """``interrupt(question, response_schema=schema)``; a bad answer is refused there (nothing
    stored, the thread stays paused) with ``_refused``'s plain ``ValueError``, not pydantic's."""
    try:
        return interrupt(question, response_schema=schema)
    except ValidationError as exc:
        problem = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise ValueError(_refused(problem, question["action_requests"])) from exc  # type: ignore[arg-type]


def _decision(what: str, action: Mapping[str, Any], decision: Any, allowed: Sequence[str]) -> None:
    """A ``ValueError`` unless ``decision`` is one ``action`` allows; an edit of our one-action
    questions keeps the kinds of the values offered (a number: a whole number, as text too)."""
    kind = decision.get("type") if isinstance(decision, Mapping) else None
    if kind not in allowed:
        raise ValueError(f"{what}: a decision's type must be one of {', '.join(allowed)}, "
                         f"got {kind!r}")
    if kind != "edit":
        return
    edited = decision.get("edited_action")
    args = edited.get("args") if isinstance(edited, Mapping) else None
    if not isinstance(args, Mapping):
        raise ValueError(f"{what}: an 'edit' carries edited_action {{'name': ..., 'args': "
                         f"{{...}}}}, got {edited!r:.80}")
    for key, offered in (action.get("args") or {}).items() if what != "approval" else ():
        if isinstance(offered, int):
            whole_number(args.get(key), f"{what}: the edited {key!r}")
        elif key in args and not isinstance(args[key], str):
            raise ValueError(f"{what}: an 'edit' carries its {key} as text, args {{{key!r}: '...'}}, "
                             f"got {args[key]!r:.80}")
