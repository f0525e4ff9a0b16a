"""The ``compaction`` node: keep long loops inside the context window.

Before every model call: when the request would exceed ``Compaction.max_tokens`` (counted as
``graph/engine/limits.py`` counts), the oldest messages are replaced *in state* by one summary
written by ``Compaction.summarizer`` (default: the agent's model), a tagged
``HumanMessage(name="loop_summary")`` right before the kept tail. Kept: a leading system
message, the run's original request, and the last ``keep_last`` messages, widened so an
AIMessage is never separated from its ToolMessages. Written as a snapshot (``compaction_writes``).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.runtime import get_runtime
from langgraph.types import Overwrite

from langgraph_loop.core import prompts
from langgraph_loop.core.drive import Io, StepNode, Steps
from langgraph_loop.core.messages import (
    HIDDEN_ID_PREFIX,
    SUMMARY_NAME,
    as_message,
    call_label,
    drain,
    loop_message,
)
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import (
    LoopState,
    add_usage,
    ashow_messages,
    emit,
    iteration_info,
    show_messages,
    usage_of,
)
from langgraph_loop.engine.limits import (
    MIN_FINAL_OUTPUT,
    count_tokens,
    estimate_tokens,
    max_tokens_of,
    summary_room,
)
from langgraph_loop.nodes.binding import COMPACTION, tagged
from langgraph_loop.nodes.model import build_request, estimate_usage

__all__ = ["CompactionNode", "Plan", "Split", "compaction_writes", "plan_compaction", "render",
           "summary_message"]


@dataclass(frozen=True)
class Split:
    """Which messages stay before the summary, which are replaced, which stay after."""

    head: list[BaseMessage]
    old: list[BaseMessage]
    tail: list[BaseMessage]


def plan_compaction(messages: Sequence[BaseMessage], *, keep_last: int,
                    keep_ids: Collection[str | None] = ()) -> Split | None:
    """Split the transcript for a compaction (``keep_ids``: messages kept in place besides a
    leading system message); None when there is nothing old to replace."""
    start = max(0, len(messages) - keep_last)
    while start > 0 and isinstance(messages[start], ToolMessage):
        start -= 1  # back to the AIMessage that owns these ToolMessages
    head: list[BaseMessage] = []
    old: list[BaseMessage] = []
    for i, message in enumerate(messages[:start]):
        keep = (i == 0 and isinstance(message, SystemMessage)) or message.id in keep_ids
        (head if keep else old).append(message)
    if not old:
        return None
    return Split(head=head, old=old, tail=list(messages[start:]))


def render(messages: Sequence[BaseMessage]) -> str:
    """A plain-text transcript for the summarizer (no tool-call pairing to satisfy)."""
    lines: list[str] = []
    for message in messages:
        role = message.type if not getattr(message, "name", None) else f"{message.type}:{message.name}"
        text = str(message.text)
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = "; ".join(call_label(c["name"], c["args"]) for c in message.tool_calls)
            text = f"{text}\n[tool calls] {calls}".strip()
        lines.append(f"[{role}] {text}")
    return "\n\n".join(lines)


def summary_message(text: str, replaced: int, *, hidden: bool = True) -> HumanMessage:
    """The tagged summary that replaces ``replaced`` messages (``hidden``: a do-not-render id)."""
    return loop_message(prompts.SUMMARY.format(replaced=replaced, text=text), name=SUMMARY_NAME,
                        id=f"{HIDDEN_ID_PREFIX}{uuid.uuid4()}" if hidden else None,
                        additional_kwargs={"langgraph_loop": {"kind": "summary",
                                                              "replaced": replaced}})


def compaction_writes(split: Split, summary: BaseMessage) -> Overwrite:
    """The write that leaves ``head + [summary] + tail`` in the channel: the whole new list,
    so the checkpoint stores it as a snapshot and a thread load replays nothing the summary
    replaced (the messages channel otherwise replays every write since its last snapshot)."""
    if summary.id is None:
        summary.id = str(uuid.uuid4())
    return Overwrite([*split.head, summary, *split.tail])


@dataclass(frozen=True)
class Plan:
    """A compaction to make (``runnable``: the summarizer as it is called, its output bound
    to the budget's room where it takes ``max_tokens``)."""

    split: Split
    size: int
    settings: LoopSettings
    request: list[BaseMessage]
    summarizer: Any
    runnable: Any


class CompactionNode(StepNode):
    """Summarize old messages when the next request would be too large."""

    name = "compaction"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def plan(self, state: LoopState) -> Plan | None:
        """The compaction to make (None: nothing to do, or no room for it in the budget)."""
        settings = self.settings.for_runtime(get_runtime())
        compaction = settings.compaction
        run = state.get("run") or {}
        if compaction is None or (state.get("stop_reason") is not None and (
                run.get("finalized") or not settings.limits.final_answer)):
            return None
        notice = drain(state.get("loop_notices"), run=str(run.get("id")), hidden=not settings.show_notices)
        request = build_request(state, settings, [notice] if notice is not None else [])
        # the tools apart: langchain-openai's counter ignores them, with a warning
        size = (count_tokens(settings.chat_model, request)
                + estimate_tokens([], settings.tools, per_message=0))
        if size <= compaction.max_tokens:
            return None
        keep = {run.get("request_id")}
        if settings.iterations.fresh_context:
            keep.add(iteration_info(state).get("start_id"))
        split = plan_compaction(state.get("messages") or [], keep_last=compaction.keep_last, keep_ids=keep)
        if split is None:
            return None
        prompt = [SystemMessage(prompts.SUMMARY_INSTRUCTIONS),
                  HumanMessage(prompts.SUMMARY_REQUEST.format(transcript=render(split.old)))]
        summarizer = compaction.summarizer or settings.model
        room = summary_room(state, settings, prompt, summarizer)
        if room is not None and room < MIN_FINAL_OUTPUT:  # the budget decides, not a summary
            return None
        supported, own = max_tokens_of(summarizer)
        bound = summarizer.bind(max_tokens=min(room, own or room)) if room and supported else summarizer
        return Plan(split, size, settings, prompt, summarizer, bound)

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """The plan, the summarizer's call, the summary shown to the messages stream."""
        config = ensure_config(config)
        plan = self.plan(state)
        if plan is None:
            return {}
        result = yield Io(plan.runnable.invoke, plan.runnable.ainvoke,
                          (plan.request, tagged(config, COMPACTION)))
        update = self.record(state, plan, result)
        yield Io(show_messages, ashow_messages, (config, [update["summary"]]))
        return {k: v for k, v in update.items() if k != "summary"}

    @staticmethod
    def record(state: LoopState, plan: Plan, result: Any) -> dict[str, Any]:
        """The update, and the summary for the messages stream (``summary``: not a state key)."""
        settings, split = plan.settings, plan.split
        reply = as_message(result, "compaction.summarizer")
        summary = summary_message(reply.text, len(split.old), hidden=not settings.show_notices)
        usage = usage_of(reply)
        if usage is None and settings.limits.token_budget is not None:
            usage = estimate_usage(plan.request, reply, plan.summarizer)
        info: dict[str, Any] = dict(iteration_info(state))
        info["compacted"] = int(info.get("compacted") or 0) + len(split.old)
        info["usage"] = add_usage(info.get("usage"), usage)
        assert settings.compaction is not None
        emit(get_runtime(), {"event": "compaction", "replaced": len(split.old), "tokens": plan.size,
                             "max_tokens": settings.compaction.max_tokens})
        return {"messages": compaction_writes(split, summary), "iteration_info": info,
                "usage": add_usage(state.get("usage"), usage), "summary": summary,
                "call_log": Overwrite(list(state.get("call_log") or []))}  # a snapshot of it too
