"""Everything the builder was given, validated once, plus per-run overrides.

Nodes read a ``LoopSettings``; ``settings.for_run(runtime.context)`` applies the
overrides a caller passed as LangGraph runtime context, nested by group
(``LoopContext``): each group is merged over the graph's own configuration model and
validated by it, the same way in-process and on LangGraph Server.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> s = LoopSettings.build(ScriptedChatModel(script=[]))
    >>> run = s.for_run({"iterations": {"max": 3}, "limits": {"max_tool_calls": 7}})
    >>> run.max_iterations, run.limits.max_tool_calls
    (3, 7)
    >>> try:
    ...     s.for_run({"limits": {"final_answr": False}})
    ... except ValueError as exc:
    ...     print(str(exc)[:73])
    invalid run context: limits.final_answr: unknown field (fields of Limits:
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, get_type_hints

from langchain.agents.middleware.types import AgentMiddleware, AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.runtime import Runtime
from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

from langgraph_loop.core.callbacks import LegacyContinuation
from langgraph_loop.core.config import (
    Approval,
    BudgetPressure,
    Compaction,
    Hooks,
    Iterations,
    Judge,
    Limits,
    LoopDetection,
    StallDetection,
)
from langgraph_loop.core.models import ChatRunnable, primary_chat_model, resolve_model
from langgraph_loop.core.shape import Shape
from langgraph_loop.core.state import (
    IterationsOverrides,
    LimitsOverrides,
    LoopContext,
    LoopDetectionOverrides,
    LoopState,
)
from langgraph_loop.core.structured import StructuredOutput, resolve_response_format

__all__ = [
    "GROUPS",
    "JUMP_TARGETS",
    "LOOP_KEYS",
    "MOVED",
    "NODE_HOOKS",
    "OVERRIDES",
    "SHARED_KEYS",
    "DuplicateMiddlewareError",
    "LoopSettings",
    "can_jump_to",
    "check_middleware",
    "check_state_schema",
    "fields_of",
    "overrides_hook",
    "regroup",
    "run_overrides",
    "split_provider_tools",
]

Callback = Callable[..., Any]


OVERRIDES: tuple[str, ...] = tuple(LoopContext.__annotations__)
"""The keys a run's ``context=`` may hold (declared once, in ``LoopContext``): the groups,
and the deprecated flat names of 0.2."""

GROUPS: dict[str, tuple[type[BaseModel], Any]] = {
    "iterations": (Iterations, IterationsOverrides),
    "limits": (Limits, LimitsOverrides),
    "loop_detection": (LoopDetection, LoopDetectionOverrides),
}
"""Each per-run override group: the configuration model it is merged over, and the
``LoopContext`` declaration of its overridable fields."""

FLAT: dict[str, tuple[str, ...]] = {
    "max_iterations": ("iterations", "max"),
    "max_model_calls": ("iterations", "max_model_calls"),
    "consecutive": ("iterations", "stall", "consecutive"),
    "tolerance": ("iterations", "stall", "tolerance"),
    "max_tool_calls": ("limits", "max_tool_calls"),
    "token_budget": ("limits", "token_budget"),
    "max_duration_s": ("limits", "max_duration_s"),
    "max_tool_output_chars": ("limits", "max_tool_output_chars"),
    "threshold": ("limits", "budget_pressure", "threshold"),
    **{name: ("loop_detection", name) for name in LoopDetectionOverrides.__annotations__},
}
"""The deprecated flat override names of 0.2 and where each now sits."""

MOVED: dict[str, tuple[str, str]] = {
    "max_iterations": ("iterations", "max"),
    "should_continue": ("iterations", "should_continue"),
    "judge": ("iterations", "judge"),
    "next_message": ("iterations", "continuation"),
    "prompt_factory": ("iterations", "continuation"),
    "record_feedback": ("iterations", "record_feedback"),
    "inject_progress": ("iterations", "inject_progress"),
    "fresh_context": ("iterations", "fresh_context"),
    "stall_detection": ("iterations", "stall"),
    "budget_pressure": ("limits", "budget_pressure"),
    "tool_filter": ("hooks", "tool_filter"),
}
"""``create_loop_agent``'s keywords of 0.2 that moved into a group: (group, field)."""

