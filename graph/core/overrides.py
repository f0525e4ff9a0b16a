"""Per-run overrides: a run's ``context=``, nested by group as ``LoopContext`` (``core/state.py``;
README, "Per-run overrides") declares, checked strictly (``True`` is not a count, ``"3"`` not a
number: a deployed graph gets JSON numbers) and merged over the graph's own configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, is_dataclass, make_dataclass
from typing import Any, Required, get_origin, get_type_hints

from pydantic import BaseModel, TypeAdapter, ValidationError, create_model
from typing_extensions import TypedDict, is_typeddict

from langgraph_loop.core.config import Iterations, Limits, LoopDetection
from langgraph_loop.core.removed import CONTEXT, removed_context
from langgraph_loop.core.state import (
    IterationsOverrides,
    LimitsOverrides,
    LoopContext,
    LoopDetectionOverrides,
)

__all__ = ["GROUPS", "OVERRIDES", "checked_groups", "context_type", "explain", "given", "merged",
           "run_overrides"]

OVERRIDES: tuple[str, ...] = tuple(LoopContext.__annotations__)
"""The keys a run's ``context=`` may hold (declared once, in ``LoopContext``): the groups."""

GROUPS: dict[str, tuple[type[BaseModel], Any]] = {
    "iterations": (Iterations, IterationsOverrides),
    "limits": (Limits, LimitsOverrides),
    "loop_detection": (LoopDetection, LoopDetectionOverrides),
}
"""Each per-run group: the configuration model it is merged over, its ``LoopContext`` declaration."""


def _declared(schema: Any) -> set[str]:
    """The field names a user context type declares (TypedDict, dataclass or pydantic)."""
    fields = getattr(schema, "model_fields", None) or getattr(schema, "__dataclass_fields__", None)
    return set(fields or getattr(schema, "__annotations__", {}))


def context_type(schema: Any) -> Any:
    """The user's ``context_schema`` with the override groups declared beside its fields (same
    name; a subclass of a dataclass or pydantic model), so that LangGraph's coercion of a dict
    context and LangGraph Server, which drops undeclared keys, keep them."""
    declared = _declared(schema) if schema is not None else set(OVERRIDES)
    groups = {k: v for k, v in get_type_hints(LoopContext).items() if k not in declared}
    if not groups:
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        fields: Any = {k: (v | None, None) for k, v in groups.items()}
        return create_model(schema.__name__, __base__=schema, __module__=schema.__module__, **fields)
    if is_dataclass(schema) and isinstance(schema, type):
        return make_dataclass(schema.__name__, [(k, v | None, field(default=None, kw_only=True))
                                                for k, v in groups.items()],
                              bases=(schema,), frozen=schema.__dataclass_params__.frozen,  # type: ignore[attr-defined]
                              namespace={"__module__": schema.__module__})
    if is_typeddict(schema):
        own = {k: v if k not in schema.__required_keys__ or get_origin(v) is Required else Required[v]
               for k, v in get_type_hints(schema, include_extras=True).items()}
        return TypedDict(schema.__name__, {**own, **groups}, total=False)  # type: ignore[operator]
    raise ValueError(f"context_schema: expected a TypedDict, a dataclass or a pydantic model, "
                     f"got {schema!r:.60}")


def run_overrides(context: Any, schema: Any = None) -> Mapping[str, Any] | None:
    """The per-run overrides a run's ``context=`` carries (None: none), the one place they are
    read from a context: without a user ``context_schema`` any ``Mapping`` (else ``ValueError``);
    with one, the groups beside its fields (keys or attributes; another key is an error)."""
    if context is None:
        return None
    if schema is None:
        if isinstance(context, Mapping):
            return context
        raise ValueError(f"context: expected a mapping of per-run overrides (a dict with any of "
                         f"{', '.join(OVERRIDES)}), got {type(context).__name__} {context!r:.60}")
    if isinstance(context, Mapping):
        unknown = sorted(k for k in context if k not in OVERRIDES and k not in _declared(schema))
        for name in unknown:
            if name in CONTEXT:
                raise ValueError(removed_context(name))
        if unknown:
            raise ValueError(f"invalid run context: unknown keys {unknown} (neither fields of "
                             f"{getattr(schema, '__name__', schema)} nor per-run overrides)")
        found = {k: context[k] for k in OVERRIDES if k in context}
    else:
        found = {k: getattr(context, k) for k in OVERRIDES if getattr(context, k, None) is not None}
    return found or None


