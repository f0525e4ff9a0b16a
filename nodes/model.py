"""The ``model`` node: deliver queued notices, build the request, call the model.

Order of work in one step:
1. a stop decided earlier (or the time cap, checked here between steps) turns the
   call into the *final answer* call: no tools bound, tool calls in the reply are
   not executed (they are moved to ``response_metadata`` so the transcript stays
   provider-valid);
2. the deferred-notice queue of this run is drained into ONE
   ``HumanMessage(name="loop_warning")`` appended after the ToolMessages;
3. the request is built (system prompt, fresh-context window, tool filter) and the
   model is called; usage and the pass's model-call count are recorded.

If the model raises, nothing is written: queued notices stay queued for the retry.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> reply = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> final = without_tool_calls(reply)
    >>> final.tool_calls, final.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"]
    ([], 'f')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Call, Invoke, Logic, as_message
from langgraph_loop.core.notices import drain, queue_notice
from langgraph_loop.core.records import Guard
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState, Usage, add_usage, usage_of
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.base import LoopNode
from langgraph_loop.nodes.limits import stop_instruction, timeout_guard
from langgraph_loop.nodes.request import build_request
from langgraph_loop.nodes.token_budget import (
    MIN_FINAL_OUTPUT,
    budget_guard,
    final_answer_room,
    max_tokens_of,
)

__all__ = ["ModelNode", "estimate_usage", "without_tool_calls"]


def without_tool_calls(message: AIMessage) -> AIMessage:
    """The final answer as stored: tool calls it still asked for are not run."""
    if not message.tool_calls and not message.invalid_tool_calls:
        return message
    dropped = [dict(c) for c in message.tool_calls] + [dict(c) for c in message.invalid_tool_calls]
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"}
    return message.model_copy(
        update={
            "tool_calls": [],
            "invalid_tool_calls": [],
            "tool_call_chunks": [],
            "additional_kwargs": kwargs,
            "response_metadata": {
                **message.response_metadata,
                "langgraph_loop_dropped_tool_calls": dropped,
            },
        }
    )


def estimate_usage(request: Sequence[BaseMessage], reply: BaseMessage) -> Usage:
    """Approximate usage for models that report none (only used for token budgets)."""
    inp = count_tokens_approximately(list(request))
    out = count_tokens_approximately([reply])
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


class ModelNode(LoopNode):
    """Call the agent's model (see module docstring)."""

    name = "model"

    def __init__(self, settings: LoopSettings) -> None:
        super().__init__(settings)
        tools = list(settings.tools)
        self._bound_all: Runnable[LanguageModelInput, BaseMessage] = (
            settings.model.bind_tools(tools) if tools else settings.model
        )

    def _bind(self, tools: Sequence[BaseTool] | None) -> Runnable[LanguageModelInput, BaseMessage]:
        if tools is None:
            return self._bound_all
        if not tools:
            return self.settings.model
        return self.settings.model.bind_tools(list(tools))

    def _offered(self, state: LoopState, settings: LoopSettings) -> Logic:
        """The tools offered to this call: all, or what ``tool_filter`` returns."""
        if settings.tool_filter is None:
            return None
        chosen = yield Call(settings.tool_filter, (state, list(settings.tools)),
                            name="tool_filter")
        if not isinstance(chosen, Sequence) or isinstance(chosen, str):
            raise ValueError(f"tool_filter must return a list of tools or tool names, got "
                             f"{type(chosen).__name__} {chosen!r:.80}")
        known = {t.name: t for t in settings.tools}
        picked: list[BaseTool] = []
        for item in chosen:
            name = item if isinstance(item, str) else getattr(item, "name", None)
            if name not in known:
                raise ValueError(f"tool_filter returned an unknown tool: {item!r}")
            picked.append(known[name])
        return picked

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        run: dict[str, Any] = dict(state.get("run") or {})
        update: dict[str, Any] = {}
        stop = state.get("stop_reason")
        timeout = timeout_guard(state, settings) if stop is None else None
        if timeout is not None:  # the time cap, checked between steps
            stop = StopReason.TIMEOUT
            run["guard"] = timeout
            update.update(stop_reason=stop, run=run)
        pending = list(state.get("pending_notices") or [])
        extra: list[BaseMessage] = []
        if stop is None:  # the request, and a stop when it leaves no room for a final answer
            notice, remaining = drain(pending, run=str(run.get("id")))
            extra = [notice] if notice is not None else []
            request = build_request(state, settings, extra)
            stop = self._budget_stop(state, settings, request, run, update)
        final = stop is not None
        if final and (run.get("finalized") or not settings.limits.final_answer):
            return update
        if final:
            stored: Guard | None = run.get("guard")
            guard: Guard = stored or {"guard": "router", "reason": str(stop)}
            pending = queue_notice(pending, run=str(run.get("id")), key="stop",
                                   text=stop_instruction(guard), source="stop")
            notice, remaining = drain(pending, run=str(run.get("id")))
            extra = [notice] if notice is not None else []
            request = build_request(state, settings, extra)
        offered = None if final else (yield from self._offered(state, settings))
        if not any(m.type == "human" for m in request):
            raise ValueError("model: the request has no user message; nothing to work on")
        runnable = self._bind([] if final else offered)
        if final:
            room = final_answer_room(state, settings, request)
            if room is not None and room < MIN_FINAL_OUTPUT:
                return self._skip_final(update, run, stop, room)
            supported, own = max_tokens_of(settings.model)
            if room is not None and supported:  # bound the answer by what is left
                runnable = runnable.bind(max_tokens=min(room, own or room))
        reply = as_message((yield Invoke(runnable, request, config)), "model")
        if final:
            reply = without_tool_calls(reply)
            run["finalized"] = True
        return {**update, **self._record(state, settings, request, reply, extra, run, offered,
                                         had_notices=bool(pending),
                                         remaining=remaining)}

    @staticmethod
    def _budget_stop(state: LoopState, settings: LoopSettings, request: list[BaseMessage],
                     run: dict[str, Any], update: dict[str, Any]) -> StopReason | None:
        """``token_budget`` when this call (``request``) and a final answer after it would not fit."""
        if settings.limits.token_budget is None:
            return None
        guard = budget_guard(state, settings, request)
        if guard is None:
            return None
        run["guard"] = guard
        update.update(stop_reason=StopReason.TOKEN_BUDGET, run=run)
        return StopReason.TOKEN_BUDGET

    @staticmethod
    def _skip_final(update: dict[str, Any], run: dict[str, Any], stop: Any,
                    room: int) -> dict[str, Any]:
        """End without the final answer: the token budget has no room for it."""
        guard = dict(run.get("guard") or {"reason": str(stop)})
        guard["final_answer"] = (f"skipped: the token budget leaves about {max(room, 0)} "
                                 f"tokens, fewer than {MIN_FINAL_OUTPUT} for an answer")
        run.update(finalized=True, guard=guard)
        return {**update, "run": run, "pending_notices": []}

    def _record(
        self,
        state: LoopState,
        settings: LoopSettings,
        request: list[BaseMessage],
        reply: AIMessage,
        extra: list[BaseMessage],
        run: dict[str, Any],
        offered: Sequence[BaseTool] | None,
        *,
        had_notices: bool,
        remaining: list[Any],
    ) -> dict[str, Any]:
        usage = usage_of(reply)
        if usage is None and settings.limits.token_budget is not None:
            usage = estimate_usage(request, reply)
        pass_info: dict[str, Any] = dict(state.get("pass_info") or {})
        pass_info["model_calls"] = pass_info.get("model_calls", 0) + 1
        pass_info["usage"] = add_usage(pass_info.get("usage"), usage)
        pass_info["offered"] = None if offered is None else [t.name for t in offered]
        update: dict[str, Any] = {
            "messages": [*extra, reply],
            "usage": add_usage(state.get("usage"), usage),
            "pass_info": pass_info,
        }
        if run != state.get("run"):
            update["run"] = run
        if had_notices:
            update["pending_notices"] = remaining
        return update
