"""What the ``model`` node binds on the agent's model for a call.

A loop call binds the offered tools, the provider-side tool dicts and the response format
(``ToolStrategy``: its output tools, and ``tool_choice="any"``; ``ProviderStrategy``: the
provider's ``response_format``), as ``create_agent`` does.

The final-answer call after a stop keeps every tool **defined** (a history of tool calls and
results is only valid with tools defined: Anthropic and Bedrock reject it otherwise) and
forbids their use where the provider can: ``tool_choice="none"``, or the dict
``{"type": "none"}`` for ``langchain-anthropic`` (its string values name a tool). A model whose
profile says it has no tool choice, a configurable model (its provider is picked per run) and
a provider that turns ``"none"`` into a call of a tool named none (Bedrock Converse) get the
tools without a choice; the model node drops any call such a final answer still makes. With
``ToolStrategy`` the final call is instead forced to an output tool.

Every binding is made on each chat model inside a wrapper (``core/models.map_chat_models``).

The loop's own calls are tagged and named (``tagged``) so a UI can tell them from the agent's:
``final_answer`` (the tools-free call after a stop), ``judge``, ``compaction`` (the summarizer).

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langchain_anthropic import ChatAnthropic
    >>> none_choice(ScriptedChatModel()), none_choice(ChatAnthropic(model="m", api_key="k"))
    ('none', {'type': 'none'})
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool

from langgraph_loop.core.models import ChatRunnable, map_chat_models
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.structured import StructuredOutput
from langgraph_loop.nodes.limits import max_tokens_of

__all__ = ["COMPACTION", "FINAL_ANSWER", "JUDGE", "call_model", "final_model", "forbid_tools",
           "native_kwargs", "none_choice", "openai_compatible", "tagged"]

FINAL_ANSWER = "final_answer"
JUDGE = "judge"
COMPACTION = "compaction"
"""The tags and run names of the loop's own model calls."""


def tagged(config: RunnableConfig, name: str) -> RunnableConfig:
    """``config`` for one of the loop's own model calls: tagged ``name`` and run as ``name``.

    Example:
        >>> c = tagged({"tags": ["mine"]}, FINAL_ANSWER)
        >>> sorted(c["tags"]), c["run_name"]
        (['final_answer', 'mine'], 'final_answer')
    """
    return merge_configs(config, {"tags": [name], "run_name": name})

_NONE_BY_PACKAGE: dict[str, Any] = {"langchain_anthropic": {"type": "none"}}
"""``tool_choice`` "none" where a provider package spells it differently."""


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


def openai_compatible(chat: Any) -> bool:
    """Is ``chat`` an OpenAI-compatible chat model (``langchain_openai``'s ``BaseChatOpenAI``:
    ``ChatOpenAI``, ``AzureChatOpenAI``, ``ChatDeepSeek``, ``ChatXAI``...)?

    Asked without importing ``langchain_openai`` (and the ``openai`` SDK): such a model's class
    can only exist once its module is loaded, so an app on another provider never pays for it.

    Example:
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> openai_compatible(ScriptedChatModel())
        False
    """
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
