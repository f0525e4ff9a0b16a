"""Deterministic scripted chat model and the ``echo`` tool shared by every benchmark.

The model is stateless: it decides its next reply from the messages it is given.
The step number is read from the most recent ``ToolMessage`` (tool call ids are
``call_<step>_<index>``), so one call only looks at the tail of the transcript.
It formats tools like a real provider in :meth:`ScriptedChatModel.bind_tools`,
reports deterministic ``usage_metadata`` on every ``AIMessage`` and records a
timestamp per call into :class:`CallLog` (instrumentation only, never read back).

Like a real provider it cannot call a tool it was not given: with no tools bound
(or ``tool_choice="none"``) it answers with text.

Example:
    >>> model = EchoModel(n_rounds=2)
    >>> tool = make_echo()
    >>> bound = model.bind_tools([tool])
    >>> from langchain_core.messages import HumanMessage
    >>> msgs = [HumanMessage("go")]
    >>> while (ai := bound.invoke(msgs)).tool_calls:
    ...     msgs += [ai, *(tool.invoke(tc) for tc in ai.tool_calls)]
    >>> ai.content, model.log.kinds
    ('Done after 2 rounds.', ['tool_calls', 'tool_calls', 'answer'])
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
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

ToolCallSpec = tuple[str, dict[str, Any]]
Reply = str | list[ToolCallSpec]
"""A scripted reply: answer text, or a list of ``(tool_name, args)`` calls."""


@dataclass
class CallLog:
    """What the model observed, one entry per model call (instrumentation only)."""

    timestamps: list[float] = field(default_factory=list)
    input_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    """Per call: ``tool_calls``, ``answer`` (the script's own answer), ``forced`` (no tools
    bound, so it had to answer) or ``gave_up`` (``max_steps`` reached)."""

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
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    chars = len(text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            chars += len(call["name"]) + len(json.dumps(call["args"], sort_keys=True))
    return 4 + chars // 4


def _is_turn_start(messages: Sequence[BaseMessage], index: int) -> bool:
    """True when ``messages[index]`` is a user turn, not an injected notice.

    Notices (loop warnings) are tagged with a ``name`` or follow a ToolMessage.
    """
    message = messages[index]
    if message.name:
        return False
    return index == 0 or not isinstance(messages[index - 1], ToolMessage)


def read_tail(messages: Sequence[BaseMessage]) -> tuple[int, str | None]:
    """Return ``(step, last tool result)`` of the current turn, reading only the tail."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolMessage):
            match = _CALL_ID.match(message.tool_call_id)
            if match:
                return int(match.group(1)) + 1, str(message.content)
        elif isinstance(message, HumanMessage) and _is_turn_start(messages, index):
            return 0, None
    return 0, None


def input_tokens(messages: Sequence[BaseMessage], *, exact: bool = False) -> int:
    """Context size of a request.

    By default it is computed incrementally from the previous reply's usage (O(tail)); that
    over-counts a transient message that was in the previous request only. ``exact`` sums
    every message (O(N)).
    """
    if exact:
        return sum(message_tokens(m) for m in messages)
    total = 0
    for message in reversed(messages):
        usage = getattr(message, "usage_metadata", None)
        if (
            isinstance(message, AIMessage)
            and usage
            and message.response_metadata.get("model_name") == MODEL_NAME
        ):
            return total + usage["input_tokens"] + usage["output_tokens"]
        total += message_tokens(message)
    return total


class ScriptedChatModel(BaseChatModel):
    """Base class: subclasses implement :meth:`script`.

    ``max_steps`` is a safety net: from that step on the model gives up and answers.
    ``exact_tokens`` counts input tokens over the whole request instead of incrementally.
    """

    max_steps: int = 1_000
    exact_tokens: bool = False
    log: CallLog = Field(default_factory=CallLog)

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def script(self, step: int, last_result: str | None) -> Reply:
        """Return the reply for ``step`` (0-based) given the latest tool result."""
        raise NotImplementedError

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Format tools as OpenAI tool schemas and bind them, like a real provider."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _reply(self, messages: Sequence[BaseMessage], tools_bound: bool) -> tuple[Reply, str, int]:
        """Return ``(reply, kind, step)`` for this request."""
        step, last_result = read_tail(messages)
        if not tools_bound:
            return FORCED_ANSWER, "forced", step
        if step >= self.max_steps:
            return f"Giving up after {step} tool rounds.", "gave_up", step
        reply = self.script(step, last_result)
        return reply, ("answer" if isinstance(reply, str) else "tool_calls"), step

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Produce the scripted reply with usage metadata and log the call."""
        self.log.timestamps.append(time.perf_counter())
        tools_bound = bool(kwargs.get("tools")) and kwargs.get("tool_choice") != "none"
        reply, kind, step = self._reply(messages, tools_bound)
        if isinstance(reply, str):
            message = AIMessage(content=reply)
        else:
            calls = [
                {"name": name, "args": args, "id": f"call_{step}_{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(reply)
            ]
            message = AIMessage(content="", tool_calls=calls)
        n_in = input_tokens(messages, exact=self.exact_tokens)
        n_out = message_tokens(message)
        message.usage_metadata = {
            "input_tokens": n_in,
            "output_tokens": n_out,
            "total_tokens": n_in + n_out,
        }
        message.response_metadata = {
            "model_name": MODEL_NAME,
            "finish_reason": "stop" if isinstance(reply, str) else "tool_calls",
        }
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
