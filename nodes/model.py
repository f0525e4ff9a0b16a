"""The ``model`` node: deliver queued notices, build the request, call the model, and have the
engine decide on the reply once (``docs/architecture.md``). A stop decided earlier turns the
call into the tools-free final answer (``nodes/binding.py``); a decision that acts is kept in
``run["decision"]`` for the ``loop_detector`` node. If the model raises, nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import get_runtime

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.drive import Io, StepNode, Steps
from langgraph_loop.core.messages import (
    PROGRESS_NAME,
    as_message,
    drain,
    encodable,
    is_cut,
    iteration_messages,
    loop_message,
    queue_notice,
    with_unique_call_ids,
)
from langgraph_loop.core.questions import ask_plainly
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import (
    LoopState,
    RunInfo,
    Usage,
    add_usage,
    ashow_messages,
    iteration_info,
    show_messages,
    usage_of,
)
from langgraph_loop.core.stop import Guard, guard, stop_update
from langgraph_loop.engine.decision import DetectorMemo, decide
from langgraph_loop.engine.final import final_answer, stop_notice, without_tool_calls
from langgraph_loop.engine.limits import (
    BUDGET_ANSWER,
    MIN_FINAL_OUTPUT,
    budget_guard,
    check_in,
    count_tokens,
    final_answer_room,
    skipped_answer,
    skipped_reply,
    timeout_guard,
)
from langgraph_loop.nodes.binding import FINAL_ANSWER, call_model, final_model, tagged
from langgraph_loop.nodes.hosted import ModelCalls
from langgraph_loop.nodes.stream_cut import amodel_reply, model_reply
from langgraph_loop.nodes.view import policy_of, run_view

__all__ = ["ModelNode", "build_request", "criteria_instruction", "estimate_usage",
           "pick_tools", "system_message"]


def criteria_instruction(criteria: Sequence[str]) -> str:
    """The text that tells the agent the judge's criteria."""
    return prompts.CRITERIA.format(criteria=prompts.criteria_list(criteria))


def with_texts(message: SystemMessage, texts: Sequence[str]) -> SystemMessage:
    """A system message with more text after its own (a text block each for block content)."""
    if not texts:
        return message
    if isinstance(message.content, str):
        content: Any = "\n\n".join([message.content, *texts]) if message.content else "\n\n".join(texts)
    else:
        content = [*message.content, *({"type": "text", "text": t} for t in texts)]
    return message.model_copy(update={"content": content})


def system_message(settings: LoopSettings, existing: BaseMessage | None) -> SystemMessage | None:
    """One system message: the configured prompt (kept as it is), the criteria, a stored one."""
    parts: list[str] = []
    if settings.iterations.judge is not None and settings.iterations.judge.criteria:
        parts.append(criteria_instruction(settings.iterations.judge.criteria))
    if isinstance(existing, SystemMessage) and isinstance(existing.content, str):
        parts.append(existing.content)
    prompt = settings.system_prompt
    if isinstance(prompt, SystemMessage):
        return with_texts(prompt, parts)
    parts = [prompt, *parts] if prompt else parts
    return SystemMessage("\n\n".join(parts)) if parts else None


def build_request(
    state: LoopState, settings: LoopSettings, extra: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The next call's request: the system prompt, the transcript (or what
    ``Iterations.fresh_context`` sends), then ``extra``, this step's messages."""
    messages: Sequence[BaseMessage] = state.get("messages") or []
    head = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    if head is not None:
        messages = messages[1:]
    system = system_message(settings, head)
    request: list[BaseMessage] = [system] if system is not None else []
    if settings.iterations.fresh_context and state.get("iteration", 1) > 1:
        request_id = (state.get("run") or {}).get("request_id")
        request += [m for m in messages if m.id == request_id][:1]
        progress = state.get("progress") or []
        if settings.iterations.inject_progress and progress:  # "Progress so far", as a tagged message
            lines = "\n".join(f"{i}. {p}" for i, p in enumerate(progress, 1))
            request.append(loop_message(prompts.PROGRESS.format(lines=lines), name=PROGRESS_NAME))
        request += iteration_messages(messages, iteration_info(state).get("start_id"))
    else:
        request += messages
    request += extra
    return request


