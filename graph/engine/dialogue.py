"""Where a loop began (``began``, ``checkpoint_id``), and with ``LoopDetection.ask_human`` the
question a loop stop becomes (``docs/loop-detection.md#let-a-person-decide``). The answer is
validated inside ``interrupt()`` (``ANSWER``): a bad one is never stored, the thread stays paused
(examples: ``tests/core/test_dialogue_helpers.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from langgraph_loop.core import prompts
from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import (
    as_redirect,
    block_answer,
    call_ids,
    call_names,
    clip,
    is_cut,
    is_notice,
    is_redirect,
    iteration_messages,
)
from langgraph_loop.core.questions import answer_schema, ask_plainly, one_action, the_decision
from langgraph_loop.core.stop import Guard
from langgraph_loop.engine.detection import Finding, result_text, sign_calls

__all__ = ["ANSWER", "HISTORY_LIMIT", "QUESTION_TEXT", "QUESTION_TITLE", "ask", "began_at",
           "checkpoint_before", "evidence", "first_cut", "parse_answer", "question", "typed_instead"]

HISTORY_LIMIT = 200
"""Checkpoints read, newest first, for the one before the loop began (within the windows: ~30 calls)."""
RESULT_CHARS = 500

Action = Literal["continue", "stop", "hint"]


def began_at(messages: Sequence[BaseMessage], request_id: Any, response: int) -> AIMessage | None:
    """The run's ``response``-th tool-calling reply (1-based), where a loop began."""
    seen = 0
    for message in iteration_messages(messages, request_id):
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            seen += 1
            if seen == response:
                return message
    return None


def first_cut(messages: Sequence[BaseMessage], request_id: Any) -> AIMessage | None:
    """The run's first reply cut while it streamed, where a text loop began."""
    return next((m for m in iteration_messages(messages, request_id)
                 if isinstance(m, AIMessage) and is_cut(m)), None)


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
                                             for m in (value if isinstance(value, list) else [value])):
                return str(item.config["configurable"]["checkpoint_id"])
    return None


def evidence(messages: Sequence[BaseMessage], request_id: Any, finding: Finding,
             config: LoopDetection, limit: int = 5) -> list[str]:
    """The last ``limit`` results of the finding's calls in this run, oldest first, clipped."""
    wanted = set(finding.sigs)
    ids: set[str] = set()
    out: list[str] = []
    for message in iteration_messages(messages, request_id):
        if isinstance(message, AIMessage):
            ids = {c.id for c in sign_calls(message, config) if c.sig in wanted}
        elif isinstance(message, ToolMessage) and message.tool_call_id in ids:
            out.append(clip(result_text(message.content), RESULT_CHARS))
    return out[-limit:]


QUESTION_TITLE = "Loop detected: {tools}"  # the loop question's action name: the title a chat UI shows
QUESTION_TEXT = (
    "The agent is repeating itself: it asked for {calls} {count} times without making "
    "progress, and the run is paused before that runs again.\n\nLast result: {result}\n\n"
    "- Approve: let it run the call and go on (this loop is not stopped again until it "
    "repeats as often once more).\n"
    "- Edit: write a hint for the agent in \"hint\"; it goes on and reads your hint.\n"
    "- Reject: stop here; the agent tells you what it has so far (your reason is passed to it).")


def question(guard: Guard, finding: Finding, results: Sequence[str]) -> HITLRequest:
    """The loop question, titled with the repeated tools (``QUESTION_TEXT`` says the rest)."""
    tools = ", ".join(dict.fromkeys(c.split("(", 1)[0] for c in finding.calls)) or finding.tool
    text = QUESTION_TEXT.format(calls=clip(", ".join(finding.calls) or finding.tool, 300),
                                count=finding.count,
                                result=results[-1] if results else "(none recorded)")
    return one_action(QUESTION_TITLE.format(tools=clip(tools, 80)), {"hint": ""}, text)


def parse_answer(value: Any) -> tuple[Action, str | None]:
    """``(action, text)`` from a resume value: ``continue``, ``hint`` with the hint, ``stop``
    with the person's reason (or None); a ``ValueError`` names the shape to send."""
    decision = the_decision(value, "loop question")
    if decision["type"] == "approve":
        return "continue", None
    if decision["type"] == "reject":
        message = decision.get("message")
        return "stop", message.strip() if isinstance(message, str) and message.strip() else None
    args = (decision.get("edited_action") or {}).get("args")
    hint = args.get("hint", "") if isinstance(args, Mapping) else None
    if not isinstance(hint, str):
        raise ValueError(f"loop question: an 'edit' carries its hint as args {{'hint': '...'}}, "
                         f"got {args!r}")
    return ("hint", hint.strip()) if hint.strip() else ("continue", None)


ANSWER = answer_schema(parse_answer)
"""The loop question's resume schema, checked inside ``interrupt()`` before it is stored."""


def typed_instead(messages: Sequence[BaseMessage]) -> list[BaseMessage] | None:
    """The writes that take a message typed while the loop question was open as a redirect of the
    paused run (its detector window and budget go on): the paused calls answered as not run
    (``TYPED_INSTEAD``, a blocked call's kind; a chat UI's placeholder replaced in place); else None."""
    person = messages[-1] if messages else None
    if not isinstance(person, HumanMessage) or is_notice(person) or is_redirect(person):
        return None
    index = next((i for i in range(len(messages) - 2, -1, -1) if isinstance(messages[i], AIMessage)), -1)
    ai = messages[index] if index >= 0 else None
    if not isinstance(ai, AIMessage) or not call_ids(ai):
        return None
    names = call_names(ai)
    given = {m.tool_call_id: m.id for m in messages[index + 1:-1] if isinstance(m, ToolMessage)}
    answers: list[BaseMessage] = [
        block_answer(i, names.get(i), prompts.TYPED_INSTEAD,
                     given.get(i) or f"typed-instead-{i}")  # applied twice: the same writes
        for i in call_ids(ai)]
    if all(i in given for i in call_ids(ai)):  # each answer replaces the placeholder, in place
        return [*answers, as_redirect(person)]
    later = [m for m in messages[index + 1:] if not isinstance(m, ToolMessage)]
    moved = [m.model_copy(update={"id": f"{m.id}-moved"}) for m in later[:-1]]  # a kept id stays put
    return [*(RemoveMessage(id=str(m.id)) for m in later), *answers, *moved,
            as_redirect(person.model_copy(update={"id": f"{person.id}-moved"}))]


def ask(loop_question: HITLRequest) -> tuple[Action, str | None]:
    """Ask a person (``interrupt()``); ``(action, text)`` from the validated answer."""
    return parse_answer(ask_plainly(loop_question, ANSWER))
