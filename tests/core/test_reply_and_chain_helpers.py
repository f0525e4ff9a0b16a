"""The helpers the nodes share for the newest reply and for the user's wrapper chains.

- ``newest_reply``: the newest AIMessage, where it is, and which of its calls (valid and
  malformed) no ToolMessage after it answers yet; ``call_names``: each call id's tool.
- ``encodable``: the same message back when nothing needs escaping, a copy when something does.
- ``around``: a chain of LangChain-shaped wrappers (``wrap(request, handler)``) written once runs
  the same under ``drive`` and ``adrive``, a retried handler included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_loop.core.drive import Io, Steps, adrive, aperform, around, drive, perform
from langgraph_loop.core.messages import call_names, encodable, newest_reply


def _reply() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "a", "args": {}, "id": "c1"},
                                     {"name": "b", "args": {}, "id": "c2"}],
                     invalid_tool_calls=[{"name": "c", "args": "{", "id": "c3", "error": "bad json",
                                          "type": "invalid_tool_call"}])


def test_the_newest_reply_comes_with_the_calls_no_tool_message_answered_yet() -> None:
    ai = _reply()
    messages = [HumanMessage("go"), AIMessage("earlier"), ai, ToolMessage("ok", tool_call_id="c2")]
    newest = newest_reply(messages)
    assert (newest.at, newest.reply, newest.pending) == (2, ai, ["c1", "c3"])
    assert [c["id"] for c in newest.calls()] == ["c1"]
    assert [c["id"] for c in newest.calls(invalid=True)] == ["c3"]


def test_a_transcript_without_a_reply_has_no_newest_reply_and_nothing_pending() -> None:
    newest = newest_reply([HumanMessage("go")])
    assert (newest.at, newest.reply, newest.pending, newest.calls()) == (-1, None, [], [])


def test_call_names_names_every_call_malformed_ones_too() -> None:
    assert call_names(_reply()) == {"c1": "a", "c2": "b", "c3": "c"}


def test_encodable_keeps_a_clean_message_and_copies_one_that_needs_escaping() -> None:
    clean = AIMessage("caf\u00e9", tool_calls=[{"name": "f", "args": {"n": ["x", {"k": 1}]}, "id": "c"}])
    assert encodable(clean) is clean
    dirty = AIMessage("", tool_calls=[{"name": "f", "args": {"n": ["x", {"k\udce9": 1}]}, "id": "c"}])
    assert encodable(dirty).tool_calls[0]["args"] == {"n": ["x", {"k\\udce9": 1}]}
    assert dirty.tool_calls[0]["args"] == {"n": ["x", {"k\udce9": 1}]}  # the stored reply is untouched


# --- around: one chain, both modes --------------------------------------------------------------

def _chain(log: list[str], sync_wrap: Callable[..., Any], async_wrap: Callable[..., Awaitable[Any]]
           ) -> Callable[[int, str], Steps[str]]:
    """Two wrappers around a call that fails the first time it is made."""
    calls: list[str] = []

    def call(request: str) -> str:
        calls.append(request)
        log.append(f"call {request}")
        if len(calls) == 1:
            raise TimeoutError("first try")
        return f"answer to {request}"

    async def acall(request: str) -> str:
        return call(request)

    def at(i: int, request: str) -> Steps[str]:
        if i == 2:
            return (yield Io(call, acall, (request,)))
        return (yield around(sync_wrap, async_wrap, f"{request}>{i}", lambda r: at(i + 1, r)))

    return at


def _retrying(log: list[str]) -> tuple[Callable[..., Any], Callable[..., Awaitable[Any]]]:
    """A wrapper that retries once when its handler raises, as ``ModelRetryMiddleware`` does."""
    def wrap(request: str, handler: Callable[[str], str]) -> str:
        log.append(f"wrap {request}")
        try:
            return handler(request)
        except TimeoutError:
            log.append("retry")
            return handler(request)

    async def awrap(request: str, handler: Callable[[str], Awaitable[str]]) -> str:
        log.append(f"wrap {request}")
        try:
            return await handler(request)
        except TimeoutError:
            log.append("retry")
            return await handler(request)

    return wrap, awrap


def test_a_wrapper_chain_written_once_runs_the_same_sync_and_async_a_retry_included() -> None:
    sync_log: list[str] = []
    at = _chain(sync_log, *_retrying(sync_log))
    sync_answer = drive(at(0, "q"), perform)
    async_log: list[str] = []
    at = _chain(async_log, *_retrying(async_log))
    async_answer = asyncio.run(adrive(at(0, "q"), aperform))
    assert sync_answer == async_answer == "answer to q>0>1"
    assert sync_log == async_log == ["wrap q>0", "wrap q>0>1", "call q>0>1", "retry", "call q>0>1"]
