"""Shared helpers of the fault-reproduction tests (issue 21), on the public API only.

``check_pairing`` (the library's own rule of a provider-valid list) and ``encodable_text``
(its one repair of text a strict encoder refuses) are imported here and nowhere else in
``tests/faults``: if they move again, only the import below changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import RunnableConfig

from langgraph_loop.core.messages import check_pairing, encodable_text  # the one line to change
from langgraph_loop.scripted import ScriptedChatModel

__all__ = [
    "Meter",
    "TokenCountingModel",
    "as_stored",
    "assert_rejected",
    "assert_valid",
    "check_pairing",
    "check_requests",
    "kinds",
    "priced",
    "stored",
    "text_of",
    "texts",
    "thread",
    "tokens",
]


def thread(tid: str) -> RunnableConfig:
    """A config for one thread."""
    return {"configurable": {"thread_id": tid}}


def as_stored(value: Any) -> Any:
    """A value the model said as the loop stores it: every string ``encodable_text``."""
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_stored(v) for v in value]
    return value


def assert_valid(messages: Sequence[BaseMessage]) -> None:
    """The list is provider-valid (the pairing invariant)."""
    problems = check_pairing(messages)
    assert not problems, problems


def check_requests(model: ScriptedChatModel) -> None:
    """Every request the model received is provider-valid."""
    for i, request in enumerate(model.requests):
        problems = check_pairing(request)
        assert not problems, f"request {i} is not provider-valid: {problems}"


def kinds(messages: Sequence[BaseMessage]) -> list[str]:
    """Short type names: ``ai+calls`` for an AIMessage with calls, ``tool:<status>``."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            out.append("ai+calls" if m.tool_calls else "ai")
        elif isinstance(m, ToolMessage):
            out.append(f"tool:{m.status}")
        else:
            out.append(m.type)
    return out


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    """The text content of each message (block lists joined)."""
    return [text_of(m.content) for m in messages]


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def stored(agent: Any, config: RunnableConfig) -> tuple[list[tuple[str, str, Any]], int]:
    """What the thread holds: ``(type, text, id)`` per message, and how many checkpoints."""
    values = agent.get_state(config).values or {}
    messages = [(m.type, text_of(m.content), m.id) for m in values.get("messages") or []]
    return messages, len(list(agent.get_state_history(config)))


def assert_rejected(agent: Any, model: ScriptedChatModel, config: RunnableConfig,
                    run: Callable[[], Any]) -> str:
    """``run()`` raises ``ValueError`` having called no model and written nothing to the
    thread (same messages, no new checkpoint); the thread stays readable. Returns the
    error text."""
    before, calls = stored(agent, config), model.calls
    with pytest.raises(ValueError) as info:
        run()
    assert model.calls == calls, "the model was called for an input that was rejected"
    try:
        after = stored(agent, config)
    except Exception as exc:  # noqa: BLE001 - the fault itself: a thread nobody can read
        pytest.fail(f"the thread cannot be read after the rejected input: {exc!r}")
    assert after == before, "a rejected input changed the thread"
    return str(info.value)


# --- token accounting ------------------------------------------------------------------


def tokens(messages: Sequence[BaseMessage]) -> int:
    """A tokenizer like a real provider's: about one token per non-Latin character,
    four Latin characters per token, plus 4 per message and 5 per tool call."""
    total = 0.0
    for m in messages:
        total += 4 + sum(1.0 if ord(c) > 127 else 0.25 for c in text_of(m.content))
        if isinstance(m, AIMessage):
            total += sum(5 + len(str(c["args"])) / 4 for c in m.tool_calls)
    return math.ceil(total)


Reply = str | AIMessage | list[tuple[str, dict[str, Any]]]


def priced(reply: Reply | Callable[[list[BaseMessage]], Reply]) -> Callable[[list[BaseMessage]], AIMessage]:
    """A ``ScriptedChatModel`` script item whose reply reports the usage ``tokens`` bills."""

    def item(messages: list[BaseMessage]) -> AIMessage:
        answer = reply(messages) if callable(reply) else reply
        if isinstance(answer, str):
            message = AIMessage(answer)
        elif isinstance(answer, AIMessage):
            message = answer.model_copy()
        else:
            message = AIMessage("", tool_calls=[
                {"name": name, "args": args, "id": f"call_{len(messages)}_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(answer)])
        inp, out = tokens(messages), tokens([message])
        message.usage_metadata = {"input_tokens": inp, "output_tokens": out,
                                  "total_tokens": inp + out}
        return message

    return item


class TokenCountingModel(ScriptedChatModel):
    """A scripted model with its own token counter (``get_num_tokens_from_messages``),
    the one that bills its ``priced`` replies."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage],
                                     tools: Sequence[Any] | None = None) -> int:
        return tokens(messages)


class Meter(BaseCallbackHandler):
    """What a provider would bill: the reported usage of every call a model answered
    (attach with ``ScriptedChatModel(callbacks=[meter])``; compaction calls included)."""

    def __init__(self) -> None:
        self.billed: list[int] = []

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
                self.billed.append(int((usage or {}).get("total_tokens", 0)))

    @property
    def total(self) -> int:
        return sum(self.billed)
