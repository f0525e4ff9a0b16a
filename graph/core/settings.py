"""Everything the builder was given, validated once: nodes read a ``LoopSettings``, the groups as
given (``settings.iterations.max``), under a run's overrides (``for_runtime``; ``core/overrides.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.runtime import Runtime
from pydantic import BaseModel, ValidationError

from langgraph_loop.core.config import Approval, Compaction, Hooks, Iterations, Limits, LoopDetection
from langgraph_loop.core.hosting import (
    NODE_HOOKS,
    can_jump_to,
    check_middleware,
    check_state_schema,
    overrides_hook,
)
from langgraph_loop.core.models import ChatRunnable, primary_chat_model, resolve_model
from langgraph_loop.core.overrides import checked_groups, context_type, explain, given, merged, run_overrides
from langgraph_loop.core.removed import KEYWORDS, removed_keyword
from langgraph_loop.core.shape import Shape
from langgraph_loop.core.structured import StructuredOutput, resolve_response_format

__all__ = ["LoopSettings", "split_provider_tools"]

Callback = Callable[..., Any]


def split_provider_tools(tools: Any) -> tuple[Any, tuple[dict[str, Any], ...]]:
    """The provider-side tool dicts of a tools list (``{"type": "web_search"}``: bound to the
    model, run by the provider, never here) apart from the tools the graph runs."""
    if isinstance(tools, BaseTool | Mapping | str | bytes) or not isinstance(tools, Iterable):
        return tools, ()
    items = list(tools)
    return ([t for t in items if not isinstance(t, Mapping)],
            tuple(dict(t) for t in items if isinstance(t, Mapping)))


def _coerce_tools(tools: Sequence[Any] | BaseTool | Callable[..., Any]) -> tuple[BaseTool, ...]:
    """A list of tools; a single tool (``BaseTool`` or function) is accepted as a list of one."""
    if isinstance(tools, BaseTool) or (callable(tools) and not isinstance(tools, Sequence)):
        tools = [tools]
    elif isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ValueError(f"tools must be a list of tools (or one tool), got "
                         f"{type(tools).__name__} {tools!r:.60}")
    out: list[BaseTool] = []
    for item in tools:
        if isinstance(item, BaseTool):
            out.append(item)
        elif callable(item):
            out.append(as_tool(item))
        else:
            raise ValueError(f"tools: {item!r} is neither a BaseTool nor a callable")
    names = [t.name for t in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"tools: duplicate tool names {dupes}")
    return tuple(out)


@dataclass(frozen=True)
class LoopSettings:
    """The validated arguments of ``create_loop_agent`` (README, "Configuration reference")."""

    model: ChatRunnable
    tools: tuple[BaseTool, ...] = ()
    provider_tools: tuple[dict[str, Any], ...] = ()
    """Provider-side tool dicts: bound with the tools, never run by the graph."""
    system_prompt: str | SystemMessage | None = None
    iterations: Iterations = field(default_factory=Iterations)
    limits: Limits = field(default_factory=Limits)
    loop_detection: LoopDetection | None = field(default_factory=LoopDetection)
    approval: Approval | None = None
    compaction: Compaction | None = None
    hooks: Hooks = field(default_factory=Hooks)
    state_schema: Any = None
    context_schema: Any = None
    handle_tool_errors: Any = None
    """``ToolNode``'s ``handle_tool_errors``; None: every tool error becomes an error result."""
    structured: StructuredOutput | None = None
    """``response_format`` resolved (``core/structured.py``)."""
    name: str | None = None
    show_notices: bool = False
    """Give notices ids chat UIs render (default: ``do-not-render-`` ids, kept out of view)."""
    middleware: tuple[AgentMiddleware[Any, Any], ...] = ()
    """The user's LangChain middleware (``nodes/hosted.py``); its tools lead ``tools``, as there."""
    _cache: dict[str, LoopSettings] = field(default_factory=dict, compare=False, repr=False)

    output_tools: frozenset[str] = field(init=False, compare=False, repr=False)
    """The structured-output tools' names (their calls are answers, not work)."""

    def __post_init__(self) -> None:
        tools = self.structured.tool_names if self.structured is not None else frozenset()
        object.__setattr__(self, "output_tools", tools)

    @classmethod
    def build(cls, model: ChatRunnable | str, tools: Sequence[Any] | BaseTool | Callback | None = (),
              **kwargs: Any) -> LoopSettings:
        """``create_loop_agent``'s keywords validated (the errors: its docstring)."""
        removed = sorted(set(kwargs) & set(KEYWORDS))
        if removed:
            raise removed_keyword(removed)
        model = resolve_model(model)
        tools, kwargs["provider_tools"] = split_provider_tools(() if tools is None else tools)
        kwargs.update(_check_types(kwargs))
        for name in ("iterations", "limits", "hooks"):  # None: the group's defaults
            kwargs[name] = kwargs.get(name) or _MODELS[name]()
        kwargs["middleware"] = check_middleware(kwargs.get("middleware") or ())
        coerced = _coerce_tools(tools)
        extra = [t for m in kwargs["middleware"] for t in getattr(m, "tools", ())]
        if extra:  # the middleware's tools, first (as create_agent orders them)
            coerced = _coerce_tools([*extra, *coerced])
        kwargs["structured"] = resolve_response_format(kwargs.pop("response_format", None), model,
                                                       [*coerced, *kwargs["provider_tools"]])
        if kwargs.get("loop_detection") is not None:  # MCP read-only hints in tool metadata
            kwargs["loop_detection"] = kwargs["loop_detection"].with_tool_hints(coerced)
        if kwargs.get("context_schema") is not None:  # the groups beside the user's fields
            kwargs["context_schema"] = context_type(kwargs["context_schema"])
        check_state_schema(kwargs.get("state_schema"), "state_schema")
        for m in kwargs["middleware"]:
            check_state_schema(m.state_schema, f"middleware {m.name}")
        settings = cls(model=model, tools=coerced, **kwargs)
        settings._check_tools_named()
        return settings

    def _check_tools_named(self) -> None:
        """Approval's and the detector's per-tool settings must name the graph's tools."""
        named: list[tuple[str, Iterable[str]]] = [
            ("approval.tools", self.approval.tools if self.approval is not None else ())]
        if self.loop_detection is not None:
            calls = self.loop_detection.calls
            named += [("loop_detection.calls.per_tool", calls.per_tool),
                      ("loop_detection.calls.arg_policies", set(calls.arg_policies) - {"*"}),
                      ("loop_detection.calls.read_only_tools", calls.read_only_tools)]
        known = {t.name for t in self.tools}
        for where, names in named:
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(f"{where}: unknown tools {unknown}; known: {sorted(known)}")

    def hooked(self, hook: str) -> tuple[AgentMiddleware[Any, Any], ...]:
        """The user's middleware that implement ``hook``, in the order given."""
        return tuple(m for m in self.middleware if overrides_hook(m, hook))

    @cached_property
    def shape(self) -> Shape:
        """The graph's shape: a node per middleware node hook, named and ordered as in
        ``create_agent`` (``"<name>.before_model"``; the ``after_*`` hooks in reverse)."""
        def names(hook: str, reverse: bool = False) -> tuple[str, ...]:
            found = [f"{m.name}.{hook}" for m in self.hooked(hook)]
            return tuple(reversed(found) if reverse else found)

        jumps = tuple((f"{m.name}.{hook}", targets) for hook in NODE_HOOKS for m in self.hooked(hook)
                      if (targets := can_jump_to(m, hook)))
        return Shape(judge=self.iterations.judge is not None, approval=self.approval is not None,
                     compaction=self.compaction is not None,
                     respond=self.structured is not None,
                     final_answer=self.limits.final_answer,
                     before_agent=names("before_agent"), before_model=names("before_model"),
                     after_model=names("after_model", reverse=True),
                     after_agent=names("after_agent", reverse=True), jumps=jumps)

    @property
    def chat_model(self) -> BaseChatModel | None:
        """The chat model the agent's model calls first (None: chosen per run)."""
        return primary_chat_model(self.model)

    @property
    def recursion_limit(self) -> int:
        """The compiled graph's recursion limit: room for every configured iteration."""
        return self.shape.recursion_limit(max_model_calls=self.iterations.max_model_calls,
                                          max_iterations=self.iterations.max)

    def for_runtime(self, runtime: Runtime[Any] | None) -> LoopSettings:
        """These settings with the running graph's overrides (its runtime context) applied; a
        resume's context holds the run's own (``run["overrides"]``, passed again by ``LoopGraph``)."""
        context = runtime.context if runtime is not None else None
        if context is None:  # no context, no overrides: the common case, every step
            return self
        return self.for_run(run_overrides(context, self.context_schema))

    def overrides(self, context: Any) -> dict[str, Any]:
        """A run's overrides, validated (``ValueError`` otherwise): what the run stores."""
        if context is None:
            return {}
        found = dict(run_overrides(context, self.context_schema) or {})
        self.for_run(found)
        return found

    def for_run(self, context: Mapping[str, Any] | None) -> LoopSettings:
        """These settings with a run's overrides applied and validated."""
        if not context:
            return self
        try:
            key: str | None = json.dumps(context, sort_keys=True)
            cached = self._cache.get(key)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # values JSON cannot hold: validate without caching
            key, cached = None, None
        if cached is not None:
            return cached
        changes: dict[str, Any] = {}
        for group, update in checked_groups(context).items():
            current = getattr(self, group)
            if current is None:
                raise ValueError(f"invalid run context: {group} is disabled for this graph "
                                 f"(given: {given(update)})")
            changes[group] = merged(group, current, update)
        resolved = replace(self, **changes, _cache={})
        if key is not None and len(self._cache) < 64:
            self._cache[key] = resolved
        return resolved


