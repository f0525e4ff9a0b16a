"""The LangGraph and LangChain internals this package relies on, in one place, and why.

LangGraph has no public API (as of 1.2) for six things the loop needs, LangChain (as of
langchain-core 1.7) for one:

- ``messages_delta_reducer``: the batch reducer of LangGraph's delta messages channel
  (each checkpoint stores only a step's new messages). LangGraph recognises this
  function by identity to give ids to string, dict and tuple messages before they are
  saved, so a reducer of our own would lose that.
- ``durable(config)``: is the running step saved as it goes (a checkpointer, and a
  durability other than ``"exit"``)? The ``tools`` node runs a batch of calls as
  LangGraph tasks only then: their results are saved one by one, so a crash in a batch
  re-runs only the unfinished calls. LangGraph passes the durability in the config only.
- ``resuming(config)``: is the running step being resumed with an answer to its
  interrupt? The ``approval`` node must not ask its resolver again then: the human
  answered because the resolver handed over.
- ``checkpointer(config)``: the running graph's checkpointer (None without one). A loop
  stop records the checkpoint from just before the loop began (read from the thread's
  history with the checkpointer's public ``list``), and asks a human only when a
  checkpointer can hold the interrupt.
- ``runtime_of(config)``: the run's ``Runtime`` from the config a conditional edge gets
  (``get_runtime()`` needs the config in a context variable, which LangGraph does not set
  for edges; setting it per edge cost more than the loop detector's decision).
- ``silent(writer)``: is a stream writer a function that does nothing? LangGraph hands
  every step a writer, and one whose body is ``pass`` when nobody streams ``"custom"``; an
  event is then not built for it.
- ``streams_messages(config)``: is ``stream_mode="messages"`` listening to the running step
  (LangGraph's handler for it among the step's callbacks)? Only then does the ``model`` node
  hand a notice to that stream before the model call (``core/state.py: show_messages``),
  so a run nobody streams has no extra callback run.
- ``would_stream(chat, handlers, kwargs, async_api=...)``: would ``chat.invoke`` stream this
  call through the v1 callbacks (``on_llm_new_token``)? LangChain's own rule
  (``BaseChatModel._should_stream``: a streaming handler such as ``stream_mode="messages"``'s, or
  ``streaming=True``, unless ``disable_streaming`` says no); a v2 protocol handler makes
  ``invoke`` emit protocol events instead, which ``stream()`` does not. ``streams(runnable,
  config, async_api=...)`` asks it of the chat model a call runs first (through bindings and
  fallbacks; never for a retry, an LLM cache or a configurable model, where ``stream()`` would
  behave differently). The ``model`` node streams such a call itself to cut a runaway reply
  (``graph/engine/text_loop.py``).

- ``last_writer(versions_seen, nodes)``: the node ``update_state`` without ``as_node`` takes an
  update to come from, as LangGraph infers it: the one that saw the newest channel versions of
  the checkpoint (its public ``versions_seen``); None when two tie or when an entry other than a
  node's, the input's or the interrupt record's is there (a delta channel's snapshot bumps shift
  the versions: LangGraph alone reads those).

LangChain keeps one class private that ``create_agent`` registers on every agent it compiles:

- ``SubagentTransformer``: the stream transformer behind ``stream_events(version="v3")``'s
  ``.subagents`` projection (nested named agents). A drop-in registers what ``create_agent``
  registers, in the same order (``core/streams.py``).

``tests/core/test_compat.py`` pins each behaviour against the installed LangGraph.

Example:
    >>> durable({"configurable": {}}), resuming({"configurable": {}}), durable(None)
    (False, False, False)
    >>> checkpointer({"configurable": {}}) is None, runtime_of({"configurable": {}}) is None
    (True, True)
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from langchain.agents._subagent_transformer import SubagentTransformer
from langchain_core.caches import BaseCache
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding, RunnableConfig, RunnableWithFallbacks
from langchain_core.tracers._streaming import _V2StreamingCallbackHandler
from langgraph._internal._constants import (
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RUNTIME,
    CONFIG_KEY_SCRATCHPAD,
    INPUT,
    INTERRUPT,
)
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.graph.message import _messages_delta_reducer
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.runtime import Runtime

__all__ = ["SubagentTransformer", "checkpointer", "durable", "last_writer", "messages_delta_reducer",
           "resuming", "runtime_of", "silent", "streams", "streams_messages", "would_stream"]

messages_delta_reducer: Any = _messages_delta_reducer
"""LangGraph's batch reducer for a ``DeltaChannel`` of messages (see the module docstring)."""


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get(CONF) or {})


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


def runtime_of(config: RunnableConfig | None) -> Runtime[Any] | None:
    """The run's ``Runtime`` carried by a step's config (None outside a run)."""
    runtime = ((config or {}).get(CONF) or {}).get(CONFIG_KEY_RUNTIME)
    return runtime if isinstance(runtime, Runtime) else None


