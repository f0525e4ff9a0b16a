"""The ``tools`` node: execute the calls of the last AIMessage.

Calls run concurrently when the model asked for several (a single call runs inline:
no thread pool). Every call gets exactly one ToolMessage, in the order of the
calls: exceptions, unknown tools, invalid or malformed arguments, tools hidden by
the tool filter and calls beyond ``Limits.max_tool_calls`` become
``ToolMessage(status="error")`` with a useful text. Tools may return a ``Command``
(its state update is applied) and may take the injected tool-call id.

Durability: with a checkpointer (and ``durability`` other than ``"exit"``) the calls
of a batch run as LangGraph tasks, one per call, whose results are saved as each
finishes. If the step is run again (crash, interrupt inside a tool, a failing
``on_tool_call`` hook) finished calls return their saved result instead of running
again. A single call runs inline (no task: it is saved with the step), unless an
``on_tool_call`` hook could fail the step after it ran. Such tasks also show up in
``stream_mode="updates"`` as they finish: ``{"tool_call": {"message", "duration_s"}}``.

Example:
    >>> plan_calls(
    ...     [{"name": "a", "args": {}, "id": "1"}, {"name": "zz", "args": {}, "id": "2"}],
    ...     known={"a"}, offered=None, allowance=None,
    ... )
    [('run', None), ('refuse', "Error: unknown tool 'zz'. Available tools: a.")]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.func import task
from langgraph.runtime import get_runtime
from langgraph.types import Command

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import call_async, call_sync
from langgraph_loop.core.compat import durable
from langgraph_loop.core.messages import unanswered_tail
from langgraph_loop.core.records import emit
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import CallRecord, LoopState, iteration_info
from langgraph_loop.core.stop import StopReason, limit_guard, stop_update
from langgraph_loop.nodes.approval import Reviewed, apply_review, mark_edited
from langgraph_loop.nodes.detector_state import content_hash

__all__ = ["TASK_NAME", "ToolsNode", "atask_call", "atool_call", "cap_output",
           "plan_calls", "task_call", "tool_call"]

Plan = tuple[str, str | None]


def plan_calls(
    calls: Sequence[dict[str, Any]],
    *,
    known: set[str],
    offered: Iterable[str] | None,
    allowance: int | None,
    rejected: Mapping[str, str] | None = None,
) -> list[Plan]:
    """Decide per call: ``("run", None)``, ``("refuse", error text)`` or, for calls a
    reviewer rejected (``rejected``: text by call id), ``("reject", text)``."""
    allowed = None if offered is None else set(offered)
    left = allowance
    plans: list[Plan] = []
    for call in calls:
        name = call.get("name")
        if rejected and str(call.get("id")) in rejected:
            plans.append(("reject", rejected[str(call.get("id"))]))
        elif name not in known:
            plans.append(("refuse", prompts.UNKNOWN_TOOL.format(
                name=repr(name), available=", ".join(sorted(known)) or "none")))
        elif allowed is not None and name not in allowed:
            plans.append(("refuse", prompts.NOT_OFFERED.format(name=repr(name))))
        elif left is not None and left <= 0:
            plans.append(("refuse", prompts.TOOL_LIMIT))
        else:
            left = None if left is None else left - 1
            plans.append(("run", None))
    return plans


def cap_output(content: Any, limit: int | None) -> Any:
    """Cut a string output longer than ``limit`` characters, saying so."""
    if limit is None or not isinstance(content, str) or len(content) <= limit:
        return content
    return content[:limit] + prompts.OUTPUT_TRUNCATED.format(length=len(content), limit=limit)


def _error_message(call: dict[str, Any], text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=str(call.get("id")), name=call.get("name"),
                       status="error")


def _describe(exc: Exception, call: dict[str, Any]) -> str:
    kind = type(exc).__name__
    if kind == "ValidationError":
        return prompts.INVALID_ARGS.format(name=repr(call.get("name")), error=exc)
    return prompts.TOOL_RAISED.format(name=repr(call.get("name")), kind=kind, error=exc)


def _outcome(result: Any, started: float) -> tuple[Any, float]:
    return result, round(time.perf_counter() - started, 6)


TASK_NAME = "tool_call"


def tool_call(tool: BaseTool, call: dict[str, Any], config: RunnableConfig) -> tuple[Any, float]:
    """Run one call: its result (a ToolMessage or a Command) and its duration."""
    started = time.perf_counter()
    try:
        result = tool.invoke({**call, "type": "tool_call"}, _for_tool(config))
    except GraphBubbleUp:
        raise
    except Exception as exc:  # noqa: BLE001 - becomes an error ToolMessage
        result = _error_message(call, _describe(exc, call))
    return _outcome(result, started)


async def atool_call(tool: BaseTool, call: dict[str, Any],
                     config: RunnableConfig) -> tuple[Any, float]:
    """Async ``tool_call``."""
    started = time.perf_counter()
    try:
        result = await tool.ainvoke({**call, "type": "tool_call"}, _for_tool(config))
    except GraphBubbleUp:
        raise
    except Exception as exc:  # noqa: BLE001 - becomes an error ToolMessage
        result = _error_message(call, _describe(exc, call))
    return _outcome(result, started)


def task_call(tool: BaseTool, call: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """``tool_call`` as a LangGraph task (see ``compat.durable``): ``{"message", "duration_s"}``."""
    result, duration = tool_call(tool, call, config)
    return {"message": result, "duration_s": duration}


async def atask_call(tool: BaseTool, call: dict[str, Any],
                     config: RunnableConfig) -> dict[str, Any]:
    """Async ``task_call``."""
    result, duration = await atool_call(tool, call, config)
    return {"message": result, "duration_s": duration}


# One task name for both modes: it is part of the task id, so a thread paused or crashed
# under ``invoke`` may resume under ``ainvoke``. LangGraph streams a task's result in
# ``stream_mode="updates"`` as it finishes: ``{"tool_call": {"message", "duration_s"}}``.
for _fn in (task_call, atask_call):
    _fn.__name__ = _fn.__qualname__ = TASK_NAME


def _for_tool(config: RunnableConfig) -> RunnableConfig:
    """A task's config minus its run name (the tool's run keeps the tool's name)."""
    return {k: v for k, v in config.items() if k not in ("run_name", "run_id")}  # type: ignore[return-value]