def _as_model(name: str, value: Any, model: type[BaseModel]) -> BaseModel | None:
    """``value`` as a ``model`` (a dict of its fields validated into one), else ``ValueError``."""
    if value is None or isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        article = "an" if model.__name__[0] in "AEIOU" else "a"
        raise ValueError(f"{name}: expected {article} {model.__name__} (or a dict of its fields), "
                         f"got {type(value).__name__}")
    try:
        return model(**value)
    except ValidationError as exc:
        raise ValueError(f"{name}: {explain(exc)}") from exc


_MODELS: dict[str, type[BaseModel]] = {
    "iterations": Iterations, "limits": Limits, "loop_detection": LoopDetection,
    "approval": Approval, "compaction": Compaction, "hooks": Hooks,
}


def _check_types(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration objects (a dict of fields validated into one); the plain arguments' types."""
    out: dict[str, Any] = {}
    for name, model in _MODELS.items():
        value = _as_model(name, kwargs.get(name), model)
        if value is not None:
            out[name] = value
    prompt = kwargs.get("system_prompt")
    if prompt is not None and not isinstance(prompt, str | SystemMessage):
        raise ValueError(f"system_prompt must be a str, a SystemMessage or None, got {type(prompt).__name__}")
    if not isinstance(kwargs.get("show_notices", False), bool):
        raise ValueError(f"show_notices must be True or False, got {kwargs['show_notices']!r}")
    agent_name = kwargs.get("name")
    if agent_name is not None and not isinstance(agent_name, str):
        raise ValueError(f"name must be a str or None, got {type(agent_name).__name__}")
    return out
