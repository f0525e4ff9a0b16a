"""The stream transformers a compiled agent registers for ``stream_events(version="v3")``, as
``create_agent`` registers them: ``ToolCallTransformer``, ``SubagentTransformer``, each
middleware's ``transformers``, then the caller's ``transformers=``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langgraph.prebuilt import ToolCallTransformer

from langgraph_loop.core.compat import SubagentTransformer

__all__ = ["TransformerFactory", "stream_transformers"]

TransformerFactory = Callable[[tuple[str, ...]], Any]
"""A scope-aware stream transformer factory (a ``StreamTransformer`` class or a callable)."""


def stream_transformers(middleware: Sequence[AgentMiddleware[Any, Any]],
                        given: Sequence[TransformerFactory] | None) -> list[TransformerFactory]:
    """The built-in transformers, the middleware's, then ``given``; each (by identity) once."""
    ordered = [ToolCallTransformer, SubagentTransformer,
               *(t for m in middleware for t in getattr(m, "transformers", ())), *(given or ())]
    return list({id(factory): factory for factory in ordered}.values())  # the first place kept
