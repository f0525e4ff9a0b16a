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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Never

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer, RetryPolicy

from langgraph_loop.core.callbacks import (
    FeedbackHook,
    NextMessage,
    PromptFactory,
    ShouldContinue,
    ToolFilter,
)
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
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopInput, LoopOutput, LoopState
from langgraph_loop.nodes.approval import ApprovalNode
from langgraph_loop.nodes.compaction import CompactionNode
from langgraph_loop.nodes.judge import JudgeNode
from langgraph_loop.nodes.loop_detector import loop_detector
from langgraph_loop.nodes.model import ModelNode
from langgraph_loop.nodes.prepare import PrepareNode
from langgraph_loop.nodes.respond import RespondNode
from langgraph_loop.nodes.router import RouterNode
from langgraph_loop.nodes.steps import default_recursion_limit
from langgraph_loop.nodes.tools import ToolsNode
from langgraph_loop.routing import Routes
from langgraph_loop.run_input import LoopGraph
from langgraph_loop.runnables import Inline, inline_node, traced

__all__ = ["create_loop_agent"]

def _edge(route: Callable[[LoopState], str], *, in_context: bool = False) -> Inline:
    """A conditional edge without a callback run of its own (routes are pure and cheap)."""
    return Inline(route, name=route.__name__, in_context=in_context)


def _add_optional(builder: StateGraph[Any, Any, Any, Any], settings: LoopSettings) -> None:
    """Judge, structured final turn, approval and compaction, when configured."""
    if settings.judge is not None:
        builder.add_node("judge", traced(JudgeNode(settings)))
        builder.add_edge("judge", "router")
    if settings.response_format is not None:
        builder.add_node("respond", traced(RespondNode(settings)),
                         retry_policy=RETRY)
        builder.add_edge("respond", END)
    if settings.approval is not None:
        builder.add_node("approval", traced(ApprovalNode(settings)))
        builder.add_edge("approval", "tools")
    if settings.compaction is not None:
        builder.add_node("compaction", traced(CompactionNode(settings)),
                         retry_policy=RETRY)
        builder.add_edge("compaction", "model")


RETRY = RetryPolicy(max_attempts=3, initial_interval=0.5, backoff_factor=2.0)
"""Retries of the nodes that call a model and change nothing before it answers."""


_NOT_SETTINGS = frozenset({"model", "tools", "checkpointer", "store", "name", "unknown"})

DEFAULT_LOOP_DETECTION = LoopDetection()
"""``create_loop_agent``'s default loop detection (pass None to turn it off)."""


def create_loop_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool | Callable[..., Any]] | BaseTool | Callable[..., Any] = (),
    *,
    system_prompt: str | None = None, max_iterations: int | None = 10,
    should_continue: ShouldContinue | None = None, judge: Judge | Mapping[str, Any] | None = None,
    next_message: NextMessage | None = None, record_feedback: FeedbackHook | None = None,
    inject_progress: bool = True, fresh_context: bool = False,
    prompt_factory: PromptFactory | None = None, limits: Limits | Mapping[str, Any] | None = None,
    loop_detection: LoopDetection | Mapping[str, Any] | None = DEFAULT_LOOP_DETECTION,
    stall_detection: StallDetection | Mapping[str, Any] | None = None,
    budget_pressure: BudgetPressure | Mapping[str, Any] | None = None,
    tool_filter: ToolFilter | None = None, approval: Approval | Mapping[str, Any] | None = None,
    compaction: Compaction | Mapping[str, Any] | None = None,
    hooks: Hooks | Mapping[str, Any] | None = None, response_format: Any = None,
    checkpointer: Checkpointer = None, store: BaseStore | None = None, name: str | None = None,
    **unknown: Never,
) -> CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """Build the loop agent as a compiled graph (callbacks may be sync or async).

    Args:
        model: the agent's chat model (any LangChain ``BaseChatModel`` with tools).
        tools: LangChain tools or plain functions; one tool alone counts as a list of one.
        system_prompt: the system prompt of every model call.
        max_iterations: passes per run; None = unbounded, < 1 is a ValueError.
        should_continue: ``(state) -> bool | (bool, feedback)``, asked when a pass ends.
        judge: a second model that decides whether the request is answered. Each
            configuration model may also be given as a dict of its fields.
        next_message: ``(state, feedback) -> str | None``, the next pass's input.
        record_feedback: ``(state, feedback) -> str | None``, a pass's progress entry.
        inject_progress: put the progress log into continuation messages.
        fresh_context: later passes see only the request, progress and the new pass.
        prompt_factory: ``(state) -> str``, builds each pass's prompt.
        limits: model calls per pass, tool calls, token budget, time, final answer.
        loop_detection: ``LoopDetection()`` by default; None turns detection off.
        stall_detection: stop passes that repeat themselves without new work.
        budget_pressure: a finalize-now notice near ``Limits.token_budget``.
        tool_filter: ``(state, tools) -> tools`` offered to a call, enforced at execution.
        approval: tools that need a decision (a resolver or a human) before they run.
        compaction: summarize old messages when a request grows too large.
        hooks: ``on_iteration_start``, ``on_iteration_end``, ``on_tool_call``.
        response_format: a schema for one structured final answer after the loop.
        checkpointer: any LangGraph checkpointer (SQLite, PostgreSQL, in-memory).
        store: a LangGraph store, passed through.
        name: the graph's name (``"langgraph-loop"`` by default).
        **unknown: none are accepted; a misspelled keyword is a ``ValueError``.

    Returns:
        The compiled graph, with a recursion limit that fits the configured limits.

    Raises:
        ValueError: an argument is invalid (the message names it); runs raise it too
            for an input they cannot work on (see ``run_input``).
    """
    options = {k: v for k, v in locals().items() if k not in _NOT_SETTINGS}  # the loop's keywords
    if unknown:
        raise ValueError(f"create_loop_agent: unknown arguments {sorted(unknown)}")
    settings = LoopSettings.build(model, tools, **options)
    graph = _assemble(settings).compile(checkpointer=checkpointer, store=store, name=name or "langgraph-loop")
    return LoopGraph.of(graph).with_config(recursion_limit=default_recursion_limit(settings))


def _assemble(settings: LoopSettings) -> StateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """The graph's nodes and edges for one configuration."""
    routes = Routes(settings)
    builder: StateGraph[LoopState, LoopContext, LoopInput, LoopOutput] = StateGraph(
        LoopState, context_schema=LoopContext, input_schema=LoopInput, output_schema=LoopOutput
    )
    builder.add_node("prepare", traced(PrepareNode(settings)))
    builder.add_node("model", traced(ModelNode(settings)), retry_policy=RETRY)
    builder.add_node("loop_detector", inline_node(loop_detector, settings, name="loop_detector"))
    builder.add_node("tools", traced(ToolsNode(settings)))
    builder.add_node("router", traced(RouterNode(settings)))
    _add_optional(builder, settings)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", _edge(routes.after_prepare),
                                  [routes.entry, "__end__"])
    builder.add_conditional_edges("model", _edge(routes.after_model, in_context=True), routes.model_targets())
    builder.add_conditional_edges("loop_detector", _edge(routes.after_detector),
                                  routes.detector_targets())
    builder.add_edge("tools", routes.entry)  # a stop found by tools ends via model
    builder.add_conditional_edges("router", _edge(routes.after_router), routes.router_targets())
    return builder
