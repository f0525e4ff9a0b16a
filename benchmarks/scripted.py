"""The deterministic scripted chat model and the ``echo`` tool of the benchmarks.

The model is stateless: it reads its step from the newest ``ToolMessage`` (call ids are
``call_<step>_<index>``), so a call looks only at the tail of the transcript. It formats tools like
a real provider in ``bind_tools``, answers with text when no tool is bound (or
``tool_choice="none"``), reports ``usage_metadata`` (about 4 characters per token) and logs a
timestamp and the kind of every reply (instrumentation only, never read back).

Example:
    >>> model, tool = EchoModel(n_rounds=2), make_echo()
    >>> bound = model.bind_tools([tool])
    >>> from langchain_core.messages import HumanMessage
    >>> msgs = [HumanMessage("go")]
    >>> while (ai := bound.invoke(msgs)).tool_calls:
    ...     msgs += [ai, *(tool.invoke(tc) for tc in ai.tool_calls)]
    >>> ai.content, model.log.kinds, ai.usage_metadata["input_tokens"]
    ('Done after 2 rounds.', ['tool_calls', 'tool_calls', 'answer'], 32)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

__all__ = ["CallLog", "EchoModel", "Reply", "ScriptedChatModel", "ToolCounter", "echo_text", "make_echo"]

MODEL_NAME = "scripted"
FORCED_ANSWER = "Final answer (no tools available): summarising what was collected so far."
_CALL_ID = re.compile(r"^call_(\d+)_\d+$")
Reply = str | list[tuple[str, dict[str, Any]]]
"""A scripted reply: answer text, or a list of ``(tool_name, args)`` calls."""


@dataclass
class CallLog:
    """Per model call: its time, tokens and kind (``tool_calls``, ``answer``, ``forced``: no tools
    bound, ``gave_up``: ``max_steps`` reached)."""

    timestamps: list[float] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Number of model calls made."""
        return len(self.kinds)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens over every call."""
        return sum(self.input_tokens) + sum(self.output_tokens)


@dataclass
class ToolCounter:
    """Counts tool executions (shared by the tools of one run)."""

    count: int = 0


def message_tokens(message: BaseMessage) -> int:
    """Deterministic token estimate of one message (about 4 characters per token)."""
    content = message.content
    chars = len(content if isinstance(content, str) else json.dumps(content, default=str))
    if isinstance(message, AIMessage):
        chars += sum(len(c["name"]) + len(json.dumps(c["args"], sort_keys=True)) for c in message.tool_calls)
    return 4 + chars // 4


def read_tail(messages: Sequence[BaseMessage]) -> tuple[int, str | None]:
    """``(step, last tool result)`` of the current turn, reading only the tail (a user turn is a
    ``HumanMessage`` without a name that does not follow a tool result: not an injected notice)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolMessage) and (match := _CALL_ID.match(message.tool_call_id)):
            return int(match.group(1)) + 1, str(message.content)
        if isinstance(message, HumanMessage) and not message.name and (
                index == 0 or not isinstance(messages[index - 1], ToolMessage)):
            return 0, None
    return 0, None


def input_tokens(messages: Sequence[BaseMessage], *, exact: bool = False) -> int:
    """Context size of a request: from the previous reply's usage plus what came after it (O(tail);
    it over-counts a message that was in the previous request only), or, ``exact``, every message."""
    if exact:
        return sum(message_tokens(m) for m in messages)
    total = 0
    for message in reversed(messages):
        usage = getattr(message, "usage_metadata", None)
        ours = isinstance(message, AIMessage) and message.response_metadata.get("model_name") == MODEL_NAME
        if ours and usage:
            return total + usage["input_tokens"] + usage["output_tokens"]
        total += message_tokens(message)
    return total


class ScriptedChatModel(BaseChatModel):
    """Base class: subclasses implement :meth:`script`. From ``max_steps`` on the model gives up
    and answers; ``exact_tokens`` counts input tokens over the whole request."""

    max_steps: int = 1_000
    exact_tokens: bool = False
    log: CallLog = Field(default_factory=CallLog)

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def script(self, step: int, last_result: str | None) -> Reply:
        """The reply for ``step`` (0-based) given the latest tool result."""
        raise NotImplementedError

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Format tools as OpenAI tool schemas and bind them, like a real provider."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        """Produce the scripted reply with usage metadata and log the call."""
        self.log.timestamps.append(time.perf_counter())
        step, last_result = read_tail(messages)
        reply: Reply
        if not kwargs.get("tools") or kwargs.get("tool_choice") == "none":
            reply, kind = FORCED_ANSWER, "forced"
        elif step >= self.max_steps:
            reply, kind = f"Giving up after {step} tool rounds.", "gave_up"
        else:
            reply = self.script(step, last_result)
            kind = "answer" if isinstance(reply, str) else "tool_calls"
        message = AIMessage(content=reply) if isinstance(reply, str) else AIMessage(content="", tool_calls=[
            {"name": name, "args": args, "id": f"call_{step}_{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(reply)])
        n_in, n_out = input_tokens(messages, exact=self.exact_tokens), message_tokens(message)
        message.usage_metadata = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        message.response_metadata = {"model_name": MODEL_NAME,
                                     "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}
        self.log.input_tokens.append(n_in)
        self.log.output_tokens.append(n_out)
        self.log.kinds.append(kind)
        return ChatResult(generations=[ChatGeneration(message=message)])


class EchoModel(ScriptedChatModel):
    """Calls ``echo(x)`` once per model call for ``n_rounds`` rounds, then answers."""

    n_rounds: int

    def script(self, step: int, last_result: str | None) -> Reply:
        """Echo ``round <step>`` until ``n_rounds`` results are in."""
        if step < self.n_rounds:
            return [("echo", {"x": f"round {step}"})]
        return f"Done after {self.n_rounds} rounds."


def echo_text(x: str, payload_bytes: int = 0) -> str:
    """What ``echo(x)`` returns: ``x``, padded to ``payload_bytes``."""
    return x if payload_bytes <= len(x) else x + " " + "x" * (payload_bytes - len(x) - 1)


def make_echo(payload_bytes: int = 0, counter: ToolCounter | None = None) -> BaseTool:
    """Build the ``echo`` tool; with ``payload_bytes`` its output is padded to that size."""
    tally = counter if counter is not None else ToolCounter()

    @tool("echo")
    def echo(x: str) -> str:
        """Echo the text ``x`` back."""
        tally.count += 1
        return echo_text(x, payload_bytes)

    return echo
