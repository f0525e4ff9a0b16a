"""Everything the builder was given, validated once, plus per-run overrides.

Nodes read a ``LoopSettings``; ``settings.for_run(runtime.context)`` applies the
numeric overrides a caller passed as LangGraph runtime context.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> s = LoopSettings.build(ScriptedChatModel(script=[]))
    >>> s.for_run({"max_iterations": 3, "max_tool_calls": 7}).limits.max_tool_calls
    7
    >>> try:
    ...     s.for_run({"max_tool_calls": 0})
    ... except ValueError as exc:
    ...     print("max_tool_calls" in str(exc))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, get_type_hints

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from langgraph_loop.core.config import (
    Approval,
    BudgetPressure,
    Compaction,
    Hooks,
    Judge,
    Limits,
    LoopDetection,
    StallDetection,
)
from langgraph_loop.core.models import ChatRunnable, primary_chat_model, resolve_model
from langgraph_loop.core.shape import Shape
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.core.structured import StructuredOutput, resolve_response_format

__all__ = ["LOOP_KEYS", "OVERRIDES", "LoopSettings", "RunOverrides", "run_overrides",
           "split_provider_tools"]

Callback = Callable[..., Any]


OVERRIDES: tuple[str, ...] = tuple(LoopContext.__annotations__)
"""The names a run may override through ``context=`` (declared once, in ``LoopContext``)."""

_CONTEXT_HINTS = get_type_hints(LoopContext, include_extras=True)
_FIELDS: dict[str, Any] = {name: (_CONTEXT_HINTS[name] | None, None) for name in OVERRIDES}

RunOverrides = create_model(
    "RunOverrides",
    __config__=ConfigDict(extra="forbid", frozen=True, strict=True),
    __doc__="""The validated ``context=`` of a run (fields and bounds from ``LoopContext``).

    Strict: ``True`` is not a count and ``"3"`` is not a number (a deployed graph gets
    JSON numbers). Each group is then re-validated with its config model, so the
    combination rules (e.g. ``stop_after > warn_after``) hold per run too.
    """,
    **_FIELDS,
)

LOOP_KEYS = frozenset(LoopState.__annotations__) - {"messages", "todos", "mode"}
"""State keys the loop owns: a tool's ``Command`` cannot write them."""


def _check_state_schema(schema: Any) -> None:
    """A user ``state_schema`` must declare every ``LoopState`` key (extend it)."""
    if schema is None:
        return
    keys = set(getattr(schema, "__annotations__", {}))
    for base in getattr(schema, "__mro__", ()):
        keys |= set(getattr(base, "__annotations__", {}))
    missing = sorted(set(LoopState.__annotations__) - keys)
    if missing:
        raise ValueError(f"state_schema must extend LoopState (class MyState(LoopState): ...); "
                         f"it lacks {missing[:5]}")


def _declared(schema: Any) -> set[str]:
    """The field names a user context type declares (TypedDict, dataclass or pydantic)."""
    fields = getattr(schema, "model_fields", None) or getattr(schema, "__dataclass_fields__", None)
    return set(fields or getattr(schema, "__annotations__", {}))


def run_overrides(context: Any, schema: Any = None) -> Mapping[str, Any] | None:
    """The per-run overrides a run's ``context=`` carries (None: none); the one place they
    are read from a context.

    Without a user ``context_schema`` the context holds overrides only: any ``Mapping``
    (an unknown key is an error when validated); anything else is a ``ValueError``. With
    one, the context is the user's: the override names (``LoopContext``) may sit beside its
    fields (mapping keys or attributes), and a mapping key that is neither is an error.

    Example:
        >>> from types import MappingProxyType
        >>> dict(run_overrides(MappingProxyType({"max_tool_calls": 2})))
        {'max_tool_calls': 2}
        >>> try:
        ...     run_overrides("max_tool_calls=2")
        ... except ValueError as exc:
        ...     print(str(exc)[:48])
        context: expected a mapping of per-run overrides
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Ctx:
        ...     user_id: str
        >>> run_overrides(Ctx("u"), Ctx), run_overrides({"user_id": "u", "max_tool_calls": 1}, Ctx)
        (None, {'max_tool_calls': 1})
    """
    if context is None:
        return None
    if schema is None:
        if isinstance(context, Mapping):
            return context
        raise ValueError(f"context: expected a mapping of per-run overrides (a dict with any of "
                         f"{', '.join(OVERRIDES)}), got {type(context).__name__} {context!r:.60}")
    if isinstance(context, Mapping):
        unknown = sorted(k for k in context if k not in OVERRIDES and k not in _declared(schema))
        if unknown:
            raise ValueError(f"invalid run context: unknown keys {unknown} (neither fields of "
                             f"{getattr(schema, '__name__', schema)} nor per-run overrides)")
        found = {k: context[k] for k in OVERRIDES if k in context}
    else:
        found = {k: getattr(context, k) for k in OVERRIDES if getattr(context, k, None) is not None}
    return found or None


_GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(name for name in OVERRIDES if name in model.model_fields)
    for group, model in (("limits", Limits), ("loop_detection", LoopDetection),
                         ("stall_detection", StallDetection), ("budget_pressure", BudgetPressure))
}
"""Which configuration model each override belongs to (``max_iterations`` is top level)."""


def split_provider_tools(tools: Any) -> tuple[Any, tuple[dict[str, Any], ...]]:
    """The provider-side tool dicts of a tools list (``{"type": "web_search"}``: bound to the
    model, run by the provider, never here) apart from the tools the graph runs.

    Example:
        >>> split_provider_tools([len, {"type": "web_search"}])
        ([<built-in function len>], ({'type': 'web_search'},))
    """
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
    """The validated configuration of one compiled loop graph."""

    model: ChatRunnable
    tools: tuple[BaseTool, ...] = ()
    provider_tools: tuple[dict[str, Any], ...] = ()
    """Provider-side tool dicts: bound with the tools, never run by the graph."""
    system_prompt: str | SystemMessage | None = None
    max_iterations: int | None = 10
    should_continue: Callback | None = None
    judge: Judge | None = None
    next_message: Callback | None = None
    record_feedback: Callback | None = None
    inject_progress: bool = True
    fresh_context: bool = False
    prompt_factory: Callback | None = None
    limits: Limits = field(default_factory=Limits)
    loop_detection: LoopDetection | None = field(default_factory=LoopDetection)
    stall_detection: StallDetection | None = None
    budget_pressure: BudgetPressure | None = None
    tool_filter: Callback | None = None
    approval: Approval | None = None
    compaction: Compaction | None = None
    hooks: Hooks = field(default_factory=Hooks)
    response_format: Any = None
    state_schema: Any = None
    """The user's state (a TypedDict extending ``LoopState``), or None."""
    context_schema: Any = None
    """The user's runtime context type, or None (the context then holds overrides only)."""
    handle_tool_errors: Any = None
    """``ToolNode``'s ``handle_tool_errors``; None: every tool error becomes an error result."""
    structured: StructuredOutput | None = None
    """``response_format`` resolved (``core/structured.py``)."""
    name: str | None = None
    """The agent's name, set on every reply of its model (as ``create_agent`` does)."""
    _cache: dict[tuple[Any, ...], LoopSettings] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def build(cls, model: ChatRunnable | str, tools: Sequence[Any] | BaseTool | Callback = (),
              **kwargs: Any) -> LoopSettings:
        """Validate the builder's arguments (``ValueError`` naming the argument)."""
        model = resolve_model(model)
        tools, kwargs["provider_tools"] = split_provider_tools(tools)
        max_iterations = kwargs.get("max_iterations", 10)
        if max_iterations is not None and (
            not isinstance(max_iterations, int) or isinstance(max_iterations, bool)
            or max_iterations < 1
        ):
            raise ValueError(f"max_iterations must be an int >= 1 or None, got {max_iterations!r}")
        kwargs["limits"] = kwargs.get("limits") or Limits()
        kwargs["hooks"] = kwargs.get("hooks") or Hooks()
        kwargs.update(_check_types(kwargs))
        for name in ("should_continue", "next_message", "record_feedback", "prompt_factory",
                     "tool_filter"):
            if kwargs.get(name) is not None and not callable(kwargs[name]):
                raise ValueError(f"{name} must be callable")
        coerced = _coerce_tools(tools)
        kwargs["structured"] = resolve_response_format(kwargs.get("response_format"), model,
                                                       [*coerced, *kwargs["provider_tools"]])
        if kwargs.get("loop_detection") is not None:  # MCP read-only hints in tool metadata
            kwargs["loop_detection"] = kwargs["loop_detection"].with_tool_hints(coerced)
        _check_state_schema(kwargs.get("state_schema"))
        settings = cls(model=model, tools=coerced, **kwargs)
        settings._check_approval()
        return settings

    def _check_approval(self) -> None:
        if self.approval is None:
            return
        known = {t.name for t in self.tools}
        unknown = sorted(set(self.approval.tools) - known)
        if unknown:
            raise ValueError(f"approval.tools: unknown tools {unknown}; known: {sorted(known)}")

    @cached_property
    def shape(self) -> Shape:
        """The graph's shape for these settings (``core/shape.py``)."""
        return Shape(judge=self.judge is not None, approval=self.approval is not None,
                     compaction=self.compaction is not None,
                     respond=self.structured is not None,
                     final_answer=self.limits.final_answer)

    @property
    def chat_model(self) -> BaseChatModel | None:
        """The chat model the agent's model calls first (None: chosen per run)."""
        return primary_chat_model(self.model)

    @property
    def output_tools(self) -> frozenset[str]:
        """The structured-output tools' names (their calls are answers, not work)."""
        return self.structured.tool_names if self.structured is not None else frozenset()

    @property
    def recursion_limit(self) -> int:
        """The compiled graph's recursion limit: room for every configured iteration."""
        return self.shape.recursion_limit(max_model_calls=self.limits.max_model_calls,
                                          max_iterations=self.max_iterations)

    def for_runtime(self, runtime: Runtime[Any] | None) -> LoopSettings:
        """These settings with the running graph's overrides (its runtime context) applied.

        On a resume the context holds the overrides the run started with: ``prepare`` stores
        them in ``run["overrides"]`` and ``LoopGraph`` passes them again.
        """
        context = runtime.context if runtime is not None else None
        return self.for_run(run_overrides(context, self.context_schema))

    def overrides(self, context: Any) -> dict[str, Any]:
        """A run's overrides, validated (``ValueError`` otherwise): what the run stores."""
        given = dict(run_overrides(context, self.context_schema) or {})
        self.for_run(given)
        return given

    def for_run(self, context: Mapping[str, Any] | None) -> LoopSettings:
        """These settings with a run's overrides applied and validated."""
        if not context:
            return self
        try:
            key: tuple[Any, ...] | None = tuple(sorted(context.items()))
            cached = self._cache.get(key)  # type: ignore[arg-type]
        except TypeError:  # unhashable or unsortable values: validate without caching
            key, cached = None, None
        if cached is not None:
            return cached
        resolved = self._apply(dict(context))
        if key is not None and len(self._cache) < 64:
            self._cache[key] = resolved
        return resolved

    def _apply(self, context: dict[str, Any]) -> LoopSettings:
        try:
            overrides = RunOverrides(**context)
        except ValidationError as exc:
            raise ValueError(f"invalid run context: {_explain(exc)}") from exc
        given = overrides.model_dump(exclude_unset=True)
        changes: dict[str, Any] = {}
        if "max_iterations" in given:
            changes["max_iterations"] = given.pop("max_iterations")
        for group, names in _GROUPS.items():
            update = {n: given[n] for n in names if n in given}
            if not update:
                continue
            current = getattr(self, group)
            if current is None and group != "budget_pressure":
                raise ValueError(f"{sorted(update)}: {group} is disabled for this graph")
            base = current.model_dump() if current is not None else {}
            model_cls = type(current) if current is not None else BudgetPressure
            try:
                changes[group] = model_cls(**{**base, **update})
            except ValidationError as exc:
                given_text = ", ".join(f"{k}={v!r}" for k, v in sorted(update.items()))
                raise ValueError(f"invalid run context ({given_text}) for {group}: "
                                 f"{_explain(exc)}") from exc
        return replace(self, **changes, _cache={})


