"""The ``compaction`` node: keep long loops inside the context window.

It runs before every model call. When the request the model is about to receive
would exceed ``Compaction.max_tokens`` (counted with the model's own token counter
when it has a working one, else ``count_tokens_approximately``), the oldest messages
are replaced *in state* by one summary written by ``Compaction.summarizer`` (default:
the agent's model; the call is tagged ``compaction``). Kept: a leading system
message, the run's original request, and the last ``keep_last`` messages, widened so
an AIMessage is never separated from its ToolMessages. The summary is a
``HumanMessage(name="loop_summary")`` tagged ``additional_kwargs["langgraph_loop"] =
{"kind": "summary", ...}`` so UIs can hide it; it sits right before the kept tail.
The pass record's ``compacted`` counts the messages replaced.

The messages channel appends a message whose id it has not seen at the end, so
placing the summary before the tail means removing the tail and adding it again
(same ids) after the summary: the resulting order is head, summary, tail.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1")
    >>> msgs = [HumanMessage("task", id="h0"), AIMessage("x", id="a0"),
    ...         HumanMessage("more", id="h1"), ai, ToolMessage("ok", tool_call_id="c1", id="t1")]
    >>> split = plan_compaction(msgs, keep_last=1, keep_ids={"h0"})
    >>> [m.id for m in split.old], [m.id for m in split.tail]
    (['a0', 'h1'], ['a1', 't1'])
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Invoke, Logic, as_message
from langgraph_loop.core.notices import drain
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.nodes.base import LoopNode, emit
from langgraph_loop.nodes.passes import answer_text
from langgraph_loop.nodes.request import build_request

__all__ = [
    "SUMMARY_NAME",
    "CompactionNode",
    "Split",
    "compaction_writes",
    "count_tokens",
    "plan_compaction",
    "render",
    "summary_message",
    "summary_prompt",
]

SUMMARY_NAME = "loop_summary"
SUMMARY_INSTRUCTIONS = (
    "You compress the history of an agent's work so it can continue with less context. "
    "Summarize the conversation below: the facts found, the tool results that matter, "
    "decisions made, what was tried and failed, and what remains to do. Keep names, "
    "numbers, paths and identifiers exactly. Write only the summary."
)


@dataclass(frozen=True)
class Split:
    """Which messages stay before the summary, which are replaced, which stay after."""

    head: list[BaseMessage]
    old: list[BaseMessage]
    tail: list[BaseMessage]


def count_tokens(
    model: BaseLanguageModel[Any], messages: Sequence[BaseMessage], tools: Sequence[BaseTool] = ()
) -> int:
    """The model's own count when it has one that works, else an approximation.

    Example:
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> count_tokens(ScriptedChatModel(), [HumanMessage("x" * 400)]) > 100
        True
    """
    own = getattr(type(model), "get_num_tokens_from_messages", None)
    generic = (BaseLanguageModel.get_num_tokens_from_messages,
               BaseChatModel.get_num_tokens_from_messages)
    if own is not None and own not in generic:
        try:
            return int(model.get_num_tokens_from_messages(list(messages), tools=list(tools) or None))
        except Exception:  # noqa: BLE001 - e.g. a tokenizer that cannot load offline
            pass
    return count_tokens_approximately(list(messages), tools=list(tools) or None)


def _tail_start(messages: Sequence[BaseMessage], keep_last: int) -> int:
    start = max(0, len(messages) - keep_last)
    while start > 0 and isinstance(messages[start], ToolMessage):
        start -= 1  # back to the AIMessage that owns these ToolMessages
    return start


def plan_compaction(
    messages: Sequence[BaseMessage], *, keep_last: int, keep_ids: Collection[str | None] = ()
) -> Split | None:
    """Split the transcript for a compaction; None when there is nothing old to replace.

    ``keep_ids`` are messages kept in place (the run's original request); a leading
    system message is always kept.
    """
    start = _tail_start(messages, keep_last)
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
        text = answer_text(message)
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = "; ".join(f"{c['name']}({json.dumps(c['args'], default=str)})"
                              for c in message.tool_calls)
            text = f"{text}\n[tool calls] {calls}".strip()
        lines.append(f"[{role}] {text}")
    return "\n\n".join(lines)


def summary_prompt(old: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The summarizer's request."""
    return [SystemMessage(SUMMARY_INSTRUCTIONS),
            HumanMessage(f"Conversation to summarize:\n\n{render(old)}")]


def summary_message(text: str, replaced: int) -> HumanMessage:
    """The tagged summary that replaces ``replaced`` messages."""
    return HumanMessage(
        f"Summary of the earlier conversation ({replaced} messages were compacted):\n\n{text}",
        name=SUMMARY_NAME,
        additional_kwargs={"langgraph_loop": {"kind": "summary", "replaced": replaced}},
    )


def compaction_writes(split: Split, summary: BaseMessage) -> list[BaseMessage]:
    """Message writes that leave ``head + [summary] + tail`` in the channel."""
    removed = [RemoveMessage(id=str(m.id)) for m in [*split.old, *split.tail]]
    return [*removed, summary, *split.tail]


class CompactionNode(LoopNode):
    """Summarize old messages when the next request would be too large."""

    name = "compaction"

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        compaction = settings.compaction
        run = state.get("run") or {}
        if compaction is None or (state.get("stop_reason") is not None and (
                run.get("finalized") or not settings.limits.final_answer)):
            return {}
        notice, _ = drain(state.get("pending_notices"), run=str(run.get("id")))
        request = build_request(state, settings, [notice] if notice is not None else [])
        size = count_tokens(settings.model, request, settings.tools)
        if size <= compaction.max_tokens:
            return {}
        keep = {run.get("request_id")}
        if settings.fresh_context:
            keep.add((state.get("pass_info") or {}).get("start_id"))
        split = plan_compaction(state.get("messages") or [], keep_last=compaction.keep_last,
                                keep_ids=keep)
        if split is None:
            return {}
        summarizer = compaction.summarizer or settings.model
        result = yield Invoke(summarizer, summary_prompt(split.old),
                             merge_configs(config, {"tags": ["compaction"]}))
        summary = summary_message(answer_text(as_message(result, "compaction.summarizer")),
                                  len(split.old))
        pass_info: dict[str, Any] = dict(state.get("pass_info") or {})
        pass_info["compacted"] = int(pass_info.get("compacted") or 0) + len(split.old)
        emit(runtime, {"event": "compaction", "replaced": len(split.old), "tokens": size,
                       "max_tokens": compaction.max_tokens})
        return {"messages": compaction_writes(split, summary), "pass_info": pass_info}
