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

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Command

from langgraph_loop.core.compat import durable
from langgraph_loop.core.effects import Call, Logic, Parallel, Tasks
from langgraph_loop.core.pairing import unanswered_tail
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import CallRecord, LoopContext, LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.approval import apply_review, mark_edited
from langgraph_loop.nodes.base import LoopNode, emit
from langgraph_loop.nodes.limits import limit_guard
from langgraph_loop.nodes.signatures import content_hash

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
            plans.append(("refuse", f"Error: unknown tool {name!r}. "
                                    f"Available tools: {', '.join(sorted(known)) or 'none'}."))
        elif allowed is not None and name not in allowed:
            plans.append(("refuse", f"Error: tool {name!r} is not available at this point "
                                    "of the task; it was not run."))
        elif left is not None and left <= 0:
            plans.append(("refuse", "Error: tool call limit for this run reached; "
                                    "this call was not run."))
        else:
            left = None if left is None else left - 1
            plans.append(("run", None))
    return plans


def cap_output(content: Any, limit: int | None) -> Any:
    """Cut a string output longer than ``limit`` characters, saying so."""
    if limit is None or not isinstance(content, str) or len(content) <= limit:
        return content
    return (content[:limit] + f"\n\n[output truncated: {len(content)} characters, "
            f"the first {limit} are shown]")


def _error_message(call: dict[str, Any], text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=str(call.get("id")), name=call.get("name"),
                       status="error")


def _describe(exc: Exception, call: dict[str, Any]) -> str:
    kind = type(exc).__name__
    if kind == "ValidationError":
        return f"Error: invalid arguments for tool {call.get('name')!r}: {exc}"
    return f"Error: tool {call.get('name')!r} raised {kind}: {exc}"


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


def _runners(tool: BaseTool, call: dict[str, Any], config: RunnableConfig) -> Any:
    return (lambda: tool_call(tool, call, config)), (lambda: atool_call(tool, call, config))


class ToolsNode(LoopNode):
    """Execute the pending tool calls (see module docstring)."""

    name = "tools"

    def __init__(self, settings: LoopSettings) -> None:
        super().__init__(settings)
        self.by_name = {t.name: t for t in settings.tools}

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        messages = state.get("messages") or []
        index, pending = unanswered_tail(messages)
        ai = messages[index] if index >= 0 else None
        if not isinstance(ai, AIMessage) or not pending:
            return {}
        run: dict[str, Any] = dict(state.get("run") or {})
        calls: list[dict[str, Any]] = [dict(c) for c in ai.tool_calls if c.get("id") in pending]
        invalid: list[dict[str, Any]] = [
            dict(c) for c in ai.invalid_tool_calls if c.get("id") in pending
        ]
        reviewed = apply_review(calls, run.pop("review", None), message_id=ai.id,
                                gated=settings.approval.tools if settings.approval else ())
        calls = reviewed.calls
        cap = settings.limits.max_tool_calls
        allowance = None if cap is None else cap - run.get("tool_calls", 0)
        offered = (state.get("pass_info") or {}).get("offered")
        plans = plan_calls(calls, known=set(self.by_name), offered=offered, allowance=allowance,
                           rejected=reviewed.refusals)
        runnable = [c for c, (action, _) in zip(calls, plans, strict=True) if action == "run"]
        per_call = len(runnable) > 1 or settings.hooks.on_tool_call is not None
        if runnable and per_call and durable(config):
            saved = yield Tasks(task_call, atask_call,
                                [(self.by_name[c["name"]], c) for c in runnable])
            outcomes = [(o["message"], o["duration_s"]) for o in saved]
        else:
            outcomes = yield Parallel([_runners(self.by_name[c["name"]], c, config)
                                       for c in runnable])
        results: dict[str, tuple[Any, float]] = dict(
            zip([c["id"] for c in runnable], outcomes, strict=True))
        update = self._assemble(state, settings, calls, plans, results, invalid)
        mark_edited(update["messages"], reviewed)
        run["tool_calls"] = run.get("tool_calls", 0) + len(runnable)
        update["run"] = run
        if cap is not None and run["tool_calls"] >= cap and state.get("stop_reason") is None:
            update["stop_reason"] = StopReason.MAX_TOOL_CALLS
            run["guard"] = limit_guard(StopReason.MAX_TOOL_CALLS, cap, run["tool_calls"])
        hook = settings.hooks.on_tool_call
        for logged in update["call_log"]:
            record: CallRecord = {"name": logged["name"], "args": logged["args"],
                                  "status": logged["status"], "duration_s": logged["duration_s"],
                                  "iteration": logged["iteration"]}
            if hook is not None:
                yield Call(hook, (record,), name="hooks.on_tool_call")
            emit(runtime, {"event": "tool_call", **record})
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
            text = (f"Error: the arguments of this call to {bad.get('name')!r} are not valid "
                    f"JSON ({bad.get('error') or 'could not be parsed'}); it was not run.")
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
