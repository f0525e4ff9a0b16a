"""The LangGraph and LangChain internals this package relies on, in one place, and why: LangGraph
(1.2) has no public API for five of them, LangChain (1.5) for three. Each is pinned by a test
(``tests/core/test_compat.py`` unless another file is named) that fails before the loop does:

- ``messages_delta_reducer``: the delta messages channel's batch reducer; LangGraph gives plain
  messages ids only for this function, by identity.
- ``durable(config)``: only a step saved as it goes runs ``tools``' batch as tasks, so a crash
  re-runs only unfinished calls.
- ``resuming(config)``: a step resumed with an answer (``approval`` must not ask its resolver again).
- ``checkpointer(config)``: the running graph's saver (a loop stop's checkpoint, the loop question).
- ``streams_messages(config)``: only then does ``model`` hand a notice to ``stream_mode="messages"``
  (``tests/e2e/test_ui_streams.py``).
- ``would_stream``/``streams``: LangChain's ``_should_stream`` (never through a retry, a cache or a
  configurable model): a call ``invoke`` streams anyway, ``model`` streams itself to cut a runaway reply.
- ``SubagentTransformer`` (private): ``create_agent`` registers it on every agent, so a drop-in
  does too (``core/streams.py``; ``tests/parity/test_dropin.py``).
- ``node_trace_policy(policy)``: a hook node's ``TracePolicy``, the middleware's own else the
  ``configure_trace_policy`` default, which lives in a private module (``tests/parity/test_dropin.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from langchain.agents._subagent_transformer import SubagentTransformer
from langchain.agents.middleware._trace_policy import _node_trace_policy
from langchain_core.caches import BaseCache
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding, RunnableConfig, RunnableWithFallbacks
from langchain_core.tracers._streaming import _V2StreamingCallbackHandler
from langgraph._internal._constants import CONFIG_KEY_DURABILITY, CONFIG_KEY_SCRATCHPAD
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.graph.message import _messages_delta_reducer
from langgraph.pregel._messages import StreamMessagesHandler

__all__ = ["SubagentTransformer", "checkpointer", "durable", "messages_delta_reducer",
           "node_trace_policy", "resuming", "streams", "streams_messages", "would_stream"]

messages_delta_reducer: Any = _messages_delta_reducer
node_trace_policy = _node_trace_policy


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get(CONF) or {})


def _handlers(callbacks: Any) -> list[Any]:
    """The handlers of a config's ``callbacks``: a manager, a list, or None."""
    return (callbacks.handlers if isinstance(callbacks, BaseCallbackManager)
            else callbacks if isinstance(callbacks, list) else [])


def durable(config: RunnableConfig | None) -> bool:
    """Is this step saved as it goes (a checkpointer, durability other than ``"exit"``)?"""
    configurable = _configurable(config)
    return (configurable.get(CONFIG_KEY_CHECKPOINTER) is not None
            and configurable.get(CONFIG_KEY_DURABILITY) != "exit")


def resuming(config: RunnableConfig | None) -> bool:
    """Is this step being resumed with an answer to its interrupt?"""
    pad = _configurable(config).get(CONFIG_KEY_SCRATCHPAD)
    if pad is None:
        return False
    return bool(pad.resume) or pad.get_null_resume(False) is not None


def checkpointer(config: RunnableConfig | None) -> BaseCheckpointSaver[Any] | None:
    """The running graph's checkpointer (None when it has none)."""
    saver = _configurable(config).get(CONFIG_KEY_CHECKPOINTER)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def streams_messages(config: RunnableConfig | None) -> bool:
    """Is ``stream_mode="messages"`` listening to the step this config belongs to?"""
    return any(isinstance(h, StreamMessagesHandler) for h in _handlers((config or {}).get("callbacks")))


def would_stream(chat: BaseChatModel, handlers: Sequence[Any], kwargs: Mapping[str, Any], *,
                 async_api: bool) -> bool:
    """Would ``chat.invoke`` (``ainvoke``: ``async_api``) with the bound ``kwargs`` and these
    callback ``handlers`` stream through ``on_llm_new_token``, as ``stream()`` does?"""
    if any(isinstance(h, _V2StreamingCallbackHandler) for h in handlers):
        return False  # invoke would emit v2 protocol events, which stream() does not
    manager = SimpleNamespace(handlers=list(handlers))  # the one attribute the rule reads
    return bool(chat._should_stream(async_api=async_api, run_manager=manager, **kwargs))  # type: ignore[arg-type]


def streams(runnable: Any, config: RunnableConfig, *, async_api: bool) -> bool:
    """Would LangChain stream this call anyway (so ``stream()`` may replace ``invoke()``)? Reads
    the kwargs and handlers bound around the first chat model (through bindings and fallbacks; a
    retry, a configurable model, anything else or an LLM cache keeps ``invoke``)."""
    kwargs: dict[str, Any] = {}
    bound: list[Any] = []
    chat: Any = runnable
    while not isinstance(chat, BaseChatModel):
        if isinstance(chat, RunnableWithFallbacks):
            chat = chat.runnable
        elif isinstance(chat, RunnableBinding):  # bind, bind_tools, with_config (not with_retry)
            kwargs = {**chat.kwargs, **kwargs}  # an outer binding's win
            bound.append(chat.config.get("callbacks"))
            chat = chat.bound
        else:
            return False
    cache = chat.cache
    if cache is not False and ((cache is not None and isinstance(cache, BaseCache))
                               or get_llm_cache() is not None):
        return False
    handlers = [h for callbacks in [config.get("callbacks"), *bound, chat.callbacks]
                for h in _handlers(callbacks)]
    return would_stream(chat, handlers, kwargs, async_api=async_api)
