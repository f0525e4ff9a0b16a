"""A scripted chat model, the demo model and the test driver: it replays a script, binds tools like
a real provider, streams token chunks, reports deterministic usage, and records every request.

Script items: a ``str`` (text answer), an ``AIMessage``, a list of ``(name, args)`` pairs
(parallel tool calls), an ``Exception`` (raised), or a callable ``(messages) -> item``. After the
script, ``default`` (none: ``ScriptExhaustedError``); ``no_tools_reply`` answers a request that
lets the model call no tool (the final-answer call) without using the script.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> m = ScriptedChatModel(script=[[("search", {"q": "x"})], "done"])
    >>> m.invoke([HumanMessage("go")]).tool_calls[0]["name"]
    'search'
    >>> m.invoke([HumanMessage("go")]).content
    'done'
    >>> len(m.requests)
    2
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

__all__ = ["ScriptExhaustedError", "ScriptedChatModel"]

_IDS = itertools.count(1)


class ScriptExhaustedError(RuntimeError):
    """The scripted model was called more often than its script allows."""


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model driven by a script (see module docstring)."""

    script: list[Any] = Field(default_factory=list)
    default: Any = None
    no_tools_reply: Any = None
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    request_tools: list[list[str]] = Field(default_factory=list)
    """Per request, the tools the model may call under its ``tool_choice``."""
    request_defined_tools: list[list[str]] = Field(default_factory=list)
    """Per request, every tool defined (provider-side tool dicts by their ``name`` or ``type``)."""
    request_tool_choice: list[Any] = Field(default_factory=list)
    report_usage: bool = True
    max_tokens: int | None = None
    """Output cap, as a provider's ``max_tokens`` (also per call: ``bind(max_tokens=N)``): caps
    the reported output tokens and cuts the text."""
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools in the OpenAI format, as providers do (provider-side tool dicts as they are)."""
        formatted = [t if _provider_side(t) else convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    @property
    def calls(self) -> int:
        """How many requests were made."""
        return len(self.requests)

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        defined = [_tool_name(t) for t in kwargs.get("tools") or []]
        tools = _usable_tools(defined, kwargs.get("tool_choice"))
        with self._lock:
            self.requests.append(list(messages))
            self.request_tools.append(tools)
            self.request_defined_tools.append(defined)
            self.request_tool_choice.append(kwargs.get("tool_choice"))
            if not tools and self.no_tools_reply is not None:
                item = self.no_tools_reply
            elif self._position < len(self.script):
                item = self.script[self._position]
                self._position += 1
            elif self.default is not None:
                item = self.default
            else:
                raise ScriptExhaustedError(f"scripted model: script of {len(self.script)} replies exhausted")
        return self._to_message(item, messages, kwargs.get("max_tokens", self.max_tokens))

    def _to_message(self, item: Any, messages: list[BaseMessage], max_tokens: int | None = None) -> AIMessage:
        while callable(item) and not isinstance(item, BaseMessage):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            message = AIMessage(content=item)
        elif isinstance(item, AIMessage):
            message = item.model_copy()
        elif isinstance(item, list):
            calls = [{"name": name, "args": args, "id": f"call_{next(_IDS)}", "type": "tool_call"}
                     for name, args in item]
            message = AIMessage(content="", tool_calls=calls)
        else:
            raise TypeError(f"scripted model: unsupported script item {item!r}")
        if self.report_usage and message.usage_metadata is None:
            text = message.content if isinstance(message.content, str) else str(message.content)
            inp = 10 * len(messages) + sum(len(str(m.content)) for m in messages) // 4
            out = 5 + len(text) // 4 + 10 * len(message.tool_calls)
            if max_tokens is not None and out > max_tokens:  # cut, as a provider would
                out = max_tokens
                message.content = text[: max(0, max_tokens - 5) * 4]
            message.usage_metadata = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
        return message

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages, kwargs))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message = self._next(messages, kwargs)
        for chunk in _chunks(message):
            if run_manager and isinstance(chunk.content, str) and chunk.content:
                run_manager.on_llm_new_token(chunk.content, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


def _chunks(message: AIMessage) -> Iterator[AIMessageChunk]:
    """Split a message into word chunks, then its tool calls, then usage."""
    text = message.content if isinstance(message.content, str) else ""
    words = text.split(" ") if text else []
    for i, word in enumerate(words):
        yield AIMessageChunk(content=word if i == 0 else " " + word, id=message.id)
    calls = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
             for i, c in enumerate(message.tool_calls)]
    yield AIMessageChunk(content="" if words else message.content, tool_call_chunks=calls,
                         usage_metadata=message.usage_metadata, id=message.id, chunk_position="last")


def _provider_side(tool: Any) -> bool:
    """A provider-side tool dict (its ``type`` is not ``function``)."""
    return isinstance(tool, dict) and tool.get("type") not in (None, "function")


def _tool_name(spec: dict[str, Any]) -> str:
    """A bound tool's name (a provider-side tool's ``name``, else its ``type``)."""
    if spec.get("type") == "function":
        return str(spec["function"]["name"])
    return str(spec.get("name") or spec.get("type"))


def _usable_tools(defined: list[str], tool_choice: Any) -> list[str]:
    """The tools a request lets the model call under ``tool_choice``."""
    if tool_choice == "none":
        return []
    if isinstance(tool_choice, str) and tool_choice in defined:
        return [tool_choice]
    return defined


def repeat(item: Any) -> Callable[[list[BaseMessage]], Any]:
    """A ``default`` that answers the same way forever (for runaway-model scenarios)."""
    return lambda _messages: item