@functools.cache
def _as_task(fn: Any) -> Any:
    return task(fn)


def _settled(results: Sequence[Any]) -> list[Any]:
    """Results once every call has finished; the first failure is raised after that.

    Waiting for all means no call is left running when the step fails, so every call
    that finished has its result saved and none runs twice on resume.
    """
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


def _run_sync(tools: Sequence[tuple[BaseTool, dict[str, Any]]], config: RunnableConfig,
              saved: bool) -> list[tuple[Any, float]]:
    """Run the calls, concurrently when several: as LangGraph tasks when ``saved``."""
    if saved:
        futures = [_as_task(task_call)(tool, call) for tool, call in tools]  # stable task ids
        concurrent.futures.wait(futures)
        done = _settled([f.exception() or f.result() for f in futures])
        return [(o["message"], o["duration_s"]) for o in done]
    if len(tools) <= 1:
        return [tool_call(tool, call, config) for tool, call in tools]
    with ContextThreadPoolExecutor(max_workers=min(len(tools), 16)) as pool:
        running = [pool.submit(tool_call, tool, call, config) for tool, call in tools]
        return [f.result() for f in running]


async def _run_async(tools: Sequence[tuple[BaseTool, dict[str, Any]]], config: RunnableConfig,
                     saved: bool) -> list[tuple[Any, float]]:
    """Async ``_run_sync``."""
    if saved:
        done = _settled(await asyncio.gather(*(_as_task(atask_call)(tool, call)
                                               for tool, call in tools), return_exceptions=True))
        return [(o["message"], o["duration_s"]) for o in done]
    if len(tools) == 1:
        return [await atool_call(tools[0][0], tools[0][1], config)]
    return _settled(await asyncio.gather(*(atool_call(tool, call, config) for tool, call in tools),
                                         return_exceptions=True))


class _Batch:
    """The pending calls of the newest reply, planned (pure)."""

    def __init__(self, state: LoopState, settings: LoopSettings, by_name: Mapping[str, BaseTool],
                 config: RunnableConfig) -> None:
        self.state, self.settings = state, settings
        messages = state.get("messages") or []
        index, pending = unanswered_tail(messages)
        ai = messages[index] if index >= 0 else None
        self.empty = not isinstance(ai, AIMessage) or not pending
        if not isinstance(ai, AIMessage) or self.empty:
            return
        self.run: dict[str, Any] = dict(state.get("run") or {})
        calls = [dict(c) for c in ai.tool_calls if c.get("id") in pending]
        self.invalid = [dict(c) for c in ai.invalid_tool_calls if c.get("id") in pending]
        review = state.get("review") or self.run.pop("review", None)  # 0.2 kept it in run
        self.reviewed = (Reviewed(calls=calls) if settings.approval is None else
                         apply_review(calls, review, message_id=ai.id, gated=settings.approval.tools))
        self.calls = self.reviewed.calls
        cap = settings.limits.max_tool_calls
        allowance = None if cap is None else cap - self.run.get("tool_calls", 0)
        offered = iteration_info(state).get("offered")
        self.plans = plan_calls(self.calls, known=set(by_name), offered=offered,
                                allowance=allowance, rejected=self.reviewed.refusals)
        self.runnable = [c for c, (action, _) in zip(self.calls, self.plans, strict=True)
                         if action == "run"]
        self.tools = [(by_name[c["name"]], c) for c in self.runnable]
        per_call = len(self.runnable) > 1 or settings.hooks.on_tool_call is not None
        self.saved = bool(self.runnable) and per_call and durable(config)


