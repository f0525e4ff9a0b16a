"""Calling user callbacks that may be sync or async, from sync or async nodes.

Example:
    >>> async def later(x):
    ...     return x + 1
    >>> call_sync(later, 1)
    2
    >>> call_sync(lambda x: x * 2, 4)
    8
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeAlias, TypeVar

from langchain_core.tools import BaseTool

from langgraph_loop.core.drive import Io

__all__ = [
    "CallbackError",
    "Continuation",
    "FeedbackHook",
    "ShouldContinue",
    "ToolFilter",
    "call_async",
    "call_sync",
    "callback",
]

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]
State: TypeAlias = Mapping[str, Any]

ShouldContinue: TypeAlias = Callable[[State], MaybeAwaitable[bool | tuple[bool, str | None]]]
"""``should_continue(state) -> bool | (bool, feedback)``: run another iteration?"""
Continuation: TypeAlias = Callable[[State, str | None], MaybeAwaitable[str | None]]
"""``continuation(state, feedback) -> str | None``: the next iteration's text (None: re-send
the previous iteration's input)."""
FeedbackHook: TypeAlias = Callable[[State, str | None], MaybeAwaitable[str | None]]
"""``record_feedback(state, feedback) -> str | None``: the progress-log entry of an iteration."""
ToolFilter: TypeAlias = Callable[[State, list[BaseTool]], MaybeAwaitable[Sequence[BaseTool | str]]]
"""``tool_filter(state, tools) -> tools``: the tools offered to one model call."""


class CallbackError(RuntimeError):
    """A user callback raised; the message names the callback."""


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a loop is running in this thread
        return pool.submit(asyncio.run, coro).result()


def call_sync(fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
    """Call ``fn``; run it to completion if it is a coroutine function."""
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = _run(_await(result))
    except Exception as exc:
        if name is None:
            raise
        raise CallbackError(f"{name} raised {type(exc).__name__}: {exc}") from exc
    return result


async def call_async(fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
    """Call ``fn`` and await the result when it is awaitable."""
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        if name is None:
            raise
        raise CallbackError(f"{name} raised {type(exc).__name__}: {exc}") from exc
    return result


def callback(fn: Callable[..., Any], *args: Any, name: str) -> Io:
    """A user's callback as one blocking call of a step (``core/drive.py``): ``call_sync`` in a
    sync run, ``call_async`` in an async one."""
    return Io(call_sync, call_async, (fn, *args), {"name": name})


async def _await(awaitable: Any) -> Any:
    return await awaitable
