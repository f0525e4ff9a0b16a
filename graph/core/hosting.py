"""The user's middleware and state schemas, checked as ``create_agent`` checks them
(``nodes/hosted.py`` hosts the middleware).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_type_hints

from langchain.agents.middleware.types import AgentMiddleware, AgentState

from langgraph_loop.core.state import LoopState

__all__ = ["JUMP_TARGETS", "LOOP_KEYS", "NODE_HOOKS", "SHARED_KEYS", "DuplicateMiddlewareError",
           "can_jump_to", "check_middleware", "check_state_schema", "implements", "overrides_hook"]

LOOP_KEYS = frozenset(LoopState.__annotations__) - {"messages", "todos", "mode"}
"""State keys the loop owns: a tool's ``Command`` cannot write them."""

SHARED_KEYS = frozenset(get_type_hints(AgentState))
"""The keys of LangChain's ``AgentState`` (``messages``, ``jump_to``, ``structured_response``):
every middleware schema declares them; the loop's declaration of each serves both."""


def check_state_schema(schema: Any, where: str) -> None:
    """A ``state_schema`` (the user's or a middleware's: ``where``) may extend ``LoopState`` or
    ``AgentState`` and add keys, but not re-declare one the loop owns with another type."""
    if schema is None:
        return
    own = get_type_hints(LoopState, include_extras=True)
    hints = get_type_hints(schema, include_extras=True)
    clash = sorted(k for k, v in hints.items()
                   if k in LOOP_KEYS and k not in SHARED_KEYS and v != own[k])
    if clash:
        raise ValueError(f"{where}: state_schema {schema.__name__} declares {clash}, keys the loop "
                         f"owns (LoopState) with another type; rename them")


NODE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
"""The ``AgentMiddleware`` hooks that are graph nodes (each with its async twin ``a<hook>``)."""


class DuplicateMiddlewareError(ValueError, AssertionError):
    """Two middleware share a name (``create_agent`` raises ``AssertionError``; this is both)."""


def implements(middleware: AgentMiddleware[Any, Any], name: str) -> bool:
    """Does ``middleware`` override ``AgentMiddleware``'s ``name`` (a hook or its async twin)?"""
    return getattr(type(middleware), name, None) is not getattr(AgentMiddleware, name, None)


def overrides_hook(middleware: AgentMiddleware[Any, Any], hook: str) -> bool:
    """Does ``middleware`` implement ``hook`` (sync or async), as ``create_agent`` asks?"""
    return implements(middleware, hook) or implements(middleware, f"a{hook}")


JUMP_TARGETS = ("model", "tools", "end")
"""Where a middleware node hook may jump (``jump_to``), as in ``create_agent``."""


def can_jump_to(middleware: AgentMiddleware[Any, Any], hook: str) -> tuple[str, ...]:
    """Where a node hook may jump (``@hook_config(can_jump_to=[...])``), read as ``create_agent`` does."""
    for name in (hook, f"a{hook}"):
        targets = getattr(getattr(type(middleware), name, None), "__can_jump_to__", None)
        if implements(middleware, name) and targets is not None:
            return tuple(targets)
    return ()


def check_middleware(middleware: Any) -> tuple[AgentMiddleware[Any, Any], ...]:
    """The ``middleware`` checked as ``create_agent`` checks it (distinct names), and its jumps."""
    if isinstance(middleware, AgentMiddleware) or not isinstance(middleware, Iterable):
        raise ValueError(f"middleware must be a list of AgentMiddleware, got "
                         f"{type(middleware).__name__}")
    items = tuple(middleware)
    for item in items:
        if not isinstance(item, AgentMiddleware):
            raise ValueError(f"middleware: {item!r:.80} is not an AgentMiddleware")
        if instead := getattr(item, "built_in_as", None):  # ours: the loop has it already
            raise ValueError(f"middleware: {item.name} is for create_agent; create_loop_agent has "
                             f"it built in: pass {instead} instead")
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
