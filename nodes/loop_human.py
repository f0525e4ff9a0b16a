"""Where a loop began, and letting a human decide about a loop stop (``LoopDetection.ask_human``).

**Where it began.** Every loop stop's guard says where the loop began: ``began`` holds the
run's tool-calling response it began at and that reply's message id, and ``checkpoint_id``
the checkpoint from just before the model wrote that reply (the one whose ``next`` is the
model call), found in the thread's history through the checkpointer's public ``list``. Fork
the thread there with LangGraph time travel (``docs/loop-detection.md``). Without a
checkpointer, or with ``durability="exit"`` (no checkpoint per step), it is None.

**A human decides.** With ``ask_human=True`` a loop stop becomes ``interrupt(question)``: the
repeated call, its last results, the rung, where the loop began. Resume with
``Command(resume={"action": "continue"})`` (the calls run; this loop is not stopped again
before it repeats as often once more), ``{"action": "stop"}`` (the stop goes on) or
``{"action": "hint", "hint": "..."}`` (continue, and the model gets the hint as a notice).
The answer is validated inside ``interrupt()`` (its ``response_schema``, ``ANSWER``), as
approval's is: a malformed resume is a ``ValueError`` (pydantic's ``ValidationError``) raised
before LangGraph stores it, so the thread stays paused at the same question and the next valid
answer works. (Checked after ``interrupt()`` returned, the bad value would stay in the task's
resume list, and every later answer would fail with it.)

Example:
    >>> parse_answer({"action": "hint", "hint": "Use the cached copy."})
    ('hint', 'Use the cached copy.')
    >>> parse_answer("stop")
    ('stop', None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt
from pydantic import BeforeValidator
from typing_extensions import TypedDict

from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import clip, is_cut
from langgraph_loop.core.stop import Guard
from langgraph_loop.nodes.loop_detection import Finding, result_text, sign_calls

__all__ = ["ACTIONS", "ANSWER", "HISTORY_LIMIT", "LoopAnswer", "LoopQuestion", "ask", "began_at",
           "checkpoint_before", "evidence", "first_cut", "parse_answer", "question"]

ACTIONS = ("continue", "stop", "hint")
HISTORY_LIMIT = 200
"""Checkpoints looked at, newest first, for the one before the loop began (a loop the
detector stops began within its windows: some 30 calls, a few steps each)."""
RESULT_CHARS = 500

Action = Literal["continue", "stop", "hint"]


class LoopQuestion(TypedDict):
    """The ``interrupt()`` value of a loop stop a human decides."""

    type: Literal["loop_detected"]
    guard: Guard
    calls: list[str]
    results: list[str]
    rung: str
    options: list[str]


def _run_start(messages: Sequence[BaseMessage], request_id: Any) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if request_id is not None and messages[i].id == request_id:
            return i
    return 0


def began_at(messages: Sequence[BaseMessage], request_id: Any, response: int) -> AIMessage | None:
    """The run's ``response``-th tool-calling reply (1-based), where a loop began."""
    seen = 0
    for message in messages[_run_start(messages, request_id):]:
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            seen += 1
            if seen == response:
                return message
    return None


def first_cut(messages: Sequence[BaseMessage], request_id: Any) -> AIMessage | None:
    """The run's first reply cut while it streamed, where a text loop began."""
    return next((m for m in messages[_run_start(messages, request_id):]
                 if isinstance(m, AIMessage) and is_cut(m)), None)


def _writes(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def checkpoint_before(config: RunnableConfig | None, message_id: str | None) -> str | None:
    """The id of the checkpoint the model wrote ``message_id`` from (None: not found)."""
    saver = checkpointer(config)
    configurable = (config or {}).get("configurable") or {}
    if saver is None or message_id is None or configurable.get("thread_id") is None:
        return None
    ns = str(configurable.get("checkpoint_ns") or "")
    thread = {"configurable": {"thread_id": configurable["thread_id"],
                               "checkpoint_ns": ns.rpartition("|")[0]}}
    try:  # read to the end: an async saver's generator must not be left open
        history = list(saver.list(thread, limit=HISTORY_LIMIT))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a saver that cannot list here: no fork point
        return None
    for item in history:
        for _, channel, value in item.pending_writes or ():
            if channel == "messages" and any(getattr(m, "id", None) == message_id
                                             for m in _writes(value)):
                return str(item.config["configurable"]["checkpoint_id"])
    return None


def evidence(messages: Sequence[BaseMessage], request_id: Any, finding: Finding,
             config: LoopDetection, limit: int = 5) -> list[str]:
    """The last ``limit`` results of the finding's calls in this run, oldest first, clipped."""
    wanted = set(finding.sigs)
    ids: set[str] = set()
    start = _run_start(messages, request_id)
    out: list[str] = []
    for message in messages[start:]:
        if isinstance(message, AIMessage):
            ids = {c.id for c in sign_calls(message, config) if c.sig in wanted}
        elif isinstance(message, ToolMessage) and message.tool_call_id in ids:
            out.append(clip(result_text(message.content), RESULT_CHARS))
    return out[-limit:]


def question(guard: Guard, finding: Finding, results: Sequence[str]) -> LoopQuestion:
    """What the human is asked: the repeated calls, their last results, the rung, the guard."""
    return LoopQuestion(type="loop_detected", guard=guard, calls=list(finding.calls),
                        results=list(results), rung=finding.rung, options=list(ACTIONS))


def parse_answer(value: Any) -> tuple[Action, str | None]:
    """``(action, hint)`` from a resume value: an action name, or ``{"action", "hint"}``.

    Raises:
        ValueError: not one of ``continue``, ``stop``, ``hint`` (a hint needs its text).
    """
    answer: Mapping[str, Any] = {"action": value} if isinstance(value, str) else value
    if not isinstance(answer, Mapping) or answer.get("action") not in ACTIONS:
        raise ValueError(f"loop detection: resume with one of {ACTIONS} (or a dict "
                         f"{{'action': ..., 'hint': ...}}), got {value!r}")
    hint = answer.get("hint")
    if answer["action"] == "hint" and not (isinstance(hint, str) and hint.strip()):
        raise ValueError("loop detection: a 'hint' answer needs a non-empty 'hint' text")
    action: Action = answer["action"]
    return action, hint if action == "hint" else None


class LoopAnswer(TypedDict):
    """A human's answer to a ``LoopQuestion``, as a dict."""

    action: Action
    hint: NotRequired[str]


def _checked(value: Any) -> Any:
    parse_answer(value)
    return value


ANSWER = Annotated[Action | LoopAnswer, BeforeValidator(_checked)]
"""The resume schema of the loop question: an action name or a ``LoopAnswer``, checked by
``parse_answer`` (inside ``interrupt()``, before LangGraph stores the value)."""


def ask(loop_question: LoopQuestion) -> tuple[Action, str | None]:
    """Ask a human (``interrupt()``); ``(action, hint)`` from the validated answer.

    Raises:
        ValueError: a malformed resume (the thread stays paused at the same question).
    """
    return parse_answer(interrupt(loop_question, response_schema=ANSWER))  # type: ignore[call-overload]