class ToolsNode:
    """Execute the pending tool calls (see module docstring)."""

    name = "tools"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.by_name = {t.name: t for t in settings.tools}

    def _batch(self, state: LoopState, config: RunnableConfig) -> _Batch:
        return _Batch(state, self.settings.for_runtime(get_runtime()), self.by_name, config)

    def invoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Sync entry point."""
        batch = self._batch(state, config)
        if batch.empty:
            return {}
        update = self._finish(batch, _run_sync(batch.tools, config, batch.saved))
        hook = batch.settings.hooks.on_tool_call
        for record in self._records(update):
            if hook is not None:
                call_sync(hook, record, name="hooks.on_tool_call")
            emit(get_runtime(), {"event": "tool_call", **record})
        return update

    async def ainvoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Async entry point."""
        batch = self._batch(state, config)
        if batch.empty:
            return {}
        update = self._finish(batch, await _run_async(batch.tools, config, batch.saved))
        hook = batch.settings.hooks.on_tool_call
        for record in self._records(update):
            if hook is not None:
                await call_async(hook, record, name="hooks.on_tool_call")
            emit(get_runtime(), {"event": "tool_call", **record})
        return update

    @staticmethod
    def _records(update: Mapping[str, Any]) -> list[CallRecord]:
        return [{"name": logged["name"], "args": logged["args"], "status": logged["status"],
                 "duration_s": logged["duration_s"], "iteration": logged["iteration"]}
                for logged in update["call_log"]]

    def _finish(self, batch: _Batch, outcomes: Sequence[tuple[Any, float]]) -> dict[str, Any]:
        """The update: the ToolMessages, the call log, the run's count and a cap stop."""
        results = dict(zip([c["id"] for c in batch.runnable], outcomes, strict=True))
        update = self._assemble(batch.state, batch.settings, batch.calls, batch.plans, results,
                                batch.invalid)
        if batch.reviewed.edited:
            mark_edited(update["messages"], batch.reviewed)
        run = batch.run
        run["tool_calls"] = run.get("tool_calls", 0) + len(batch.runnable)
        update["run"] = run
        if batch.state.get("review") is not None:
            update["review"] = None  # consumed
        cap = batch.settings.limits.max_tool_calls
        if cap is not None and run["tool_calls"] >= cap and batch.state.get("stop_reason") is None:
            update.update(stop_update(run, limit_guard(StopReason.MAX_TOOL_CALLS, cap,
                                                       run["tool_calls"])))
        return update

    def _assemble(
        self,
        state: LoopState,
        settings: LoopSettings,
        calls: Sequence[dict[str, Any]],
        plans: Sequence[Plan],
        results: dict[str, tuple[Any, float]],
        invalid: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        iteration = state.get("iteration", 1)
        limit = settings.limits.max_tool_output_chars
        messages: list[Any] = []
        records: list[CallRecord] = []
        extra: dict[str, Any] = {}
        for call, (action, error) in zip(calls, plans, strict=True):
            if action == "run":
                result, duration = results[call["id"]]
                message = self._absorb(result, call, extra)
            else:
                message, duration = _error_message(call, str(error)), 0.0
            message.content = cap_output(message.content, limit)
            messages.append(message)
            records.append({"name": call["name"], "args": dict(call.get("args") or {}),
                            "status": message.status if action == "run" else
                                      "rejected" if action == "reject" else "refused",
                            "duration_s": duration, "iteration": iteration,
                            "result_hash": content_hash(message.content)})  # type: ignore[typeddict-unknown-key]
        for bad in invalid:
            text = prompts.INVALID_JSON.format(name=repr(bad.get("name")),
                                               error=bad.get("error") or "could not be parsed")
            messages.append(_error_message(bad, text))
            records.append({"name": str(bad.get("name")), "args": {"raw": bad.get("args")},
                            "status": "invalid", "duration_s": 0.0, "iteration": iteration})
        return {**extra, "messages": messages, "call_log": records}

    @staticmethod
    def _absorb(result: Any, call: dict[str, Any], extra: dict[str, Any]) -> ToolMessage:
        """A tool's ToolMessage; a ``Command`` result also updates state."""
        if isinstance(result, ToolMessage):
            return result
        if isinstance(result, Command) and isinstance(result.update, dict):
            update = dict(result.update)
            found = [m for m in update.pop("messages", []) if isinstance(m, ToolMessage)]
            extra.update(update)
            if found:
                return found[0]
            return ToolMessage("ok", tool_call_id=str(call["id"]), name=call["name"])
        return ToolMessage(str(result), tool_call_id=str(call["id"]), name=call["name"])
