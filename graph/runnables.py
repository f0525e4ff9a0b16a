"""How the builder hands nodes and edges to LangGraph (public LangChain/LangGraph APIs only).

- ``traced(node)``: a node that calls out (model, tools, judge, ...) as a
  ``RunnableLambda`` with its sync and its async entry point, so ``ainvoke`` awaits
  models and tools instead of running them in a thread. It has a callback run of
  its own, named after the node.
- ``Inline(fn, name)``: a pure, cheap step (the conditional edges) run inline, sync
  or async alike, without a callback run of its own; with ``in_context=True`` it runs
  inside the run's config context, so ``get_runtime()`` works there (LangGraph calls
  conditional edges outside it). ``inline_node`` does the same for a pure node (the
  loop detector), with the run's settings and runtime.

Example:
    >>> Inline(lambda state: state["n"] + 1, name="next").invoke({"n": 1})
    2
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import set_config_context
from langgraph.runtime import Runtime, get_runtime

from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.nodes.base import LoopNode, plain_update, settings_for_run

__all__ = ["Inline", "inline_node", "traced"]

PureNode = Callable[[LoopState, LoopSettings, Runtime[LoopContext]], dict[str, Any]]


class Inline(Runnable[Any, Any]):
    """A pure step run inline, without a callback run of its own."""

    def __init__(self, fn: Callable[[Any], Any], *, name: str, in_context: bool = False) -> None:
        self.fn = fn
        self.name = name
        self.in_context = in_context

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Call ``fn(input)``."""
        if self.in_context and config is not None:
            with set_config_context(config) as context:
                return context.run(self.fn, input)
        return self.fn(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Call ``fn(input)`` (it does not block: no thread needed)."""
        return self.invoke(input, config)


def traced(node: LoopNode) -> Runnable[LoopState, Any]:
    """``node`` as LangGraph runs it: its sync and async entry points, with the run's runtime."""

    def invoke(state: LoopState, config: RunnableConfig) -> Any:
        return node.invoke(state, config, get_runtime())

    async def ainvoke(state: LoopState, config: RunnableConfig) -> Any:
        return await node.ainvoke(state, config, get_runtime())

    return RunnableLambda(invoke, afunc=ainvoke, name=node.name)


def inline_node(node: PureNode, settings: LoopSettings, *, name: str) -> Inline:
    """A pure node run inline with the run's settings and runtime (events, overrides)."""

    def run(state: LoopState) -> Any:
        runtime: Runtime[LoopContext] = get_runtime()
        return plain_update(node(state, settings_for_run(settings, runtime), runtime))

    return Inline(run, name=name)
