"""``response_format`` as ``create_agent`` takes it, resolved once per graph with LangChain's own
strategies: ``ToolStrategy``, ``ProviderStrategy``, or a bare schema (``AutoStrategy``): the
provider's native structured output when the model's profile has it, else ``ToolStrategy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.structured_output import AutoStrategy, OutputToolBinding, ProviderStrategy, ToolStrategy
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from typing_extensions import TypedDict

__all__ = ["StructuredOutput", "StructuredReply", "as_structured", "resolve_response_format",
           "supports_native_output"]


@dataclass(frozen=True)
class StructuredOutput:
    """The resolved ``response_format``: the strategy and, for ``ToolStrategy``, one output
    tool per schema (name -> LangChain's ``OutputToolBinding``, which parses the call)."""

    strategy: ToolStrategy[Any] | ProviderStrategy[Any]
    bindings: Mapping[str, OutputToolBinding[Any]] = field(default_factory=dict)

    @property
    def native(self) -> bool:
        """The provider's native structured output (the reply's text is the answer)."""
        return isinstance(self.strategy, ProviderStrategy)

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of the output tools (none for ``ProviderStrategy``)."""
        return frozenset(self.bindings)

    @property
    def tools(self) -> list[BaseTool]:
        """The output tools to bind with the agent's tools."""
        return [binding.tool for binding in self.bindings.values()]

    @property
    def forced_choice(self) -> str:
        """The ``tool_choice`` that makes the model answer with an output tool (``"any"`` of several)."""
        names = sorted(self.bindings)
        return names[0] if len(names) == 1 else "any"


def supports_native_output(model: Any, tools: Sequence[Any]) -> bool:
    """Does the model's profile say it has native structured output (with these tools)? Only a
    bare chat model is asked, as under ``create_agent``; Gemini before 3 cannot combine it with tools."""
    if not isinstance(model, BaseChatModel):
        return False
    profile = model.profile or {}
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or "").lower()
    old_gemini = "gemini" in name and "gemini-3" not in name
    return bool(profile.get("structured_output")) and not (tools and old_gemini)


def resolve_response_format(response_format: Any, model: Any,
                            tools: Sequence[Any]) -> StructuredOutput | None:
    """The strategy for ``response_format`` (None: no structured output); a ``ValueError`` for
    an unsupported schema type or an output tool named as one of the agent's tools."""
    if response_format is None:
        return None
    strategy = response_format
    if not isinstance(strategy, ToolStrategy | ProviderStrategy):
        schema = strategy.schema if isinstance(strategy, AutoStrategy) else strategy
        try:
            native = supports_native_output(model, tools)
            strategy = ProviderStrategy(schema) if native else ToolStrategy(schema)
        except ValueError as exc:
            raise ValueError(f"response_format: {exc}") from exc
    if isinstance(strategy, ProviderStrategy):
        return StructuredOutput(strategy)
    bindings = {spec.name: OutputToolBinding.from_schema_spec(spec) for spec in strategy.schema_specs}
    taken = sorted(set(bindings) & {getattr(t, "name", None) for t in tools})
    if taken:
        raise ValueError(f"response_format: the output tools {taken} have the names of the agent's tools")
    return StructuredOutput(strategy, bindings)


class StructuredReply(TypedDict):
    """What ``with_structured_output(..., include_raw=True)`` returns."""

    raw: AIMessage
    parsed: Any
    parsing_error: BaseException | None


def as_structured(result: Any, what: str) -> StructuredReply:
    """The result of a structured-output runnable with ``include_raw=True``."""
    if not isinstance(result, dict) or not isinstance(result.get("raw"), AIMessage):
        raise TypeError(f"{what} returned {type(result).__name__}, expected "
                        "{'raw': AIMessage, 'parsed': ..., 'parsing_error': ...}")
    return {"raw": result["raw"], "parsed": result.get("parsed"),
            "parsing_error": result.get("parsing_error")}
