"""Calling user callbacks that may be sync or async, from sync or async nodes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from langgraph_loop.core.drive import Io

__all__ = ["CallbackError", "call_async", "call_sync", "callback"]


class CallbackError(RuntimeError):
    """A user callback raised; the message names the callback."""


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a loop is running in this thread
        return pool.submit(asyncio.run, coro).result()


@contextmanager
def _naming(name: str | None) -> Iterator[None]:
    """An exception raised inside becomes a ``CallbackError`` naming the callback (with a name)."""
    try:
        yield
    except Exception as exc:
        if name is None:
            raise
        raise CallbackError(f"{name} raised {type(exc).__name__}: {exc}") from exc


def call_sync(fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
    """Call ``fn``; run it to completion if it is a coroutine function."""
    with _naming(name):
        result = fn(*args)
        return _run(_await(result)) if inspect.isawaitable(result) else result


async def call_async(fn: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
    """Call ``fn`` and await the result when it is awaitable."""
    with _naming(name):
        result = fn(*args)
        return await result if inspect.isawaitable(result) else result


def callback(fn: Callable[..., Any], *args: Any, name: str) -> Io:
    """A user's callback as one blocking call of a step: ``call_sync``, or ``call_async`` in an async run."""
    return Io(call_sync, call_async, (fn, *args), {"name": name})


async def _await(awaitable: Any) -> Any:
    return await awaitable
