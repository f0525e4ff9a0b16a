"""The ``respond`` node: read the structured answer ``response_format`` asks for.

As under ``create_agent`` (docs/architecture.md, "The graph"), parsed with LangChain's
bindings. ``ToolStrategy``: a call that does not parse, or several in one reply, get the text
``handle_errors`` gives and the model is asked again (an error it does not cover is raised).
``ProviderStrategy``: text that does not parse raises ``StructuredOutputValidationError``.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.structured_output import (
    MultipleStructuredOutputsError,
    ProviderStrategy,
    ProviderStrategyBinding,
    StructuredOutputError,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, ToolMessage

from langgraph_loop.core import prompts
from langgraph_loop.core.messages import is_cut
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.structured import StructuredOutput

__all__ = ["RespondNode", "read_native_answer", "read_tool_answer", "retry_text", "structured_due"]


def structured_due(state: LoopState, structured: StructuredOutput | None) -> bool:
    """Does the newest message carry the structured answer (an output-tool call, or with
    ``ProviderStrategy`` a reply without tool calls)?"""
    messages = state.get("messages") or []
    ai = messages[-1] if messages else None
    if structured is None or not isinstance(ai, AIMessage) or is_cut(ai):
        return False  # a reply cut while it streamed is no answer
    if structured.native:
        return not ai.tool_calls and not ai.invalid_tool_calls
    return any(call["name"] in structured.tool_names for call in ai.tool_calls)


def retry_text(error: StructuredOutputError, handle_errors: Any) -> str | None:
    """What answers a failed output call, per ``handle_errors`` (None: it is raised)."""
    if handle_errors is False:
        return None
    if handle_errors is True:
        return prompts.STRUCTURED_ERROR.format(error=error)
    if isinstance(handle_errors, str):
        return handle_errors
    if isinstance(handle_errors, type | tuple):
        handled = isinstance(error, handle_errors)
        return prompts.STRUCTURED_ERROR.format(error=error) if handled else None
    return str(handle_errors(error))


def read_tool_answer(ai: AIMessage, structured: StructuredOutput) -> tuple[list[ToolMessage], Any]:
    """The answers to the reply's output calls and the parsed response (None: asked again)."""
    strategy = structured.strategy
    assert isinstance(strategy, ToolStrategy)
    calls = [c for c in ai.tool_calls if c["name"] in structured.tool_names]
    error: StructuredOutputError
    if len(calls) > 1:
        error = MultipleStructuredOutputsError([c["name"] for c in calls], ai)
        text = retry_text(error, strategy.handle_errors)
        if text is None:
            raise error
        return [ToolMessage(text, tool_call_id=c["id"], name=c["name"]) for c in calls], None
    [call] = calls
    try:
        response = structured.bindings[call["name"]].parse(call["args"])
    except Exception as exc:  # any parse failure goes to handle_errors
        error = StructuredOutputValidationError(call["name"], exc, ai)
        text = retry_text(error, strategy.handle_errors)
        if text is None:
            raise error from exc
        return [ToolMessage(text, tool_call_id=call["id"], name=call["name"])], None
    content = strategy.tool_message_content or prompts.STRUCTURED_RETURNED.format(response=response)
    return [ToolMessage(content, tool_call_id=call["id"], name=call["name"])], response


def read_native_answer(ai: AIMessage, structured: StructuredOutput) -> Any:
    """The reply's text parsed with the ``ProviderStrategy`` schema."""
    strategy = structured.strategy
    assert isinstance(strategy, ProviderStrategy)
    try:
        return ProviderStrategyBinding.from_schema_spec(strategy.schema_spec).parse(ai)
    except Exception as exc:
        name = getattr(strategy.schema_spec.schema, "__name__", "response_format")
        raise StructuredOutputValidationError(name, exc, ai) from exc


class RespondNode:
    """Read the structured answer of the newest reply (see module docstring)."""

    name = "respond"

    def __init__(self, settings: LoopSettings) -> None:
        if settings.structured is None:
            raise ValueError("respond: the graph has no response_format")
        self.structured = settings.structured

    def __call__(self, state: LoopState) -> dict[str, Any]:
        """The update: ``structured_response`` and, for ``ToolStrategy``, the answers."""
        ai = (state.get("messages") or [])[-1]
        assert isinstance(ai, AIMessage)
        if self.structured.native:
            return {"structured_response": read_native_answer(ai, self.structured)}
        answers, response = read_tool_answer(ai, self.structured)
        return {"messages": answers, "structured_response": response}