LOOP_KEYS = frozenset(LoopState.__annotations__) - {"messages", "todos", "mode"}
"""State keys the loop owns: a tool's ``Command`` cannot write them."""


SHARED_KEYS = frozenset(get_type_hints(AgentState))
"""The keys of LangChain's ``AgentState`` (``messages``, ``jump_to``, ``structured_response``):
every middleware schema declares them; the loop's declaration of each serves both."""


def check_state_schema(schema: Any, where: str) -> None:
    """A ``state_schema`` (the user's or a middleware's, ``where`` names it) may extend
    ``LoopState`` or LangChain's ``AgentState`` and add keys (``todos`` and ``mode`` are the
    user's: ``TodoListMiddleware`` shares ``todos``); re-declaring a key the loop owns
    (``LOOP_KEYS``) with another type is a ``ValueError`` naming the keys (its writes would break the loop).

    Example:
        >>> from langchain.agents import AgentState
        >>> class Mine(AgentState):
        ...     usage: int
        >>> try:
        ...     check_state_schema(Mine, "middleware M")
        ... except ValueError as exc:
        ...     print(str(exc)[:72])
        middleware M: state_schema Mine declares ['usage'], keys the loop owns (
    """
    if schema is None:
        return
    own = get_type_hints(LoopState, include_extras=True)
    hints = get_type_hints(schema, include_extras=True)
    clash = sorted(k for k, v in hints.items()
                   if k in LOOP_KEYS and k not in SHARED_KEYS and v != own[k])
    if clash:
        raise ValueError(f"{where}: state_schema {schema.__name__} declares {clash}, keys the loop "
                         f"owns (LoopState) with another type; rename them")


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


# --- the user's middleware (``create_agent``'s checks and hook lists) ----------------------

NODE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
"""The ``AgentMiddleware`` hooks that are graph nodes (each with its async twin ``a<hook>``)."""


class DuplicateMiddlewareError(ValueError, AssertionError):
    """Two middleware share a name. ``create_agent`` raises ``AssertionError`` for it; the
    builder's errors are ``ValueError``s: this is both, so either ``except`` catches it."""


def overrides_hook(middleware: AgentMiddleware[Any, Any], hook: str) -> bool:
    """Does ``middleware`` implement ``hook`` (sync or async), as ``create_agent`` asks?

    Example:
        >>> from langchain.agents.middleware import ModelRetryMiddleware
        >>> m = ModelRetryMiddleware()
        >>> overrides_hook(m, "wrap_model_call"), overrides_hook(m, "before_model")
        (True, False)
    """
    cls = type(middleware)
    return any(getattr(cls, name) is not getattr(AgentMiddleware, name) for name in (hook, f"a{hook}"))


JUMP_TARGETS = ("model", "tools", "end")
"""Where a middleware node hook may jump (``jump_to``), as in ``create_agent``."""


def can_jump_to(middleware: AgentMiddleware[Any, Any], hook: str) -> tuple[str, ...]:
    """Where a node hook may jump (``@hook_config(can_jump_to=[...])`` on its sync method,
    else its async one), as ``create_agent`` reads it."""
    cls = type(middleware)
    for name in (hook, f"a{hook}"):
        method = getattr(cls, name, None)
        targets = getattr(method, "__can_jump_to__", None)
        if method is not getattr(AgentMiddleware, name, None) and targets is not None:
            return tuple(targets)
    return ()