def checked_groups(context: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A run's overrides checked against ``LoopContext``, by group (``ValueError`` naming the
    field otherwise; a flat name of 0.2 names its nested spelling)."""
    out: dict[str, dict[str, Any]] = {}
    for group, value in context.items():
        if group in GROUPS:
            out[group] = _checked(group, value, *GROUPS[group])
        elif group in CONTEXT:
            raise ValueError(removed_context(group))
        else:
            raise ValueError(f"invalid run context: unknown key {group!r} (per-run override "
                             f"groups: {', '.join(GROUPS)})")
    return out


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _checked(path: str, given: Any, model: type[BaseModel], declared: Any) -> dict[str, Any]:
    """One group of overrides checked against its ``LoopContext`` declaration."""
    if not isinstance(given, Mapping):
        raise ValueError(f"invalid run context: {path}: expected a mapping of {model.__name__} "
                         f"fields, got {type(given).__name__} {given!r:.60}")
    hints = get_type_hints(declared, include_extras=True)
    out: dict[str, Any] = {}
    for name, value in given.items():
        where = f"{path}.{name}"
        if name not in model.model_fields:
            raise ValueError(f"invalid run context: {where}: unknown field (fields of "
                             f"{model.__name__}: {', '.join(model.model_fields)})")
        if name not in hints:
            raise ValueError(f"invalid run context: {where}: not overridable per run (per-run "
                             f"fields of {path}: {', '.join(hints)})")
        hint = hints[name]
        if is_typeddict(hint):
            out[name] = _checked(where, value, model_of(model, name), hint)
            continue
        adapter = _ADAPTERS.get(hint) or _ADAPTERS.setdefault(hint, TypeAdapter(hint))
        try:
            out[name] = adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            why = "; ".join(str(e.get("msg", "")) for e in exc.errors())
            raise ValueError(f"invalid run context: {where}: {why} (got {value!r})") from exc
    return out


def model_of(model: type[BaseModel], name: str) -> type[BaseModel]:
    """The configuration model a field of ``model`` holds (``Iterations.stall``: ``StallDetection``)."""
    annotation = model.model_fields[name].annotation
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"{model.__name__}.{name} holds no configuration model")


def merged(path: str, current: BaseModel, update: Mapping[str, Any]) -> BaseModel:
    """``current`` with ``update`` applied, validated by its own model (nested groups too).
    Only the fields given (at build time or now) are passed, so a model's own rules for what
    was given apply (``LoopDetection``: a layer's settings given switch the layer on)."""
    fields = {k: getattr(current, k) for k in type(current).model_fields if k in current.model_fields_set}
    for name, value in update.items():
        inner = getattr(current, name)
        if not isinstance(value, dict):
            fields[name] = value
        elif inner is None and name == "stall":
            raise ValueError(f"invalid run context: {path}.stall is disabled for this graph "
                             f"(given: {given(value)})")
        else:
            inner = inner if inner is not None else model_of(type(current), name)()
            fields[name] = merged(f"{path}.{name}", inner, value)
    try:
        return type(current)(**fields)
    except ValidationError as exc:
        raise ValueError(f"invalid run context ({given(update)}) for {path}: {explain(exc)}") from exc


def given(update: Mapping[str, Any]) -> str:
    """The overrides given, for an error message."""
    return ", ".join(f"{k}={v!r}" for k, v in sorted(update.items()))


def explain(exc: ValidationError) -> str:
    """One line per problem, naming the field (an unknown field lists the model's fields)."""
    parts: list[str] = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        field_name = ".".join(str(x) for x in loc) or "value"
        msg = str(error.get("msg", "")).removeprefix("Value error, ")
        if ": unknown field (fields of " in msg or " was removed in 0.4: " in msg:
            parts.append(f"{field_name}.{msg}" if loc else msg)  # the models' own check (``_Config``)
        else:
            parts.append(f"{field_name}: {msg} (got {error.get('input')!r})"
                         if field_name != "value" else msg)
    return "; ".join(parts)
