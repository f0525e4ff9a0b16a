"""The message that starts the next pass (pure helpers the router uses).

Loop-made messages carry ``name="loop_continue"`` so UIs can tell them from the
user's. The default text nudges the model on, with the feedback (from the
predicate or the judge) when there is some. With ``inject_progress`` and a kept
transcript (no fresh context), only the latest progress entry is added: the
transcript already holds the earlier passes, so re-listing them would only grow
every request (fresh-context passes get the whole log from the request builder).

Example:
    >>> default_message(None)
    'Continue working on the task. If it is complete, say so.'
    >>> print(default_message("the date is missing"))
    Feedback on your last answer: the date is missing
    <BLANKLINE>
    Continue working on the task. If it is complete, say so.
    >>> print(with_progress("Go on.", ["read the file", "fixed the bug"], inject=True))
    Progress so far:
    2. fixed the bug
    <BLANKLINE>
    Go on.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

__all__ = ["CONTINUE_NAME", "DEFAULT_CONTINUE", "continuation_text", "default_message",
           "loop_message", "resend_message", "with_progress"]

CONTINUE_NAME = "loop_continue"
DEFAULT_CONTINUE = "Continue working on the task. If it is complete, say so."


def default_message(feedback: str | None) -> str:
    """The default continuation text, with the feedback when there is some."""
    if feedback:
        return f"Feedback on your last answer: {feedback}\n\n{DEFAULT_CONTINUE}"
    return DEFAULT_CONTINUE


def with_progress(text: str, progress: Sequence[str], inject: bool) -> str:
    """``text`` preceded by the latest progress entry (numbered by its pass)."""
    if not inject or not progress:
        return text
    return f"Progress so far:\n{len(progress)}. {progress[-1]}\n\n{text}"


def continuation_text(feedback: str | None, progress: Sequence[str], inject: bool) -> str:
    """The default continuation message's text."""
    return with_progress(default_message(feedback), progress, inject)


def loop_message(content: str | list[Any]) -> HumanMessage:
    """A loop-made user message (tagged, with an id)."""
    return HumanMessage(content, name=CONTINUE_NAME, id=uuid.uuid4().hex)  # type: ignore[arg-type]


def resend_message(
    previous: Sequence[BaseMessage] | None,
    *,
    request_id: str | None,
    fresh_context: bool,
    feedback: str | None,
) -> HumanMessage:
    """``next_message`` returned None: re-send the previous pass's input.

    Its content is kept as it was (multimodal included). With fresh context the
    run's original request is already in every request, so re-sending it would
    duplicate it: the default text is sent instead.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> first = HumanMessage("Write a haiku.", id="r1")
        >>> resend_message([first], request_id="r1", fresh_context=False, feedback=None).content
        'Write a haiku.'
        >>> resend_message([first], request_id="r1", fresh_context=True, feedback=None).content
        'Continue working on the task. If it is complete, say so.'
    """
    last = previous[0] if previous else None
    if last is None or (fresh_context and last.id == request_id):
        return loop_message(default_message(feedback))
    return loop_message(last.content)
