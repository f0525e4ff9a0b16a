"""The one tools-free final answer, written once for both front doors (docs/reliability.md).

After a stop the model makes one last call with every tool still **defined** (Anthropic and
Bedrock reject a tool-call history otherwise) and their use forbidden where the provider can
(``none_choice``; Bedrock Converse reads ``"none"`` as a tool named none, so ``forbid_tools``
binds no choice there). Calls a final answer still makes are not run: they move to
``response_metadata`` (``without_tool_calls``), and a run never ends on an empty message.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langchain_anthropic import ChatAnthropic
    >>> none_choice(ScriptedChatModel()), none_choice(ChatAnthropic(model="m", api_key="k"))
    ('none', {'type': 'none'})
    >>> reply = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> final = without_tool_calls(reply)
    >>> final.tool_calls, final.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"]
    ([], 'f')
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableBinding

from langgraph_loop.core import prompts
from langgraph_loop.core.messages import Notice, call_label
from langgraph_loop.core.stop import Guard, stop_instruction

__all__ = ["final_answer", "forbid_tools", "none_choice", "stop_notice", "without_tool_calls"]


_NONE_BY_PACKAGE: dict[str, Any] = {"langchain_anthropic": {"type": "none"}}  # its strings name a tool


def none_choice(chat: Any) -> Any:
    """The ``tool_choice`` that forbids tool use on this chat model (None: none known)."""
    if not isinstance(chat, BaseChatModel):
        return None  # a configurable model: the provider is chosen per run
    if (chat.profile or {}).get("tool_choice") is False:
        return None
    return _NONE_BY_PACKAGE.get(type(chat).__module__.split(".")[0], "none")


def _names_none(value: Any) -> bool:
    """Does a bound ``tool_choice`` name a tool called none (``"none"`` misread)?"""
    if isinstance(value, dict):
        return value.get("name") == "none" or any(_names_none(v) for v in value.values())
    return False


def forbid_tools(chat: Any, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
    """``chat`` with ``tools`` defined and their use forbidden where it can be."""
    choice = none_choice(chat)
    if choice is not None:
        try:
            bound = chat.bind_tools(tools, tool_choice=choice, **kwargs)
        except (NotImplementedError, ValueError, TypeError):
            bound = None
        misread = isinstance(bound, RunnableBinding) and _names_none(bound.kwargs.get("tool_choice"))
        if bound is not None and not misread:
            return bound  # type: ignore[no-any-return]
    return chat.bind_tools(tools, **kwargs)  # type: ignore[no-any-return]


_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})  # Anthropic's, LangChain's, OpenAI's


def _without_call_blocks(content: Any, ids: Collection[Any]) -> Any:
    """Block content without the blocks of the calls ``ids`` (text content as it is)."""
    if isinstance(content, str):
        return content
    return [b for b in content if not (isinstance(b, dict) and b.get("type") in _CALL_BLOCKS
                                       and (b.get("id") in ids or b.get("call_id") in ids))]


_CALL_FINISH = {"finish_reason": ("tool_calls", "function_call", "stop"),
                "stop_reason": ("tool_use", "end_turn")}
"""Response metadata that says a reply ended on tool calls, and what it says without them."""


def without_tool_calls(message: AIMessage, keep: Collection[str] = ()) -> AIMessage:
    """The final answer as stored: tool calls it still asked for (but the ``keep`` tools', the
    response format's) are not run and go with their content blocks and the provider's record of
    them (``additional_kwargs`` ``tool_calls``, legacy ``function_call``, ``_CALL_FINISH``)."""
    kept = [c for c in message.tool_calls if c["name"] in keep]
    legacy = not kept and "function_call" in message.additional_kwargs
    if len(kept) == len(message.tool_calls) and not message.invalid_tool_calls and not legacy:
        return message
    dropped = ([dict(c) for c in message.tool_calls if c["name"] not in keep]
               + [dict(c) for c in message.invalid_tool_calls])
    kwargs = {k: v for k, v in message.additional_kwargs.items()
              if k != "tool_calls" and not (k == "function_call" and not kept)}
    metadata: dict[str, Any] = {**message.response_metadata}
    if dropped:
        metadata["langgraph_loop_dropped_tool_calls"] = dropped
    for key, (*calls, ended) in _CALL_FINISH.items():
        if not kept and metadata.get(key) in calls:
            metadata[key] = ended
    content = _without_call_blocks(message.content, {c.get("id") for c in dropped})
    return message.model_copy(update={"content": content, "tool_calls": kept, "invalid_tool_calls": [],
                                      "tool_call_chunks": [], "additional_kwargs": kwargs,
                                      "response_metadata": metadata})


def stop_notice(why: Guard, run: str) -> Notice:
    """What the final-answer call is told: the stop's instruction, as the run's deferred notice."""
    return {"run": run, "key": "stop", "text": stop_instruction(why), "source": "stop"}


def final_answer(reply: AIMessage, reason: str | None, keep: Collection[str] = ()) -> AIMessage:
    """``without_tool_calls``; when only calls were dropped, the text that says so (``NO_FINAL_ANSWER``)."""
    final = without_tool_calls(reply, keep)
    dropped = final.response_metadata.get("langgraph_loop_dropped_tool_calls") or []
    if not dropped or final.tool_calls or final.text.strip():
        return final
    calls = ", ".join(call_label(c.get("name"), c.get("args")) for c in dropped)
    return final.model_copy(update={"content": prompts.NO_FINAL_ANSWER.format(
        reason=reason or "stopped", calls=calls)})
