"""What a provider-valid message list is (``pairing_problems``: the one definition of the pairing
rules), the deferred-notice queue (both: docs/architecture.md), the loop's tags (``is_notice``:
the one rule that finds notices), and one helper each for a message's text.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Collection, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from typing_extensions import TypedDict

from langgraph_loop.core import prompts

MessageT = TypeVar("MessageT", bound=BaseMessage)

__all__ = ["BLOCKED_KIND", "BUDGET_NOTICE", "CONTINUE_NAME", "CUT_KEY", "LOOP_NOTICE", "NOTICE_NAMES",
           "NOTICE_SOURCE", "PROGRESS_NAME", "STOP_NOTICE", "SUMMARY_NAME", "TAGS", "NewestReply", "Notice",
           "Problem", "as_message", "as_redirect", "as_text", "block_answer", "call_ids", "call_label",
           "call_names", "cap_output", "check_pairing", "clip", "describe", "digest", "drain", "encodable",
           "encodable_text", "is_blocked", "is_cut", "is_notice", "is_redirect", "iteration_messages",
           "loop_message", "newest_reply", "notice_marks", "notice_message", "pairing_problems",
           "queue_notice", "reply_text", "shorten", "with_unique_call_ids",
           "work_call_ids"]

STOP_NOTICE = "stop_notice"  # the run was stopped (the tools-free final answer call reads it)
BUDGET_NOTICE = "budget_notice"  # budget pressure: finalize now (``BudgetPressure.instruction``)
LOOP_NOTICE = "loop_notice"  # a loop warning from the loop detector, or a person's hint about a loop
NOTICE_NAMES = (STOP_NOTICE, BUDGET_NOTICE, LOOP_NOTICE)  # in the order that names a merged one
NOTICE_SOURCE = "langgraph_loop"  # the notices' ``lc_source`` (langchain-core's notification metadata)
CONTINUE_NAME = "loop_continue"  # the message that starts the next iteration
PROGRESS_NAME = "loop_progress"  # the progress log sent in a fresh-context request
SUMMARY_NAME = "loop_summary"  # the summary that replaced compacted messages
RESPOND_NAME = "loop_respond"  # the instruction of the structured final turn (never stored)
TAGS = (*NOTICE_NAMES, CONTINUE_NAME, PROGRESS_NAME, SUMMARY_NAME, RESPOND_NAME)
"""Every ``name`` the loop gives the user-role messages it writes."""


BLOCKED_KIND = "loop_blocked"  # the ``langgraph_loop`` tag's kind on the answer to a blocked call
CUT_KEY = "langgraph_loop_cut"  # ``response_metadata`` key of a reply cut while it streamed (value: "text")


def _kind(message: BaseMessage) -> Any:
    """The ``kind`` of the loop's tag on a message (``additional_kwargs["langgraph_loop"]``)."""
    tag = message.additional_kwargs.get("langgraph_loop")
    return tag.get("kind") if isinstance(tag, dict) else None


def is_blocked(message: BaseMessage) -> bool:
    """Is this ToolMessage the loop detector's answer to a blocked call (not a real result)?"""
    return _kind(message) == BLOCKED_KIND


def block_answer(call_id: str, name: str | None, text: str, id: str | None = None) -> ToolMessage:
    """The error ToolMessage that answers one call not run (tagged: not a tool result)."""
    return ToolMessage(text, tool_call_id=call_id, name=name, status="error", id=id,
                       additional_kwargs={"langgraph_loop": {"kind": BLOCKED_KIND}})


def is_cut(message: BaseMessage) -> bool:
    """Was this reply cut while it streamed (its text looped)?"""
    return isinstance(message, AIMessage) and CUT_KEY in message.response_metadata


class Notice(TypedDict):
    """A message queued for the model's next call (the deferred-notice queue)."""

    run: str
    key: str
    text: str
    source: str


def loop_message(content: str | list[Any], *, name: str, **kwargs: Any) -> HumanMessage:
    """A user-role message the loop writes, tagged with ``name``."""
    return HumanMessage(content, name=name, **kwargs)  # type: ignore[arg-type]


# --- pairing ---------------------------------------------------------------------------------

def call_ids(message: BaseMessage) -> list[str]:
    """Ids of an AIMessage's tool calls, malformed ones (``invalid_tool_calls``) included."""
    if not isinstance(message, AIMessage):
        return []
    return [str(c.get("id")) for c in [*message.tool_calls, *message.invalid_tool_calls]]