def _nothing(_: Any) -> None:
    pass


def silent(writer: Any) -> bool:
    """Is ``writer`` None, or a plain function that does nothing (its code is ``pass``)?

    Example:
        >>> def quiet(c): pass
        >>> silent(None), silent(quiet), silent(lambda c: None), silent(print)
        (True, True, True, False)
    """
    if writer is None:
        return True
    code = getattr(writer, "__code__", None)
    return (code is not None and code.co_code == _nothing.__code__.co_code
            and code.co_consts == _nothing.__code__.co_consts)


def streams_messages(config: RunnableConfig | None) -> bool:
    """Is ``stream_mode="messages"`` listening to the step this config belongs to?"""
    callbacks = (config or {}).get("callbacks")
    handlers = (callbacks.handlers if isinstance(callbacks, BaseCallbackManager)
                else callbacks if isinstance(callbacks, list) else [])
    return any(isinstance(h, StreamMessagesHandler) for h in handlers)


def would_stream(chat: BaseChatModel, handlers: Sequence[Any], kwargs: Mapping[str, Any], *,
                 async_api: bool) -> bool:
    """Would ``chat.invoke`` (``ainvoke``: ``async_api``) with the bound ``kwargs`` and these
    callback ``handlers`` stream through ``on_llm_new_token``, as ``stream()`` does?"""
    if any(isinstance(h, _V2StreamingCallbackHandler) for h in handlers):
        return False  # invoke would emit v2 protocol events, which stream() does not
    manager = SimpleNamespace(handlers=list(handlers))  # the one attribute the rule reads
    return bool(chat._should_stream(async_api=async_api, run_manager=manager, **kwargs))  # type: ignore[arg-type]


_Site = tuple[BaseChatModel, dict[str, Any], list[Any]]
_SITES: dict[int, tuple[weakref.ref[Any], _Site | None]] = {}
"""Per runnable (by id, held weakly): the chat model it streams from, the kwargs bound around
it (an outer binding's win) and the callbacks bound there; None when something other than
bindings and fallbacks wraps it. A model node asks about the same bound model every call."""


def streams(runnable: Any, config: RunnableConfig, *, async_api: bool) -> bool:
    """Would LangChain stream this call anyway (so ``stream()`` may replace ``invoke()``)?

    It looks through the bindings and fallbacks around the chat model the call streams from
    first (once per runnable: ``_SITES``), gathering the kwargs and callback handlers bound
    there (a retry, a configurable model or anything else keeps ``invoke``, and so does a
    model that reads an LLM cache).
    """
    held = _SITES.get(id(runnable))
    if held is None or held[0]() is not runnable:
        kwargs: dict[str, Any] = {}
        found: list[Any] = []
        chat: Any = runnable
        while chat is not None and not isinstance(chat, BaseChatModel):
            if isinstance(chat, RunnableWithFallbacks):
                chat = chat.runnable
            elif isinstance(chat, RunnableBinding):  # bind, bind_tools, with_config (not with_retry)
                kwargs = {**chat.kwargs, **kwargs}
                found.append(chat.config.get("callbacks"))
                chat = chat.bound
            else:
                chat = None
        if len(_SITES) > 256:
            _SITES.clear()
        held = _SITES[id(runnable)] = (weakref.ref(runnable), None if chat is None else
                                       (chat, kwargs, [*found, chat.callbacks]))
    if held[1] is None:
        return False
    chat, kwargs, bound = held[1]
    cache = chat.cache
    if cache is not False and ((cache is not None and isinstance(cache, BaseCache))
                               or get_llm_cache() is not None):
        return False
    handlers = [h for callbacks in [config.get("callbacks"), *bound]  # a list, a manager, or None
                for h in (callbacks.handlers if isinstance(callbacks, BaseCallbackManager)
                          else callbacks if isinstance(callbacks, list) else ())]
    return would_stream(chat, handlers, kwargs, async_api=async_api)


def last_writer(versions_seen: Mapping[str, Mapping[str, Any]], nodes: Collection[str]) -> str | None:
    """The node whose step (or update) wrote a checkpoint, from its ``versions_seen``, as
    LangGraph infers ``update_state``'s ``as_node`` (see the module docstring).

    Example:
        >>> last_writer({"model": {"messages": 3}, "tools": {"messages": 2}}, ["model", "tools"])
        'model'
        >>> last_writer({"model": {"m": 3}, "tools": {"m": 3}}, ["model", "tools"]) is None
        True
    """
    if not set(versions_seen) <= {*nodes, INPUT, INTERRUPT}:
        return None
    try:
        ranked = sorted((version, node) for node, seen in versions_seen.items() if node in nodes
                        for version in seen.values())
    except TypeError:  # versions of two kinds: not this saver's
        return None
    if not ranked or (len(ranked) > 1 and ranked[-1][0] == ranked[-2][0]):
        return None
    return ranked[-1][1]
