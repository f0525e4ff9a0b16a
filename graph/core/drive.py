"""Sync and async from one core: a step's work as a generator that yields its I/O.

A node (or a middleware hook) writes its work once, as a generator: every call that blocks is
yielded as an ``Io``; the generator receives the result (or the exception, thrown in where it
yielded) and returns the update. ``drive`` and ``adrive`` are the only sync/async twins.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig

__all__ = ["Io", "StepNode", "Steps", "adrive", "aperform", "around", "drive", "perform"]

T = TypeVar("T")
Y = TypeVar("Y")


@dataclass(frozen=True)
class Io:
    """One blocking call a step asks its driver for: ``sync(*args, **kwargs)`` in a sync run,
    ``await asynchronous(*args, **kwargs)`` in an async one."""

    sync: Callable[..., Any]
    asynchronous: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Steps = Generator[Io, Any, T]
"""A step's work: yields ``Io``, receives each result, returns the step's result."""


def perform(io: Io) -> Any:
    return io.sync(*io.args, **io.kwargs)


async def aperform(io: Io) -> Any:
    return await io.asynchronous(*io.args, **io.kwargs)


def drive(steps: Generator[Y, Any, T], run: Callable[[Y], Any]) -> T:
    """Run ``steps`` to the end, making each yielded call with ``run`` (``perform`` for ``Io``; a
    failure is thrown back into ``steps`` where it yielded)."""
    try:
        request = next(steps)
        while True:
            try:
                result = run(request)
            except BaseException as exc:  # noqa: BLE001 - handed to the step, which may handle it
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[Y, Any, T], run: Callable[[Y], Awaitable[Any]]) -> T:
    """``drive``, awaiting each call."""
    try:
        request = next(steps)
        while True:
            try:
                result = await run(request)
            except BaseException as exc:  # noqa: BLE001 - handed to the step, which may handle it
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def around(wrap: Callable[..., Any], awrap: Callable[..., Awaitable[Any]], request: Any,
           inner: Callable[[Any], Steps[Any]]) -> Io:
    """The call ``wrap(request, handler)`` of a wrapper shaped as LangChain's ``wrap_model_call``
    and ``wrap_tool_call`` (``awrap`` in an async run), its handler running ``inner`` in the
    run's mode: a chain of wrappers is written once, each layer a step that yields the next."""
    return Io(lambda: wrap(request, lambda r: drive(inner(r), perform)),
              lambda: awrap(request, lambda r: adrive(inner(r), aperform)))


class StepNode(Runnable[Any, Any]):
    """A graph node written once as ``_steps``, driven by ``invoke`` and ``ainvoke``."""

    def _steps(self, state: Any, config: RunnableConfig | None) -> Steps[Any]:
        raise NotImplementedError

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return drive(self._steps(input, config), perform)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await adrive(self._steps(input, config), aperform)