def work_call_ids(ai: AIMessage, output_tools: Collection[str] = ()) -> list[str]:
    """The reply's calls the tools must answer: all but calls of ``output_tools`` (the
    structured-output tools; a reply that only calls those is an answer, like text)."""
    skip = {str(c["id"]) for c in ai.tool_calls if c["name"] in output_tools} if output_tools else None
    return [c for c in call_ids(ai) if c not in skip] if skip else call_ids(ai)


def with_unique_call_ids(message: AIMessage) -> AIMessage:
    """The reply with a fresh id for every call whose id is missing or repeats an earlier one
    (valid and malformed calls alike), so the request and the transcript agree."""
    ids = call_ids(message)
    if all(i and i != "None" for i in ids) and len(set(ids)) == len(ids):
        return message
    seen: set[str] = set()

    def fixed(calls: Sequence[Any]) -> list[Any]:
        out = []
        for call in calls:
            cid = call.get("id")
            if not cid or cid in seen:
                cid = f"call_{uuid.uuid4().hex[:24]}"
            seen.add(cid)
            out.append({**call, "id": cid})
        return out

    return message.model_copy(update={"tool_calls": fixed(message.tool_calls),
                                      "invalid_tool_calls": fixed(message.invalid_tool_calls)})


class Problem(NamedTuple):
    """One broken pairing rule: at which message index, which ``rule``, the call ids involved, and
    for ``unanswered`` the message that came before the answers (None: the list ended)."""

    at: int
    rule: Literal["system_first", "orphan_tool", "unanswered", "duplicate_ids"]
    ids: tuple[str, ...] = ()
    before: int | None = None


def pairing_problems(messages: Sequence[BaseMessage]) -> list[Problem]:
    """The pairing rules a list breaks, in order (empty = valid): the one definition."""
    problems: list[Problem] = []
    waiting: list[str] = []
    owner = -1
    for i, msg in enumerate(messages):
        if isinstance(msg, SystemMessage) and i != 0:
            problems.append(Problem(i, "system_first"))
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id in waiting:
                waiting.remove(msg.tool_call_id)
            else:
                problems.append(Problem(i, "orphan_tool", (msg.tool_call_id,)))
            continue
        if waiting:
            problems.append(Problem(owner, "unanswered", tuple(waiting), i))
            waiting = []
        ids = call_ids(msg)
        if ids:
            if len(set(ids)) != len(ids):
                problems.append(Problem(i, "duplicate_ids", tuple(ids)))
            waiting, owner = list(dict.fromkeys(ids)), i
    if waiting:
        problems.append(Problem(owner, "unanswered", tuple(waiting)))
    return problems


def describe(problem: Problem, messages: Sequence[BaseMessage]) -> str:
    """A problem as one line, naming the message by its index."""
    i, ids = problem.at, list(problem.ids)
    if problem.rule == "system_first":
        return f"message {i}: system message not first"
    if problem.rule == "orphan_tool":
        return f"message {i}: tool message {ids[0]!r} answers no open call"
    if problem.rule == "duplicate_ids":
        return f"message {i}: duplicate tool call ids {ids}"
    if problem.before is None:
        return f"message {i}: tool calls {ids} not answered at the end"
    return (f"message {i}: tool calls {ids} not answered before message {problem.before} "
            f"({messages[problem.before].type})")


def check_pairing(messages: Sequence[BaseMessage]) -> list[str]:
    """Problems that would make a provider reject this message list (empty = valid)."""
    return [describe(p, messages) for p in pairing_problems(messages)]


def iteration_messages(messages: Sequence[BaseMessage], start_id: str | None) -> list[BaseMessage]:
    """The messages of an iteration (or a run) from ``start_id`` on (scans back; all when not found)."""
    for i in range(len(messages) - 1, -1, -1):
        if start_id is not None and messages[i].id == start_id:
            return list(messages[i:])
    return list(messages)


class NewestReply(NamedTuple):
    """The newest AIMessage of a list (``newest_reply``): its index (-1: none), the reply, and
    the ids of its calls (valid and malformed) that no ToolMessage after it answers."""

    at: int
    reply: AIMessage | None
    pending: list[str]

    def calls(self, *, invalid: bool = False) -> list[dict[str, Any]]:
        """Its unanswered calls (``invalid``: the malformed ones), each a copy."""
        calls = [] if self.reply is None else (
            self.reply.invalid_tool_calls if invalid else self.reply.tool_calls)
        return [dict(c) for c in calls if c.get("id") in self.pending]