def estimate_usage(request: Sequence[BaseMessage], reply: BaseMessage, model: Any = None) -> Usage:
    """Usage for models that report none (only used for token budgets): ``count_tokens``."""
    inp = count_tokens(model, request)
    out = count_tokens(model, [reply])
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def pick_tools(chosen: Any, tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools ``tool_filter`` returned (tools or names), checked against the graph's."""
    if not isinstance(chosen, Sequence) or isinstance(chosen, str):
        raise ValueError(f"tool_filter must return a list of tools or tool names, got "
                         f"{type(chosen).__name__} {chosen!r:.80}")
    known = {t.name: t for t in tools}
    picked: list[BaseTool] = []
    for item in chosen:
        name = item if isinstance(item, str) else getattr(item, "name", None)
        if name not in known:
            raise ValueError(f"tool_filter returned an unknown tool: {item!r}")
        picked.append(known[name])
    return picked


@dataclass
class Call:
    """One model call as planned. Messages since the newest reply ``encodable`` changed are
    written back under their ids (``fixed``); a run's input is escaped by its check."""

    settings: LoopSettings
    request: list[BaseMessage]
    run: RunInfo
    final: bool
    drained: bool
    extra: list[BaseMessage] = field(default_factory=list)
    update: dict[str, Any] = field(default_factory=dict)
    fixed: list[BaseMessage] = field(default_factory=list)
    watch: bool = False  # stream the call to cut a runaway reply (the ``text`` layer is on)

    def __post_init__(self) -> None:
        detection = self.settings.loop_detection
        self.watch = detection is not None and "text" in detection.layers
        start = len(self.request)
        while start > 0 and not isinstance(self.request[start - 1], AIMessage):
            start -= 1
        changed: dict[int, BaseMessage] = {}  # by the id() of the message it replaces
        for message in (*self.request[start:], *self.extra):
            sent = encodable(message)
            if sent is not message:
                changed.setdefault(id(message), sent)
        if changed:  # else the request goes as built
            new = self.request[start:]
            self.fixed = [changed[id(m)] for m in new if id(m) in changed and m.id is not None]
            self.request = [*self.request[:start], *(changed.get(id(m), m) for m in new)]
            self.extra = [changed.get(id(m), m) for m in self.extra]


class ModelNode(StepNode):
    """Call the agent's model (see module docstring)."""

    name = "model"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.memo = DetectorMemo()  # the detector states of earlier replies, one per compiled graph
        # the user's ``wrap_model_call`` middleware around the call (``nodes/hosted.py``)
        self.wrapped = ModelCalls(settings) if settings.hooked("wrap_model_call") else None

    @cached_property
    def _bound_all(self) -> Runnable[LanguageModelInput, BaseMessage]:
        """The model with every tool, bound at its first call (as ``create_agent`` binds)."""
        return call_model(self.settings)

    @cached_property
    def _final(self) -> Runnable[LanguageModelInput, BaseMessage]:
        """The model of the final answer, bound at its first call."""
        return final_model(self.settings)

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """The step's work for both entry points: plan, pick the tools, call, record."""
        config = config if config is not None else ensure_config()  # a step's is complete
        call = self.plan(state)
        if isinstance(call, dict):
            return call
        chosen = None if call.final else call.settings.hooks.tool_filter  # all tools when None
        offered = None
        if chosen is not None:
            picked = yield callback(chosen, state, list(call.settings.tools), name="tool_filter")
            offered = pick_tools(picked, call.settings.tools)
        binding = self._binding(state, call, offered)
        if isinstance(binding, dict):
            return binding
        if call.extra:  # the notice reaches the messages stream before the reply
            yield Io(show_messages, ashow_messages, (config, call.extra))
        config = tagged(config, FINAL_ANSWER) if call.final else config
        if self.wrapped is not None:  # through the user's middleware (not streamed: no cut)
            hosted = yield from self.wrapped.steps(state, call.request, binding, offered, call.final, config)
            return hosted.output(self.record(state, call, hosted.reply, offered))
        result = yield Io(model_reply, amodel_reply, (binding(), call.request, config, call.watch))
        return self.record(state, call, as_message(result, "model"), offered)

    def plan(self, state: LoopState) -> Call | dict[str, Any]:
        """The call to make, or the update that ends the step without one (pure, but for a
        budget check-in: it pauses here, before any model call, so a resume never calls twice)."""
        settings = self.settings.for_runtime(get_runtime())
        run: RunInfo = state.get("run") or {}  # type: ignore[assignment]  # never changed in place
        update: dict[str, Any] = {}
        stop = state.get("stop_reason")
        pending = state.get("loop_notices") or []
        limits = settings.limits
        timeout = timeout_guard(state, settings) if stop is None else None
        if timeout is not None:  # the time cap, checked between steps
            update = stop_update(run, timeout)
            run, stop = update["run"], timeout["reason"]
        if stop is None:  # the request, and a stop when it leaves no room for a final answer
            notice = drain(pending, run=str(run.get("id")), hidden=not settings.show_notices)
            extra: list[BaseMessage] = [notice] if notice is not None else []
            if any(n["source"] == "human" and n["run"] == str(run.get("id")) for n in pending):
                return {"messages": extra, "loop_notices": []}  # a hint: first the hooks (after_call)
            request = build_request(state, settings, extra)
            over = budget_guard(state, settings, request) if limits.token_budget is not None else None
            if over is not None and limits.budget_check_in and checkpointer(get_config()):
                asked = check_in(lambda more: budget_guard(
                    {**state, "run": {**run, "budget_extra": more}}, settings, request),
                    partial(ask_plainly, schema=BUDGET_ANSWER), extra=run.get("budget_extra", 0),
                    scope=limits.budget_scope)
                run = {**run, "budget_extra": asked.extra} if asked.extra else run
                if asked.added is not None:  # their redirect, likewise
                    return {"messages": [*extra, asked.added], "run": run, "loop_notices": []}
                over = asked.stop
            if over is None:
                return Call(settings, request, run, final=False, drained=bool(pending), extra=extra)
            update = stop_update(run, over)
            run, stop = update["run"], over["reason"]
        if run.get("finalized") or not limits.final_answer:
            return update
        why: Guard = update.get("stop_guard") or state.get("stop_guard") or guard("router", stop)
        pending = queue_notice(pending, **stop_notice(why, str(run.get("id"))))
        notice = drain(pending, run=str(run.get("id")), hidden=not settings.show_notices)
        final_extra: list[BaseMessage] = [notice] if notice is not None else []
        return Call(settings, build_request(state, settings, final_extra), run, final=True,
                    drained=True, extra=final_extra, update=update)

    def _binding(self, state: LoopState, call: Call, offered: Sequence[BaseTool] | None
                 ) -> Callable[[], Runnable[LanguageModelInput, BaseMessage]] | dict[str, Any]:
        """What binds the model when the call is made, or the update that skips the final answer."""
        if not any(m.type == "human" for m in call.request):
            raise ValueError("model: the request has no user message; nothing to work on")
        if not call.final and offered is not None:
            return partial(call_model, self.settings, offered)
        if not call.final:
            return lambda: self._bound_all
        room = final_answer_room({**state, "run": call.run}, call.settings, call.request)
        if room is not None and room < MIN_FINAL_OUTPUT:  # no room for the final answer
            why = dict(call.update.get("stop_guard") or state.get("stop_guard")
                       or guard("router", state.get("stop_reason") or "completed"))
            why["final_answer"] = skipped_answer(room)
            return {**call.update, **stop_update(call.run, why, finalized=True),  # type: ignore[arg-type]
                    "loop_notices": [], "messages": [skipped_reply(why, room, call.settings.name)]}
        return (lambda: self._final) if room is None else partial(final_model, self.settings, room)

    def record(self, state: LoopState, call: Call, reply: AIMessage,
               offered: Sequence[BaseTool] | None) -> dict[str, Any]:
        """The update after the reply: the messages, usage and the iteration's counts."""
        run, reply = call.run, encodable(with_unique_call_ids(reply))
        if is_cut(reply):  # cut mid-stream: none of its calls runs (the last may be half-streamed)
            reply = without_tool_calls(reply)
        if call.final:
            structured = call.settings.structured
            reply = final_answer(reply, call.update.get("stop_reason") or state.get("stop_reason"),
                                 structured.tool_names if structured else ())
            run = {**run, "finalized": True}
        if call.settings.name:
            reply = reply.model_copy(update={"name": call.settings.name})
        usage = usage_of(reply)
        if usage is None and call.settings.limits.token_budget is not None:
            usage = estimate_usage(call.request, reply, call.settings.model)
        info: dict[str, Any] = dict(iteration_info(state))
        info["model_calls"] = info.get("model_calls", 0) + 1
        info["usage"] = add_usage(info.get("usage"), usage)
        info["offered"] = None if offered is None else [t.name for t in offered]
        update: dict[str, Any] = {**call.update, "messages": [*call.fixed, *call.extra, reply],
                                  "usage": add_usage(state.get("usage"), usage),
                                  "iteration_info": info}
        if not call.final:  # the engine's decision on the reply, once
            after = cast(LoopState, {**state, "run": run, "usage": update["usage"], "iteration_info": info})
            view = run_view(after, call.settings, reply)
            decision = decide(reply, state.get("messages") or [], view, policy_of(call.settings), self.memo)
            if decision is not None:
                run = {**run, "decision": dict(decision.record())}
        if run is not state.get("run") and run != state.get("run"):
            update["run"] = run
        if call.drained:
            update["loop_notices"] = []
        return update

