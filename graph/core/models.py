"""The agent's model as ``create_agent`` accepts it: a chat model, a ``"provider:model"`` string,
or a Runnable wrapping chat models. A wrapper is kept: what the loop binds is bound on each chat
model inside it (``map_chat_models``), each as its provider understands it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase

__all__ = ["ChatRunnable", "chat_models", "map_chat_models", "primary_chat_model", "resolve_model"]

ChatRunnable = Runnable[LanguageModelInput, BaseMessage]
"""The agent's model: a chat model or a Runnable wrapping chat models."""

_ACCEPTED = ("a chat model, a 'provider:model' string, or a Runnable wrapping chat models "
             "(with_fallbacks, with_retry, bind, with_config, a configurable init_chat_model)")


def _is_chat(runnable: Any) -> bool:
    """A chat model, or a Runnable that binds tools like one (a configurable model)."""
    if isinstance(runnable, BaseChatModel):
        return True
    wrapper = isinstance(runnable, RunnableBindingBase | RunnableWithFallbacks)
    return isinstance(runnable, Runnable) and not wrapper and callable(getattr(runnable, "bind_tools", None))


def _inner(model: Any) -> list[Any]:
    """The Runnables a model's wrappers (fallbacks, bindings) end in, the primary first."""
    if isinstance(model, RunnableWithFallbacks):
        return [m for r in (model.runnable, *model.fallbacks) for m in _inner(r)]
    if isinstance(model, RunnableBindingBase):
        return _inner(model.bound)
    return [model]


def chat_models(model: Any) -> list[Any]:
    """The chat models a model calls, the primary first (fallbacks after it)."""
    return [m for m in _inner(model) if _is_chat(m)]


def primary_chat_model(model: Any) -> BaseChatModel | None:
    """The chat model a model calls first (None for a configurable one: chosen per run)."""
    found = chat_models(model)
    return found[0] if found and isinstance(found[0], BaseChatModel) else None


def map_chat_models(model: Any, bind: Callable[[Any], Runnable[Any, Any]]) -> ChatRunnable:
    """``model`` with every chat model inside it replaced by ``bind(chat_model)``; the
    wrappers around them (retry, fallbacks, bound kwargs, config) are kept."""
    if isinstance(model, RunnableWithFallbacks):
        return model.model_copy(update={  # type: ignore[no-any-return]
            "runnable": map_chat_models(model.runnable, bind),
            "fallbacks": [map_chat_models(f, bind) for f in model.fallbacks]})
    if isinstance(model, RunnableBindingBase):
        return model.model_copy(update={"bound": map_chat_models(model.bound, bind)})  # type: ignore[no-any-return]
    return bind(model)


def resolve_model(model: Any) -> ChatRunnable:
    """The model to call: a string through ``init_chat_model``, anything else checked: every
    Runnable inside a wrapper must end in a chat model (a ``ValueError`` listing the kinds)."""
    if isinstance(model, str):
        model = init_chat_model(model)
    for inner in _inner(model):
        if not _is_chat(inner):
            raise ValueError(f"model: expected {_ACCEPTED}; got {type(inner).__name__}")
    return model  # type: ignore[no-any-return]