def newest_reply(messages: Sequence[BaseMessage]) -> NewestReply:
    """The newest reply and its unanswered calls (scans the tail only)."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            answered.add(msg.tool_call_id)
        elif isinstance(msg, AIMessage):
            return NewestReply(i, msg, [c for c in call_ids(msg) if c not in answered])
    return NewestReply(-1, None, [])


def call_names(ai: AIMessage) -> dict[str, str | None]:
    """Call id → tool name for every call of a reply (valid and malformed)."""
    return {str(c.get("id")): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}


def as_message(result: Any, what: str) -> AIMessage:
    """A model's result that must be a reply (``TypeError`` naming ``what`` if not)."""
    if not isinstance(result, AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected an AIMessage")
    return result


# --- the deferred-notice queue ---------------------------------------------------------------

def queue_notice(pending: Sequence[Notice] | None, *, run: str, key: str, text: str,
                 source: str) -> list[Notice]:
    """Return the queue with a notice added, unless one with the same key is queued."""
    current = list(pending or [])
    if any(n["key"] == key and n["run"] == run for n in current):
        return current
    current.append({"run": run, "key": key, "text": text, "source": source})
    return current


_NAME_OF_SOURCE = {"stop": STOP_NOTICE, "budget_pressure": BUDGET_NOTICE}  # the rest: LOOP_NOTICE


def notice_name(sources: Collection[str]) -> str:
    """A merged notice's name: a stop's, else budget pressure's, else a loop's (``NOTICE_NAMES``)."""
    names = {_NAME_OF_SOURCE.get(source, LOOP_NOTICE) for source in sources}
    return next((name for name in NOTICE_NAMES if name in names), LOOP_NOTICE)


HIDDEN_ID_PREFIX = "do-not-render-"  # Agent Chat UI's DO_NOT_RENDER_ID_PREFIX: ids kept out of the transcript
REDIRECT_KIND = "budget_redirect"  # tag kind of a person's message at the budget check-in or loop question


def is_redirect(message: BaseMessage) -> bool:
    """Is this a person's redirect of a run (not a new run's request)?"""
    return isinstance(message, HumanMessage) and _kind(message) == REDIRECT_KIND


def as_redirect(message: HumanMessage) -> HumanMessage:
    """The person's message marked as a redirect of the run (same id: it replaces itself)."""
    kwargs = {**message.additional_kwargs, "langgraph_loop": {"kind": REDIRECT_KIND}}
    return message.model_copy(update={"additional_kwargs": kwargs})


def run_request(messages: Sequence[BaseMessage]) -> tuple[int, str | None]:
    """Where a run starts in a thread (its request's index, 0 when none) and the request's id:
    the newest user message that is neither a notice, a redirect nor a summary (LangChain's
    ``SummarizationMiddleware`` writes one as a user message); ``create_agent`` keeps no run record."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if (isinstance(message, HumanMessage) and not is_notice(message) and not is_redirect(message)
                and message.additional_kwargs.get("lc_source") != "summarization"):  # a summary
            return i, message.id
    return 0, None


def is_notice(message: BaseMessage) -> bool:
    """Is this a notice the loop delivered to the model (the one rule to filter notices out)?"""
    return isinstance(message, HumanMessage) and (
        message.additional_kwargs.get("lc_source") == NOTICE_SOURCE
        or _kind(message) == "notice" or message.name in NOTICE_NAMES)


def notice_marks(name: str, sources: list[str]) -> dict[str, Any]:
    """A notice's tags: those of langchain-core's ``add_notification_metadata``, and the loop's."""
    return {"lc_source": NOTICE_SOURCE, "lc_data": {"kind": name, "sources": sources},
            "langgraph_loop": {"kind": "notice", "sources": sources}}


def notice_message(notices: Sequence[Notice], *, hidden: bool = True) -> HumanMessage | None:
    """Merge notices (de-duplicated by text, in order) into one message named by
    ``notice_name`` (``notice_marks``); ``hidden``: an id chat UIs do not render."""
    texts = list(dict.fromkeys(n["text"] for n in notices))
    if not texts:
        return None
    sources = sorted({n["source"] for n in notices})
    name = notice_name(sources)
    message_id = f"{HIDDEN_ID_PREFIX}{uuid.uuid4()}" if hidden else None
    return loop_message("\n\n".join(texts), name=name, id=message_id,
                        additional_kwargs=notice_marks(name, sources))


def drain(pending: Sequence[Notice] | None, *, run: str, hidden: bool = True) -> HumanMessage | None:
    """This run's queued notices as one message (other runs' dropped); the caller empties the queue."""
    return notice_message([n for n in (pending or []) if n["run"] == run], hidden=hidden)


# --- text ------------------------------------------------------------------------------------

_SHORT = 4096  # UTF-8 bytes up to which ``digest`` uses BLAKE2b, and SHA-1 above


def digest(text: str, length: int = 16) -> str:
    """A short, stable hex digest of any ``text`` (``length`` ≤ 40; lone surrogates hashed as
    they are): BLAKE2b for a short text, SHA-1 (faster per byte) for a long one."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= _SHORT:
        return hashlib.blake2b(data, digest_size=20).hexdigest()[:length]
    return hashlib.sha1(data).hexdigest()[:length]


_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def encodable_text(text: str) -> str:
    """``text`` a strict UTF-8 encoder accepts: a surrogate pair becomes its character and a
    lone surrogate its escape (``'\\udcff'``), so nothing is dropped."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    text = _PAIR.sub(lambda m: m.group().encode("utf-16", "surrogatepass").decode("utf-16"), text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable_value(value: Any) -> Any:
    """A JSON-like value with every string (keys too) ``encodable_text``; the same object if unchanged."""
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        new: Any = {_encodable_value(k): _encodable_value(v) for k, v in value.items()}
    elif isinstance(value, list | tuple):
        new = type(value)(_encodable_value(v) for v in value)
    else:
        return value
    return value if new == value else new


def encodable(message: MessageT) -> MessageT:
    """The message with its text and its tool calls' arguments ``encodable_text`` (the same
    object when there is nothing to escape; docs/reliability.md, "What the loop repairs")."""
    if isinstance(message.content, str) and message.content.isascii() and not (
            isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls)):
        return message  # the usual tool result or text: nothing to walk
    fields: dict[str, Any] = {"content": message.content}
    if isinstance(message, AIMessage):
        fields.update(tool_calls=message.tool_calls, invalid_tool_calls=message.invalid_tool_calls)
    update = {k: _encodable_value(v) for k, v in fields.items()}
    if all(update[k] is v for k, v in fields.items()):
        return message
    if isinstance(message, AIMessage) and "tool_calls" in message.additional_kwargs:
        update["additional_kwargs"] = _encodable_value(message.additional_kwargs)
    return message.model_copy(update=update)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten(text: str, limit: int = 500) -> str:
    """Collapse whitespace and cut to ``limit`` characters with an ellipsis."""
    return clip(" ".join(text.split()), limit)


