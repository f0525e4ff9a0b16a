"""``create_loop_agent``: assemble the nodes into a compiled LangGraph graph.

The builder only validates arguments and wires nodes; each node's logic lives in
its module under ``nodes/``.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langgraph_loop import create_loop_agent
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> agent = create_loop_agent(ScriptedChatModel(script=["Hello!"]))
    >>> result = agent.invoke({"messages": [HumanMessage("hi")]})
    >>> result["stop_reason"], result["messages"][-1].content
    ('completed', 'Hello!')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopInput, LoopOutput, LoopState
from langgraph_loop.nodes.approval import ApprovalNode
from langgraph_loop.nodes.compaction import CompactionNode
from langgraph_loop.nodes.judge import JudgeNode
from langgraph_loop.nodes.limits import finish_steps
from langgraph_loop.nodes.loop_detector import LoopDetectorNode
from langgraph_loop.nodes.model import ModelNode
from langgraph_loop.nodes.prepare import PrepareNode
from langgraph_loop.nodes.respond import RespondNode
from langgraph_loop.nodes.router import RouterNode
from langgraph_loop.nodes.tools import ToolsNode
from langgraph_loop.routing import Routes
from langgraph_loop.run_input import LoopGraph

__all__ = ["create_loop_agent", "default_recursion_limit"]

_UNSET: Any = object()


def default_recursion_limit(settings: LoopSettings) -> int:
    """A recursion limit that fits the configured limits (10,000 when unbounded)."""
    calls, passes = settings.limits.max_model_calls, settings.max_iterations
    if calls is None or passes is None:
        return 10_000
    per_round = (4 + (1 if settings.compaction is not None else 0)
                 + (1 if settings.approval is not None else 0))
    per_pass = calls * per_round + 3
    return min(10_000, passes * per_pass + finish_steps(settings) + 10)


def _edge(route: Callable[..., str]) -> RunnableCallable:
    """A conditional edge without a callback run of its own (routes are pure and cheap)."""
    return RunnableCallable(route, name=route.__name__, trace=False)


def _add_optional(builder: StateGraph[Any, Any, Any, Any], settings: LoopSettings) -> None:
    """Judge, structured final turn, approval and compaction, when configured."""
    if settings.judge is not None:
        builder.add_node("judge", JudgeNode(settings).as_runnable())
        builder.add_edge("judge", "router")
    if settings.response_format is not None:
        builder.add_node("respond", RespondNode(settings).as_runnable(),
                         retry_policy=_retry(settings))
        builder.add_edge("respond", END)
    if settings.approval is not None:
        builder.add_node("approval", ApprovalNode(settings).as_runnable())
        builder.add_edge("approval", "tools")
    if settings.compaction is not None:
        builder.add_node("compaction", CompactionNode(settings).as_runnable(),
                         retry_policy=_retry(settings))
        builder.add_edge("compaction", "model")


def _retry(settings: LoopSettings) -> RetryPolicy:
    return RetryPolicy(max_attempts=3, initial_interval=0.5, backoff_factor=2.0)


def create_loop_agent(
    model: BaseChatModel,
    tools: Sequence[Any] | BaseTool | Callable[..., Any] = (),
    *,
    loop_detection: LoopDetection | None = _UNSET,
    checkpointer: Any = None,
    store: Any = None,
    name: str | None = None,
    **options: Any,
) -> CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """Build the loop agent as a compiled graph.

    Args:
        model: the agent's chat model (any LangChain ``BaseChatModel`` with tools).
        tools: a list of LangChain tools or plain functions (one tool alone is
            accepted as a list of one; a string or a dict is a ``ValueError``).
        loop_detection: ``LoopDetection()`` by default; None turns detection off.
        checkpointer: any LangGraph checkpointer (SQLite, PostgreSQL, in-memory).
        store: a LangGraph store, passed through.
        name: the graph's name.
        **options: the other keyword arguments of DESIGN.md (``system_prompt``,
            ``max_iterations``, ``should_continue``, ``judge``, ``next_message``,
            ``record_feedback``, ``inject_progress``, ``fresh_context``,
            ``prompt_factory``, ``limits``, ``stall_detection``, ``budget_pressure``,
            ``tool_filter``, ``approval``, ``compaction``, ``hooks``,
            ``response_format``).

    Raises:
        ValueError: an argument is invalid; the message names it. The graph's runs
            raise ``ValueError`` for an input it cannot work on (see ``run_input``).
    """
    known = set(LoopSettings.__dataclass_fields__) - {"model", "tools", "loop_detection",
                                                      "_cache", "extra_tools"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"create_loop_agent: unknown arguments {unknown}")
    detection = LoopDetection() if loop_detection is _UNSET else loop_detection
    settings = LoopSettings.build(model, tools, loop_detection=detection, **options)
    routes = Routes(settings)
    builder: StateGraph[LoopState, LoopContext, LoopInput, LoopOutput] = StateGraph(
        LoopState, context_schema=LoopContext, input_schema=LoopInput, output_schema=LoopOutput
    )
    builder.add_node("prepare", PrepareNode(settings).as_runnable())
    builder.add_node("model", ModelNode(settings).as_runnable(), retry_policy=_retry(settings))
    builder.add_node("loop_detector", LoopDetectorNode(settings).as_runnable())
    builder.add_node("tools", ToolsNode(settings).as_runnable())
    builder.add_node("router", RouterNode(settings).as_runnable())
    _add_optional(builder, settings)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", _edge(routes.after_prepare),
                                  [routes.entry, "__end__"])
    builder.add_edge("model", "loop_detector")
    builder.add_conditional_edges("loop_detector", _edge(routes.after_detector),
                                  routes.detector_targets())
    builder.add_edge("tools", routes.entry)  # a stop found by tools ends via model/detector
    builder.add_conditional_edges("router", _edge(routes.after_router), routes.router_targets())
    graph = builder.compile(checkpointer=checkpointer, store=store, name=name or "langgraph-loop")
    return LoopGraph.of(graph).with_config(recursion_limit=default_recursion_limit(settings))
