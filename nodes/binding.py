"""What the ``model`` node binds on the agent's model for a call, as ``create_agent`` binds it
(tools, provider tools, the response format), on each chat model inside a wrapper.

The final-answer call after a stop keeps every tool defined (a history of tool calls is only
valid with tools defined) and forbids their use where the provider can; with ``ToolStrategy``
it is forced to an output tool.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool

from langgraph_loop.core.models import ChatRunnable, map_chat_models
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.structured import StructuredOutput
from langgraph_loop.engine.final import forbid_tools
from langgraph_loop.engine.limits import max_tokens_of

__all__ = ["COMPACTION", "FINAL_ANSWER", "JUDGE", "call_model", "final_model", "native_kwargs",
           "openai_compatible", "tagged"]

FINAL_ANSWER = "final_answer"
JUDGE = "judge"
COMPACTION = "compaction"  # the tags and run names of the loop's own model calls


def tagged(config: RunnableConfig, name: str) -> RunnableConfig:
    """``config`` for one of the loop's own model calls: tagged ``name`` and run as ``name``."""
    return merge_configs(config, {"tags": [name], "run_name": name})


def openai_compatible(chat: Any) -> bool:
    """Is ``chat`` a ``langchain_openai`` ``BaseChatOpenAI``? Asked without importing it: such a
    model's class exists only once its module is loaded, so other apps never pay for the import."""
    base = sys.modules.get("langchain_openai.chat_models.base")
    return base is not None and isinstance(chat, base.BaseChatOpenAI)


def native_kwargs(structured: StructuredOutput | None, chat: Any) -> dict[str, Any]:
    """``ProviderStrategy``'s model arguments for this chat model (``strict`` on OpenAI's
    chat completions, as ``create_agent`` sets it)."""
    if structured is None or not structured.native:
        return {}
    kwargs = structured.strategy.to_model_kwargs()  # type: ignore[union-attr]
    if openai_compatible(chat) and not getattr(chat, "use_responses_api", False):
        kwargs["strict"] = True
    return kwargs


def _all_tools(settings: LoopSettings, offered: Sequence[BaseTool] | None) -> list[Any]:
    """The tools a call binds: the offered ones, the provider-side ones, the output tools."""
    structured = settings.structured
    tools: list[Any] = list(settings.tools if offered is None else offered)
    return [*tools, *settings.provider_tools, *(structured.tools if structured else [])]


def call_model(settings: LoopSettings, offered: Sequence[BaseTool] | None = None) -> ChatRunnable:
    """The model for a call of the loop (``offered``: the tool filter's pick, None = all)."""
    structured = settings.structured
    tools = _all_tools(settings, offered)
    if not tools and (structured is None or not structured.native):
        return settings.model
    choice = {} if structured is None or structured.native else {"tool_choice": "any"}
    return map_chat_models(settings.model, lambda chat: chat.bind_tools(
        tools, **choice, **native_kwargs(structured, chat)))


def final_model(settings: LoopSettings, room: int | None = None) -> ChatRunnable:
    """The model for the final answer after a stop (``room``: output tokens it may use)."""
    structured = settings.structured
    tools = _all_tools(settings, None)

    def bind(chat: Any) -> Runnable[Any, Any]:
        supported, own = max_tokens_of(chat)
        cap = {"max_tokens": min(room, own or room)} if room is not None and supported else {}
        if structured is not None and not structured.native:
            return chat.bind_tools(tools, tool_choice=structured.forced_choice, **cap)  # type: ignore[no-any-return]
        extra = {**native_kwargs(structured, chat), **cap}
        if tools:
            return forbid_tools(chat, tools, **extra)
        if structured is not None:
            return chat.bind_tools([], **extra)  # type: ignore[no-any-return]
        return chat.bind(**extra) if extra else chat  # type: ignore[no-any-return]

    return map_chat_models(settings.model, bind)
