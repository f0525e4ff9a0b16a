"""Write node logic once; run it sync or async.

A node's logic is a generator that yields *effects* (call a callback, invoke a
runnable, run several invocations in parallel) and receives their results. The
thin drivers ``run_sync`` and ``run_async`` perform the effects the sync or the
async way. Pure decisions stay plain functions.

Example:
    >>> def logic():
    ...     x = yield Call(lambda a: a + 1, (1,))
    ...     return x * 10
    >>> run_sync(logic())
    20
    >>> import asyncio
    >>> asyncio.run(run_async(logic()))
    20
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.func import task

from langgraph_loop.core.callbacks import call_async, call_sync

__all__ = ["Call", "Invoke", "Logic", "Parallel", "StructuredReply", "Tasks", "as_message",
           "as_structured", "run_async", "run_sync"]


@dataclass(frozen=True)
class Call:
    """Call a user callback (sync or async); ``name`` labels its errors."""

    fn: Any
    args: tuple[Any, ...] = ()
    name: str | None = None


@dataclass(frozen=True)
class Invoke:
    """Invoke a runnable with an input and a config."""

    runnable: Runnable[Any, Any]
    input: Any
    config: RunnableConfig | None = None


@dataclass(frozen=True)
class Parallel:
    """Run several thunks ``(sync_fn, async_fn)`` concurrently; results in order."""

    tasks: Sequence[tuple[Any, Any]] = field(default_factory=tuple)


@dataclass(frozen=True)
class Tasks:
    """Run ``fn(*args)`` for each ``args`` as LangGraph tasks, concurrently; results in order.

    Each task's result is written to the checkpoint as soon as it finishes, so when the
    step is run again (after a crash, an interrupt or a retry) finished tasks return
    their saved result instead of running again. Only inside a running graph.
    ``fn``/``afn`` (sync/async) must be module-level functions with the same
    ``__name__`` (the name is part of the task id, so a thread may resume in the other
    mode); they may take a ``config: RunnableConfig`` keyword (the task's config).
    """

    fn: Any
    afn: Any
    inputs: Sequence[tuple[Any, ...]] = field(default_factory=tuple)


Effect = Call | Invoke | Parallel | Tasks


class StructuredReply(TypedDict):
    """What ``with_structured_output(..., include_raw=True)`` returns."""

    raw: AIMessage
    parsed: Any
    parsing_error: BaseException | None


def as_message(result: Any, what: str) -> AIMessage:
    """An ``Invoke`` result that must be a model reply (``TypeError`` naming ``what`` if not).

    Example:
        >>> as_message(AIMessage("hi"), "model").content
        'hi'
    """
    if not isinstance(result, AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected an AIMessage")
    return result


def as_structured(result: Any, what: str) -> StructuredReply:
    """An ``Invoke`` result of a structured-output runnable with ``include_raw=True``."""
    if not isinstance(result, dict) or not isinstance(result.get("raw"), AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected "
                        "{'raw': AIMessage, 'parsed': ..., 'parsing_error': ...}")
    return {"raw": result["raw"], "parsed": result.get("parsed"),
            "parsing_error": result.get("parsing_error")}


@functools.cache
def _as_task(fn: Any) -> Any:
    return task(fn)


def _settled(results: Sequence[Any]) -> list[Any]:
    """Results once every task has finished; the first failure is raised after that.

    Waiting for all means no call is left running when the step fails, so every call
    that finished has its result saved and none runs twice on resume.
    """
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


def _tasks_sync(effect: Tasks) -> list[Any]:
    run = _as_task(effect.fn)
    futures = [run(*args) for args in effect.inputs]  # scheduled in order: stable task ids
    concurrent.futures.wait(futures)
    return _settled([f.exception() or f.result() for f in futures])


async def _tasks_async(effect: Tasks) -> list[Any]:
    run = _as_task(effect.afn)
    futures = [run(*args) for args in effect.inputs]
    return _settled(await asyncio.gather(*futures, return_exceptions=True))


Logic = Generator[Effect, Any, Any]


def _perform_sync(effect: Effect) -> Any:
    if isinstance(effect, Call):
        return call_sync(effect.fn, *effect.args, name=effect.name)
    if isinstance(effect, Invoke):
        return effect.runnable.invoke(effect.input, effect.config)
    if isinstance(effect, Tasks):
        return _tasks_sync(effect)
    tasks = list(effect.tasks)
    if len(tasks) <= 1:
        return [sync_fn() for sync_fn, _ in tasks]
    with ContextThreadPoolExecutor(max_workers=min(len(tasks), 16)) as pool:
        futures = [pool.submit(sync_fn) for sync_fn, _ in tasks]
        return [f.result() for f in futures]


async def _perform_async(effect: Effect) -> Any:
    if isinstance(effect, Call):
        return await call_async(effect.fn, *effect.args, name=effect.name)
    if isinstance(effect, Invoke):
        return await effect.runnable.ainvoke(effect.input, effect.config)
    if isinstance(effect, Tasks):
        return await _tasks_async(effect)
    tasks = list(effect.tasks)
    if len(tasks) == 1:
        return [await tasks[0][1]()]
    return _settled(await asyncio.gather(*(async_fn() for _, async_fn in tasks),
                                         return_exceptions=True))


def run_sync(logic: Logic) -> Any:
    """Drive a logic generator, performing its effects synchronously."""
    try:
        effect = next(logic)
        while True:
            try:
                result = _perform_sync(effect)
            except BaseException as exc:  # noqa: BLE001 - re-thrown into the logic
                effect = logic.throw(exc)
            else:
                effect = logic.send(result)
    except StopIteration as stop:
        return stop.value


async def run_async(logic: Logic) -> Any:
    """Drive a logic generator, performing its effects asynchronously."""
    try:
        effect = next(logic)
        while True:
            try:
                result = await _perform_async(effect)
            except BaseException as exc:  # noqa: BLE001 - re-thrown into the logic
                effect = logic.throw(exc)
            else:
                effect = logic.send(result)
    except StopIteration as stop:
        return stop.value