_MODELS: dict[str, type[BaseModel]] = {
    "limits": Limits, "loop_detection": LoopDetection, "stall_detection": StallDetection,
    "budget_pressure": BudgetPressure, "approval": Approval, "compaction": Compaction,
    "hooks": Hooks, "judge": Judge,
}


def _check_types(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Configuration objects of the right type (a dict of fields is validated into one),
    ``bool`` flags and a ``str`` system prompt; a ``ValueError`` names the argument.

    Example:
        >>> _check_types({"limits": {"max_tool_calls": 3}})["limits"].max_tool_calls
        3
        >>> try:
        ...     _check_types({"limits": {"max_tool_calls": 0}})
        ... except ValueError as exc:
        ...     print(str(exc).splitlines()[0])
        limits: max_tool_calls: Input should be greater than or equal to 1 (got 0)
    """
    out: dict[str, Any] = {}
    for name, model in _MODELS.items():
        value = kwargs.get(name)
        if value is None or isinstance(value, model):
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"{name}: expected a {model.__name__} (or a dict of its fields), "
                             f"got {type(value).__name__}")
        try:
            out[name] = model(**value)
        except ValidationError as exc:
            raise ValueError(f"{name}: {_explain(exc)}") from exc
    for flag in ("inject_progress", "fresh_context"):
        if flag in kwargs and not isinstance(kwargs[flag], bool):
            raise ValueError(f"{flag} must be True or False, got {kwargs[flag]!r}")
    prompt = kwargs.get("system_prompt")
    if prompt is not None and not isinstance(prompt, str | SystemMessage):
        raise ValueError(f"system_prompt must be a str, a SystemMessage or None, got {type(prompt).__name__}")
    agent_name = kwargs.get("name")
    if agent_name is not None and not isinstance(agent_name, str):
        raise ValueError(f"name must be a str or None, got {type(agent_name).__name__}")
    return out


def _explain(exc: ValidationError) -> str:
    """One line per problem, naming the field (``unknown`` keys list the allowed ones)."""
    parts: list[str] = []
    for error in exc.errors():
        field = ".".join(str(x) for x in error.get("loc", ())) or "value"
        if error.get("type") == "extra_forbidden":
            allowed = ", ".join(OVERRIDES)
            parts.append(f"{field}: unknown per-run override (allowed: {allowed})")
        else:
            msg = str(error.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{field}: {msg} (got {error.get('input')!r})" if field != "value"
                         else msg)
    return "; ".join(parts)
