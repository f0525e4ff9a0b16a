"""The ``tools`` node: the last AIMessage's calls through LangGraph's ``ToolNode``, as in
``create_agent`` (docs/architecture.md, "The graph"). Refused calls never reach ``ToolNode``;
the results come one per call in call order, then the messages tools added.

With a checkpointer a batch's calls run as LangGraph tasks, saved as each finishes, so a step
run again does not run finished calls again; tasks rather than a ``Send`` per call keep a clean
round two steps (``docs/reliability.md``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.errors import GraphInterrupt
from langgraph.func import task
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import get_runtime
from langgraph.types import Command

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.compat import durable
from langgraph_loop.core.drive import Io, StepNode, Steps
from langgraph_loop.core.history import resolve_removals
from langgraph_loop.core.hosting import LOOP_KEYS
from langgraph_loop.core.messages import cap_output, newest_reply
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import CallRecord, LoopState, emit, executed_calls, iteration_info
from langgraph_loop.core.stop import StopReason, guard, limit_guard, stop_update
from langgraph_loop.engine.detection import content_hash
from langgraph_loop.nodes.approval import Reviewed, apply_review, mark_edited
from langgraph_loop.nodes.hosted import tool_call_wrappers

__all__ = ["Outcome", "ToolsNode", "outcome_of", "plan_calls", "tool_error_text"]

Plan = tuple[str, str | None]


def plan_calls(calls: Sequence[dict[str, Any]], *, known: set[str], offered: Iterable[str] | None,
               allowance: int | None, rejected: Mapping[str, str] | None = None,
               dynamic: bool = False) -> list[Plan]:
    """Decide per call: ``("run", None)``, ``("refuse", error text)`` or, for calls a reviewer
    rejected (``rejected``: text by call id), ``("reject", text)``. With ``dynamic`` (a
    ``wrap_tool_call`` middleware may run it) a call of an unknown tool is not refused here."""
    allowed = None if offered is None else set(offered)
    left = allowance
    plans: list[Plan] = []
    for call in calls:
        name = call.get("name")
        if rejected and str(call.get("id")) in rejected:
            plans.append(("reject", rejected[str(call.get("id"))]))
        elif name not in known and not dynamic:
            plans.append(("refuse", prompts.UNKNOWN_TOOL.format(
                name=repr(name), available=", ".join(sorted(known)) or "none")))
        elif allowed is not None and name in known and name not in allowed:
            plans.append(("refuse", prompts.NOT_OFFERED.format(name=repr(name))))
        elif left is not None and left <= 0:
            plans.append(("refuse", prompts.TOOL_LIMIT))
        else:
            left = None if left is None else left - 1
            plans.append(("run", None))
    return plans


def tool_error_text(exc: Exception) -> str:
    """The loop's default ``handle_tool_errors``: every tool error becomes an error result
    (invalid arguments read as under ``ToolNode``; any other exception names its type)."""
    if type(exc).__name__ == "ToolInvocationError":
        return str(exc)
    return prompts.TOOL_RAISED.format(kind=type(exc).__name__, error=exc)


def _error_message(call: Mapping[str, Any], text: str) -> ToolMessage:
    return ToolMessage(text, tool_call_id=str(call.get("id")), name=call.get("name"), status="error")


# --- one call -------------------------------------------------------------------------------

_FLAT = (str, int, float, bool, type(None))
_SECONDS = "duration_s"  # in an answer's response_metadata from wrap_tool_call to outcome_of


def _own_args(request: ToolCallRequest) -> ToolCallRequest:
    """The request with its own copy of the args: a deep one when a value could be changed in
    place (LangChain's tools copy the top level themselves, so flat args go as they are)."""
    args = request.tool_call["args"]
    if isinstance(args, dict) and all(isinstance(v, _FLAT) for v in args.values()):
        return request
    return request.override(tool_call={**request.tool_call, "args": copy.deepcopy(args)})


def _answer(output: Any, call_id: str) -> ToolMessage | None:
    """The ToolMessage answering ``call_id`` in a tool's output (None: not answered here)."""
    if isinstance(output, ToolMessage):  # the usual case
        return output if output.tool_call_id == call_id else None
    for item in output if isinstance(output, list) else [output]:
        update = item if not isinstance(item, Command) else (
            item.update if item.graph != Command.PARENT else None)  # a parent's are the parent's
        messages = [update] if isinstance(update, ToolMessage) else (
            update.get("messages") or [] if isinstance(update, Mapping) else [])
        for message in messages:
            if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
                return message
    return None


# --- running calls ---------------------------------------------------------------------------

def _saved(output: Any, call_id: str) -> dict[str, Any]:
    """A call's result as its task saves (and ``stream_mode="updates"`` shows) it."""
    answer = _answer(output, call_id)
    seconds = answer.response_metadata.pop(_SECONDS, 0.0) if answer is not None else 0.0
    messages = output.get("messages") if isinstance(output, dict) else None
    single = messages[0] if isinstance(messages, list) and len(messages) == 1 else None
    return {"message": single if isinstance(single, ToolMessage) else output, "duration_s": seconds}


def _call_task(node: ToolNode, payload: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    return _saved(node.invoke(payload, config), payload["tool_call"]["id"])


async def _acall_task(node: ToolNode, payload: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
    return _saved(await node.ainvoke(payload, config), payload["tool_call"]["id"])


# One task name for both modes (it is part of the task id): a thread paused or crashed under
# ``invoke`` may resume under ``ainvoke``.
_as_task: Any = task(name="tool_call")
_saved_call: Any = _as_task(_call_task)
_asaved_call: Any = _as_task(_acall_task)


def _settled(results: Sequence[Any]) -> list[Any]:
    """Results once every call has finished, then the first failure (no call left running, none
    run twice on resume); interrupts of several calls surface together, in one."""
    paused = [r for r in results if isinstance(r, GraphInterrupt)]
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, GraphInterrupt):
            raise result
    if len(paused) == 1:
        raise paused[0]
    if paused:
        raise GraphInterrupt(tuple(i for p in paused for i in (p.args[0] if p.args else ())))
    return list(results)


Result = tuple[Any, float]  # a call's output and its duration (when saved, else 0.0)


def _run_sync(node: ToolNode, payloads: Sequence[dict[str, Any]], config: RunnableConfig,
              saved: bool) -> list[Result]:
    if saved:
        futures = [_saved_call(node, p) for p in payloads]  # scheduled in order: stable task ids
        concurrent.futures.wait(futures)
        return [(r["message"], r["duration_s"])
                for r in _settled([f.exception() or f.result() for f in futures])]
    if len(payloads) <= 1:
        return [(node.invoke(p, config), 0.0) for p in payloads]
    with ContextThreadPoolExecutor(max_workers=min(len(payloads), 16)) as pool:
        running = [pool.submit(node.invoke, p, config) for p in payloads]
        concurrent.futures.wait(running)
        return [(r, 0.0) for r in _settled([f.exception() or f.result() for f in running])]


async def _run_async(node: ToolNode, payloads: Sequence[dict[str, Any]], config: RunnableConfig,
                     saved: bool) -> list[Result]:
    if saved:
        results = await asyncio.gather(*(_asaved_call(node, p) for p in payloads), return_exceptions=True)
        return [(r["message"], r["duration_s"]) for r in _settled(results)]
    if len(payloads) == 1:
        return [(await node.ainvoke(payloads[0], config), 0.0)]
    outputs = await asyncio.gather(*(node.ainvoke(p, config) for p in payloads), return_exceptions=True)
    return [(r, 0.0) for r in _settled(outputs)]


# --- what a call produced --------------------------------------------------------------------

@dataclass
class Outcome:
    """What one call produced, split the way the loop stores it."""

    message: ToolMessage
    extra: list[BaseMessage] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    commands: list[Command[Any]] = field(default_factory=list)
    duration_s: float = 0.0


def outcome_of(call: Mapping[str, Any], output: Any, duration: float = 0.0) -> Outcome:
    """Split ``ToolNode``'s output for one call: its answer, extra messages, state updates
    (loop-owned keys dropped), commands that leave the node, and its duration."""
    answer = _answer(output, str(call["id"]))  # any other ToolMessage would be orphaned: dropped
    extra: list[BaseMessage] = []
    updates: list[dict[str, Any]] = []
    commands: list[Command[Any]] = []
    for item in output if isinstance(output, list) else [output]:
        if isinstance(item, Command) and item.graph == Command.PARENT:
            commands.append(item)
            continue
        if isinstance(item, Command) and item.goto:
            commands.append(Command(goto=item.goto))
        update = item.update if isinstance(item, Command) else item
        if not isinstance(update, Mapping):
            continue
        extra += [m for m in update.get("messages") or [] if not isinstance(m, ToolMessage)]
        rest = {k: v for k, v in update.items() if k != "messages" and k not in LOOP_KEYS}
        if rest:
            updates.append(rest)
    if answer is None and any(c.graph == Command.PARENT for c in commands):
        answer = ToolMessage("", tool_call_id=str(call["id"]))  # answered in the parent
    message = answer or _error_message(call, prompts.NO_ANSWER)
    return Outcome(message, extra, updates, commands, message.response_metadata.pop(_SECONDS, duration))


# --- the node --------------------------------------------------------------------------------

class _Batch:
    """The pending calls of the newest reply, planned (pure)."""

    def __init__(self, state: LoopState, settings: LoopSettings, known: set[str],
                 config: RunnableConfig) -> None:
        self.state, self.settings = state, settings
        newest = newest_reply(state.get("messages") or [])
        ai = newest.reply
        self.empty = ai is None or not newest.pending
        if ai is None or self.empty:
            return
        self.calls: list[dict[str, Any]] = newest.calls()
        self.invalid = newest.calls(invalid=True)
        review = state.get("review")
        self.reviewed: Reviewed | None = None  # what a reviewer decided (``approval`` only)
        refusals: dict[str, str] = {}
        if settings.approval is not None:
            self.reviewed = apply_review(self.calls, review, message_id=ai.id, gated=settings.approval.tools)
            self.calls, refusals = self.reviewed.calls, self.reviewed.refusals
        cap = settings.limits.max_tool_calls
        self.executed = executed_calls(state)
        allowance = None if cap is None else cap - self.executed
        self.plans = plan_calls(self.calls, known=known, offered=iteration_info(state).get("offered"),
                                allowance=allowance, rejected=refusals,
                                dynamic=bool(settings.hooked("wrap_tool_call")))
        self.runnable = [c for c, (action, _) in zip(self.calls, self.plans, strict=True) if action == "run"]
        self.payloads = [{"__type": "tool_call_with_context", "tool_call": {**c, "type": "tool_call"},
                          "state": state} for c in self.runnable]  # ToolNode's one-call input
        per_call = len(self.runnable) > 1 or settings.hooks.on_tool_call is not None
        self.saved = bool(self.runnable) and per_call and durable(config)


class ToolsNode(StepNode):
    """Execute the pending tool calls (see module docstring)."""

    name = "tools"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.by_name = {t.name: t for t in settings.tools}
        self.known = set(self.by_name)
        wrap, awrap, errors = tool_call_wrappers(settings, self._per_call, tool_error_text)
        self.node = ToolNode(list(settings.tools), handle_tool_errors=errors,
                             wrap_tool_call=wrap, awrap_tool_call=awrap)

    def _per_call(self, request: ToolCallRequest,
                  execute: Callable[[ToolCallRequest], Steps[Any]]) -> Steps[Any]:
        """``ToolNode``'s innermost ``wrap_tool_call``: the tool runs on its own copy of its
        args; its answer is cut to ``max_tool_output_chars`` and timed."""
        started = time.perf_counter()
        output = yield from execute(_own_args(request))
        answer = _answer(output, str(request.tool_call["id"]))
        if answer is not None:  # the call's runtime carries the run's context (its overrides)
            limit = self.settings.for_runtime(request.runtime).limits.max_tool_output_chars  # type: ignore[arg-type]
            capped = cap_output(answer.content, limit)
            if capped is not answer.content:  # (a pydantic assignment costs, even of the same)
                answer.content = capped
            answer.response_metadata[_SECONDS] = round(time.perf_counter() - started, 6)
        return output

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[Any]:
        """The batch, its calls (in parallel where the model asked for several), then each
        call's record to ``hooks.on_tool_call`` and the ``tool_call`` event."""
        config = config if config is not None else ensure_config()  # a step's is complete
        runtime = get_runtime()
        batch = _Batch(state, self.settings.for_runtime(runtime), self.known, config)
        if batch.empty:
            return {}
        results = yield Io(_run_sync, _run_async, (self.node, batch.payloads, config, batch.saved))
        update, records = self._finish(batch, results)
        hook = batch.settings.hooks.on_tool_call
        for record in records:
            if hook is not None:
                yield callback(hook, record, name="hooks.on_tool_call")
            emit(runtime, {"event": "tool_call", **record})
        return update

    def _finish(self, batch: _Batch, results: Sequence[Result]) -> tuple[Any, list[CallRecord]]:
        """The update (a list of commands when tools returned some) and the call records."""
        done = {c["id"]: outcome_of(c, *r) for c, r in zip(batch.runnable, results, strict=True)}
        iteration, executed = batch.state.get("iteration", 1), batch.executed + len(batch.runnable)
        limit = batch.settings.limits.max_tool_output_chars
        stall = batch.settings.iterations.stall is not None  # it compares results across iterations
        messages: list[BaseMessage] = []
        extra: list[BaseMessage] = []
        records: list[CallRecord] = []
        logged: list[dict[str, Any]] = []
        for call, (action, error) in zip(batch.calls, batch.plans, strict=True):
            outcome = done.get(call["id"]) or Outcome(
                _error_message(call, cap_output(str(error), limit)))  # refused: never ran
            message = outcome.message
            messages.append(message)
            extra.extend(outcome.extra)
            status = message.status if action == "run" else "rejected" if action == "reject" else "refused"
            record: CallRecord = {"name": call["name"], "args": dict(call.get("args") or {}),
                                  "status": status, "duration_s": outcome.duration_s,
                                  "iteration": iteration}
            records.append(record)
            logged.append({**record, "result_hash": content_hash(message.content, normalized=stall),
                           "executed": executed})
        for bad in batch.invalid:  # calls whose arguments could not be parsed
            text = prompts.INVALID_JSON.format(name=repr(bad.get("name")),
                                               error=bad.get("error") or "could not be parsed")
            messages.append(_error_message(bad, text))
            logged.append({"name": str(bad.get("name")), "args": {"raw": bad.get("args")},
                           "status": "invalid", "duration_s": 0.0, "iteration": iteration,
                           "executed": executed})
        if batch.reviewed is not None and batch.reviewed.edited:
            mark_edited(messages, batch.reviewed)
        extra = resolve_removals(batch.state.get("messages") or [], extra) if extra else extra
        update: dict[str, Any] = {"messages": [*messages, *extra], "call_log": logged}
        ran = [done[c["id"]].message.name or c["name"] for c in batch.runnable]  # a wrapper may swap it
        update.update(self._counted(batch, executed, ran))
        if batch.state.get("review") is not None:
            update["review"] = None  # consumed
        return _as_output(update, list(done.values())), records

    def _counted(self, batch: _Batch, total: int, ran: Sequence[str]) -> dict[str, Any]:
        """The stop the run's ``total`` tool executions lead to (the cap, or ``return_direct``
        of the tools that ran: ``ran``, which a ``wrap_tool_call`` middleware may have swapped)."""
        if batch.state.get("stop_reason") is not None:
            return {}
        run = batch.state.get("run") or {}
        cap = batch.settings.limits.max_tool_calls
        if cap is not None and total >= cap:
            return stop_update(run, limit_guard(StopReason.MAX_TOOL_CALLS, cap, total))
        direct = [getattr(self.by_name.get(name), "return_direct", False) for name in ran]
        if direct and all(direct):
            names = ", ".join(ran)
            why = guard("tools", StopReason.COMPLETED, detail=f"return_direct: {names}")
            return stop_update(run, why, finalized=True)
        return {}


# The loop's own single-value keys tools may write (``write_todos``, ``set_mode``): several
# parallel calls writing one are merged in call order, the last wins.
_LOOP_VALUES = frozenset({"todos", "mode"})


def _as_output(update: dict[str, Any], outcomes: Sequence[Outcome]) -> Any:
    """The node's return: the update, plus the tools' own updates and commands (each its own
    write, so reducers combine them as under ``ToolNode``)."""
    updates: list[dict[str, Any]] = []
    for u in (u for o in outcomes for u in o.updates):
        update.update({k: v for k, v in u.items() if k in _LOOP_VALUES})
        rest = {k: v for k, v in u.items() if k not in _LOOP_VALUES}
        updates.extend([rest] if rest else [])
    commands = [c for o in outcomes for c in o.commands]
    if not updates and not commands:
        return update
    return [Command(update=update), *(Command(update=u) for u in updates), *commands]