def as_text(content: Any) -> str:
    """Message content as text: a string as it is, anything else as JSON."""
    return content if isinstance(content, str) else json.dumps(content, default=str)


def reply_text(content: Any, additional: dict[str, Any] | None = None) -> str:
    """A reply's own text: its text and reasoning blocks, and a ``reasoning_content`` field."""
    if isinstance(content, str) and not (additional and "reasoning_content" in additional):
        return content  # the usual reply: its text as it is
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                parts += [str(block[k]) for k in ("text", "thinking", "reasoning")
                          if isinstance(block.get(k), str)]
    reasoning = (additional or {}).get("reasoning_content")
    if isinstance(reasoning, str):
        parts.insert(0, reasoning)
    return "\n".join(p for p in parts if p)


def call_label(name: object, args: Any) -> str:
    """A tool call as people read it: ``name(args)`` (args already text are kept as they are)."""
    text = args if isinstance(args, str) else json.dumps(args, default=str, ensure_ascii=False)
    return f"{name}({text})"


def cap_output(content: Any, limit: int | None) -> Any:
    """Content cut to ``limit`` characters of text, saying so (strings and content blocks)."""
    if limit is None:
        return content
    if isinstance(content, str):
        if len(content) <= limit:
            return content
        return content[:limit] + prompts.OUTPUT_TRUNCATED.format(length=len(content), limit=limit)
    if not isinstance(content, list):
        return content
    total = sum(len(str(b.get("text", ""))) if isinstance(b, dict) else len(str(b)) for b in content)
    if total <= limit:
        return content
    out: list[Any] = []
    left = limit
    for block in content:
        text = str(block.get("text", "")) if isinstance(block, dict) else str(block)
        if left <= 0:
            break
        kept = text[:left]
        left -= len(kept)
        out.append({**block, "text": kept} if isinstance(block, dict) else kept)
    note = prompts.OUTPUT_TRUNCATED.format(length=total, limit=limit).strip()
    return [*out, {"type": "text", "text": note}]