def check_middleware(middleware: Any) -> tuple[AgentMiddleware[Any, Any], ...]:
    """The ``middleware`` list checked: ``AgentMiddleware`` instances with distinct names
    (``DuplicateMiddlewareError`` otherwise, as ``create_agent``), jumps the loop maps.

    Example:
        >>> from langchain.agents.middleware import ModelRetryMiddleware
        >>> try:
        ...     check_middleware([ModelRetryMiddleware(), ModelRetryMiddleware()])
        ... except ValueError as exc:
        ...     print(exc)
        middleware: please remove duplicate middleware instances (names: ['ModelRetryMiddleware'])
    """
    if isinstance(middleware, AgentMiddleware) or not isinstance(middleware, Iterable):
        raise ValueError(f"middleware must be a list of AgentMiddleware, got "
                         f"{type(middleware).__name__}")
    items = tuple(middleware)
    for item in items:
        if not isinstance(item, AgentMiddleware):
            raise ValueError(f"middleware: {item!r:.80} is not an AgentMiddleware")
    names = [m.name for m in items]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DuplicateMiddlewareError(f"middleware: please remove duplicate middleware "
                                       f"instances (names: {dupes})")
    for m in items:
        for hook in NODE_HOOKS:
            unknown = sorted(set(can_jump_to(m, hook)) - set(JUMP_TARGETS))
            if unknown:
                raise ValueError(f"middleware {m.name}.{hook}: can_jump_to {unknown} (known: "
                                 f"'model', 'tools', 'end')")
        if set(can_jump_to(m, "after_agent")) - {"end"}:
            raise ValueError(f"middleware {m.name}.after_agent: only a jump to 'end' has a "
                             f"meaning after the loop ended")
    return items


@dataclass(frozen=True)
class LoopSettings:
    """The validated configuration of one compiled loop graph.

    The groups are stored as given (``iterations``, ``limits``, ``hooks``, ...); the
    nodes read the names of 0.2, filled in from the groups when the settings are made
    (``max_iterations`` is ``iterations.max``, ``budget_pressure`` is
    ``limits.budget_pressure``, ...).
    ``limits`` is the engine's view: the run's ``Limits`` with ``max_model_calls``
    filled in from ``iterations.max_model_calls``, so the limit checks read one object.
    """

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
    show_notices: bool = False
    """Give notices ids chat UIs render (default: ``do-not-render-`` ids, kept out of view)."""
    middleware: tuple[AgentMiddleware[Any, Any], ...] = ()
    """The user's LangChain middleware (``nodes/hosted.py`` hosts it); its tools are in
    ``tools``, first, as ``create_agent`` orders them."""
    _cache: dict[str, LoopSettings] = field(default_factory=dict, compare=False, repr=False)

    # --- read from the groups once, when made (the nodes read them on every step) ----------
    max_iterations: int | None = field(init=False, compare=False, repr=False)
    """``iterations.max``."""
    should_continue: Callback | None = field(init=False, compare=False, repr=False)
    """``iterations.should_continue``."""
    judge: Judge | None = field(init=False, compare=False, repr=False)
    """``iterations.judge``."""
    continuation: Callback | None = field(init=False, compare=False, repr=False)
    """``iterations.continuation`` (0.2's ``next_message``/``prompt_factory``)."""
    record_feedback: Callback | None = field(init=False, compare=False, repr=False)
    """``iterations.record_feedback``."""
    inject_progress: bool = field(init=False, compare=False, repr=False)
    """``iterations.inject_progress``."""
    fresh_context: bool = field(init=False, compare=False, repr=False)
    """``iterations.fresh_context``."""
    stall_detection: StallDetection | None = field(init=False, compare=False, repr=False)
    """``iterations.stall``."""
    budget_pressure: BudgetPressure | None = field(init=False, compare=False, repr=False)
    """``limits.budget_pressure``."""
    tool_filter: Callback | None = field(init=False, compare=False, repr=False)
    """``hooks.tool_filter``."""
    output_tools: frozenset[str] = field(init=False, compare=False, repr=False)
    """The structured-output tools' names (their calls are answers, not work)."""

    def __post_init__(self) -> None:
        it = self.iterations
        derived = {
            "max_iterations": it.max, "should_continue": it.should_continue, "judge": it.judge,
            "continuation": it.continuation, "record_feedback": it.record_feedback,
            "inject_progress": it.inject_progress, "fresh_context": it.fresh_context,
            "stall_detection": it.stall, "budget_pressure": self.limits.budget_pressure,
            "tool_filter": self.hooks.tool_filter,
            "output_tools": self.structured.tool_names if self.structured is not None else frozenset(),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def build(cls, model: ChatRunnable | str, tools: Sequence[Any] | BaseTool | Callback | None = (),
              **kwargs: Any) -> LoopSettings:
        """Validate the builder's arguments (``ValueError`` naming the argument).

        Takes ``create_loop_agent``'s keywords; the keywords of 0.2 that moved into a
        group (``MOVED``) are taken too, without a warning (``create_loop_agent`` warns).
        """
        model = resolve_model(model)
        tools, kwargs["provider_tools"] = split_provider_tools(() if tools is None else tools)
        kwargs = regroup(kwargs)
        kwargs.update(_check_types(kwargs))
        kwargs["iterations"], kwargs["limits"] = _synced(kwargs.get("iterations") or Iterations(),
                                                         kwargs.get("limits") or Limits())
        kwargs["hooks"] = kwargs.get("hooks") or Hooks()
        kwargs["middleware"] = check_middleware(kwargs.get("middleware") or ())
        coerced = _coerce_tools(tools)
        extra = [t for m in kwargs["middleware"] for t in getattr(m, "tools", ())]
        if extra:  # the middleware's tools, first (as create_agent orders them)
            coerced = _coerce_tools([*extra, *coerced])
        kwargs["structured"] = resolve_response_format(kwargs.get("response_format"), model,
                                                       [*coerced, *kwargs["provider_tools"]])
        if kwargs.get("loop_detection") is not None:  # MCP read-only hints in tool metadata
            kwargs["loop_detection"] = kwargs["loop_detection"].with_tool_hints(coerced)
        check_state_schema(kwargs.get("state_schema"), "state_schema")
        for m in kwargs["middleware"]:
            check_state_schema(m.state_schema, f"middleware {m.name}")
        settings = cls(model=model, tools=coerced, **kwargs)
        settings._check_approval()
        settings._check_loop_detection()
        return settings

    def _check_tool_names(self, where: str, names: Iterable[str], *, wildcard: bool = False) -> None:
        """``ValueError`` naming ``where`` when ``names`` holds a tool the graph does not have."""
        known = {t.name for t in self.tools}
        unknown = sorted(set(names) - known - ({"*"} if wildcard else set()))
        if unknown:
            raise ValueError(f"{where}: unknown tools {unknown}; known: {sorted(known)}")

    def _check_approval(self) -> None:
        if self.approval is not None:
            self._check_tool_names("approval.tools", self.approval.tools)

    def _check_loop_detection(self) -> None:
        """The detector's per-tool settings name the graph's tools (a typo would never match)."""
        detection = self.loop_detection
        if detection is None:
            return
        self._check_tool_names("loop_detection.per_tool", detection.per_tool)
        self._check_tool_names("loop_detection.arg_policies", detection.arg_policies, wildcard=True)
        self._check_tool_names("loop_detection.read_only_tools", detection.read_only_tools)

    # --- the names the nodes read (0.2's flat keywords) -------------------------------------

    # --- derived -----------------------------------------------------------------------------

    def hooked(self, hook: str) -> tuple[AgentMiddleware[Any, Any], ...]:
        """The user's middleware that implement ``hook``, in the order given."""
        return tuple(m for m in self.middleware if overrides_hook(m, hook))

    @cached_property
    def shape(self) -> Shape:
        """The graph's shape for these settings (``core/shape.py``): a node per middleware
        node hook, named as ``create_agent`` names it (``"<name>.before_model"``); the
        ``after_*`` hooks run in reverse order, as there."""
        def names(hook: str, reverse: bool = False) -> tuple[str, ...]:
            found = [f"{m.name}.{hook}" for m in self.hooked(hook)]
            return tuple(reversed(found) if reverse else found)

        jumps = tuple((f"{m.name}.{hook}", targets) for hook in NODE_HOOKS for m in self.hooked(hook)
                      if (targets := can_jump_to(m, hook)))
        return Shape(judge=self.judge is not None, approval=self.approval is not None,
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
        return self.shape.recursion_limit(max_model_calls=self.limits.max_model_calls,
                                          max_iterations=self.max_iterations)

    # --- per-run overrides -------------------------------------------------------------------

    def for_runtime(self, runtime: Runtime[Any] | None) -> LoopSettings:
        """These settings with the running graph's overrides (its runtime context) applied.

        On a resume the context holds the overrides the run started with: ``prepare`` stores
        them in ``run["overrides"]`` and ``LoopGraph`` passes them again.
        """
        context = runtime.context if runtime is not None else None
        if context is None:  # no context, no overrides: the common case, every step
            return self
        return self.for_run(run_overrides(context, self.context_schema))

    def overrides(self, context: Any) -> dict[str, Any]:
        """A run's overrides, validated (``ValueError`` otherwise): what the run stores.

        The flat names of 0.2 get a ``DeprecationWarning`` here (once per run start).
        """
        if context is None:
            return {}
        given = dict(run_overrides(context, self.context_schema) or {})
        nested(given, warn=True)
        self.for_run(given)
        return given

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
        resolved = self._apply(nested(context))
        if key is not None and len(self._cache) < 64:
            self._cache[key] = resolved
        return resolved

    def _apply(self, context: dict[str, Any]) -> LoopSettings:
        changes: dict[str, Any] = {}
        for group, update in context.items():
            model, declared = GROUPS[group]
            checked = _checked(group, update, model, declared)
            current = getattr(self, group)
            if current is None:
                raise ValueError(f"invalid run context: {group} is disabled for this graph "
                                 f"(given: {_given(checked)})")
            changes[group] = _merged(group, current, checked)
        iterations, limits = changes.get("iterations", self.iterations), changes.get("limits", self.limits)
        changes["iterations"], changes["limits"] = _synced(iterations, limits, moved=False)
        return replace(self, **changes, _cache={})


# --- per-run overrides: nesting, checking, merging ------------------------------------------

def nested(context: Mapping[str, Any], *, warn: bool = False) -> dict[str, Any]:
    """A run's overrides nested by group: the deprecated flat names moved into their groups.

    ``ValueError`` for a key that is neither a group nor a flat name (listing the groups),
    a group that is not a mapping, or a field given both flat and nested.

    Example:
        >>> nested({"max_tool_calls": 2, "threshold": 0.5, "iterations": {"max": 3}})
        {'iterations': {'max': 3}, 'limits': {'max_tool_calls': 2, 'budget_pressure': {'threshold': 0.5}}}
    """
    out: dict[str, Any] = {}
    for group, value in context.items():
        if group in GROUPS:
            if not isinstance(value, Mapping):
                model = GROUPS[group][0]
                raise ValueError(f"invalid run context: {group}: expected a mapping of "
                                 f"{model.__name__} fields, got {type(value).__name__} {value!r:.60}")
            out[group] = {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
        elif group not in FLAT:
            raise ValueError(f"invalid run context: unknown key {group!r} (per-run override "
                             f"groups: {', '.join(GROUPS)})")
    flat = [name for name in context if name in FLAT]
    for name in flat:
        *where, leaf = FLAT[name]
        target = out
        for part in where:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ValueError(f"invalid run context: {'.'.join(where)}: expected a mapping")
        if leaf in target:
            raise ValueError(f"invalid run context: {'.'.join(FLAT[name])} given twice (as the "
                             f"deprecated flat {name!r} too)")
        target[leaf] = context[name]
    if flat and warn:
        moved = ", ".join(f"{n} -> {'.'.join(FLAT[n])}" for n in flat)
        warnings.warn(f"flat per-run override names are deprecated; nest them by group, "
                      f"e.g. context={{'limits': {{'max_tool_calls': 2}}}} ({moved})",
                      DeprecationWarning, stacklevel=3)
    return out


def fields_of(model: type[BaseModel]) -> tuple[str, ...]:
    """A configuration model's fields as users write them (deprecated ones left out)."""
    return tuple(name for name, info in model.model_fields.items() if not info.exclude)


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _checked(path: str, given: Any, model: type[BaseModel], declared: Any) -> dict[str, Any]:
    """One group of overrides checked against its ``LoopContext`` declaration (strictly:
    ``True`` is not a count and ``"3"`` not a number; a deployed graph gets JSON numbers)."""
    if not isinstance(given, Mapping):
        raise ValueError(f"invalid run context: {path}: expected a mapping of {model.__name__} "
                         f"fields, got {type(given).__name__} {given!r:.60}")
    hints = get_type_hints(declared, include_extras=True)
    out: dict[str, Any] = {}
    for name, value in given.items():
        where = f"{path}.{name}"
        if name not in fields_of(model):
            raise ValueError(f"invalid run context: {where}: unknown field (fields of "
                             f"{model.__name__}: {', '.join(fields_of(model))})")
        if name not in hints:
            raise ValueError(f"invalid run context: {where}: not overridable per run (per-run "
                             f"fields of {path}: {', '.join(hints)})")
        hint = hints[name]
        if is_typeddict(hint):
            sub = _model_of(model, name)
            out[name] = _checked(where, value, sub, hint)
            continue
        adapter = _ADAPTERS.get(hint) or _ADAPTERS.setdefault(hint, TypeAdapter(hint))
        try:
            out[name] = adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            why = "; ".join(str(e.get("msg", "")) for e in exc.errors())
            raise ValueError(f"invalid run context: {where}: {why} (got {value!r})") from exc
    return out


def _model_of(model: type[BaseModel], name: str) -> type[BaseModel]:
    """The configuration model a field of ``model`` holds (``stall``: ``StallDetection``)."""
    for candidate in (StallDetection, BudgetPressure):
        if candidate in getattr(model.model_fields[name].annotation, "__args__", ()):
            return candidate
    raise TypeError(f"{model.__name__}.{name} holds no configuration model")


def _merged(path: str, current: BaseModel, update: Mapping[str, Any]) -> BaseModel:
    """``current`` with ``update`` applied, validated by its own model (nested groups too).
    Only the fields given (at build time or now) are passed, so a model's own rules for what
    was given apply (``LoopDetection``: a layer's thresholds given switch the layer on)."""
    fields = {k: getattr(current, k) for k in fields_of(type(current)) if k in current.model_fields_set}
    for name, value in update.items():
        inner = getattr(current, name)
        if not isinstance(value, dict):
            fields[name] = value
        elif inner is None and name == "stall":
            raise ValueError(f"invalid run context: {path}.stall is disabled for this graph "
                             f"(given: {_given(value)})")
        else:
            fields[name] = _merged(f"{path}.{name}", inner if inner is not None else BudgetPressure(),
                                   value)
    try:
        return type(current)(**fields)
    except ValidationError as exc:
        raise ValueError(f"invalid run context ({_given(update)}) for {path}: {_explain(exc)}") from exc


def _given(update: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(update.items()))


def _synced(iterations: Iterations, limits: Limits, *, moved: bool = True) -> tuple[Iterations, Limits]:
    """``iterations`` with a deprecated ``Limits(max_model_calls=...)`` moved into it (when
    ``moved``), and ``limits`` with ``max_model_calls`` set from ``iterations`` (the engine's
    view). ``ValueError`` when both say it."""
    if moved and "max_model_calls" in limits.model_fields_set:
        if "max_model_calls" in iterations.model_fields_set:
            raise ValueError("max_model_calls given twice: as iterations.max_model_calls and as "
                             "the deprecated limits.max_model_calls")
        iterations = iterations.model_copy(update={"max_model_calls": limits.max_model_calls})
        iterations.model_fields_set.add("max_model_calls")
    if limits.max_model_calls != iterations.max_model_calls or moved:
        limits = limits.model_copy(update={"max_model_calls": iterations.max_model_calls})
    return iterations, limits


# --- the builder's keywords ------------------------------------------------------------------

def regroup(options: Mapping[str, Any], *, warn: bool = False, stacklevel: int = 2) -> dict[str, Any]:
    """The builder's keywords with those of 0.2 (``MOVED``) moved into their groups.

    Each old keyword is checked as 0.2 checked it (the same error texts), then set on its
    group (a model is copied, a dict extended). ``warn`` issues one ``DeprecationWarning``
    per old keyword, naming the new spelling. ``ValueError`` when a field is given both
    ways. ``prompt_factory`` wins over ``next_message`` when both are given, as in 0.2.

    Example:
        >>> regroup({"max_iterations": 3, "limits": {"token_budget": 9}})
        {'limits': {'token_budget': 9}, 'iterations': {'max': 3}}
    """
    out = {k: v for k, v in options.items() if k not in MOVED}
    old = {k: options[k] for k in MOVED if k in options}
    if "prompt_factory" in old and "next_message" in old:
        old.pop("next_message")
    for name, given in _check_old(old).items():
        group, field_name = MOVED[name]
        if warn:
            model = GROUPS.get(group, (Hooks,))[0].__name__
            warnings.warn(f"create_loop_agent({name}=...) is deprecated: use "
                          f"{group}={model}({field_name}=...)", DeprecationWarning,
                          stacklevel=stacklevel + 1)
        legacy = name in ("next_message", "prompt_factory") and given is not None
        value = LegacyContinuation(given, name) if legacy else given
        current = out.get(group)
        if isinstance(current, BaseModel):
            if field_name in current.model_fields_set:
                raise ValueError(f"{name} given twice: as {group}.{field_name} and as the "
                                 f"deprecated {name}=")
            out[group] = current.model_copy(update={field_name: value})
            out[group].model_fields_set.add(field_name)
        elif isinstance(current, Mapping):
            if field_name in current:
                raise ValueError(f"{name} given twice: as {group}.{field_name} and as the "
                                 f"deprecated {name}=")
            out[group] = {**current, field_name: value}
        else:
            out[group] = {field_name: value}
    return out


def _check_old(old: Mapping[str, Any]) -> dict[str, Any]:
    """0.2's checks of its keywords, with its error texts; dicts made models."""
    max_iterations = old.get("max_iterations")
    if max_iterations is not None and (
        not isinstance(max_iterations, int) or isinstance(max_iterations, bool) or max_iterations < 1
    ):
        raise ValueError(f"max_iterations must be an int >= 1 or None, got {max_iterations!r}")
    for name in ("should_continue", "next_message", "record_feedback", "prompt_factory",
                 "tool_filter"):
        if old.get(name) is not None and not callable(old[name]):
            raise ValueError(f"{name} must be callable")
    for flag in ("inject_progress", "fresh_context"):
        if flag in old and not isinstance(old[flag], bool):
            raise ValueError(f"{flag} must be True or False, got {old[flag]!r}")
    checked = dict(old)
    for name, model in (("judge", Judge), ("stall_detection", StallDetection),
                        ("budget_pressure", BudgetPressure)):
        if name in old:
            checked[name] = _as_model(name, old[name], model)
    return checked


def _as_model(name: str, value: Any, model: type[BaseModel]) -> BaseModel | None:
    """``value`` as a ``model`` (a dict of its fields is validated into one); ``ValueError``
    naming ``name`` otherwise."""
    if value is None or isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        article = "an" if model.__name__[0] in "AEIOU" else "a"
        raise ValueError(f"{name}: expected {article} {model.__name__} (or a dict of its fields), "
                         f"got {type(value).__name__}")
    try:
        return model(**value)
    except ValidationError as exc:
        raise ValueError(f"{name}: {_explain(exc)}") from exc


_MODELS: dict[str, type[BaseModel]] = {
    "iterations": Iterations, "limits": Limits, "loop_detection": LoopDetection,
    "approval": Approval, "compaction": Compaction, "hooks": Hooks,
}


def _check_types(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Configuration objects of the right type (a dict of fields is validated into one)
    and a ``str`` system prompt; a ``ValueError`` names the argument.

    Example:
        >>> _check_types({"limits": {"max_tool_calls": 3}})["limits"].max_tool_calls
        3
        >>> try:
        ...     _check_types({"limits": {"max_tool_calls": 0}})
        ... except ValueError as exc:
        ...     print(str(exc).splitlines()[0])
        limits: max_tool_calls: Input should be greater than or equal to 1 (got 0)
        >>> try:
        ...     _check_types({"limits": {"final_answr": False}})
        ... except ValueError as exc:
        ...     print(str(exc)[:53])
        limits: final_answr: unknown field (fields of Limits:
    """
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


def _explain(exc: ValidationError) -> str:
    """One line per problem, naming the field (an unknown field lists the model's fields)."""
    parts: list[str] = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        field_name = ".".join(str(x) for x in loc) or "value"
        msg = str(error.get("msg", "")).removeprefix("Value error, ")
        if ": unknown field (fields of " in msg:  # the config models' own check (``_Config``)
            parts.append(f"{field_name}.{msg}" if loc else msg)
        else:
            parts.append(f"{field_name}: {msg} (got {error.get('input')!r})"
                         if field_name != "value" else msg)
    return "; ".join(parts)

