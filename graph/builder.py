"""``create_loop_agent``: assemble the nodes into a compiled LangGraph graph.

The builder validates the arguments (``core/settings.py``) and wires the nodes and the
conditional edges (``Routes``: pure functions of state) as ``core/shape.py`` lists them;
each node's logic lives in its module under ``nodes/``.

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
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import set_config_context
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime, get_runtime
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
from langgraph_loop.core.messages import unanswered_tail
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopGraph, LoopInput, LoopOutput, LoopState
from langgraph_loop.nodes.approval import ApprovalNode, needs_approval
from langgraph_loop.nodes.compaction import CompactionNode
from langgraph_loop.nodes.judge import JudgeNode
from langgraph_loop.nodes.loop_detector import LoopDetector
from langgraph_loop.nodes.model import ModelNode
from langgraph_loop.nodes.prepare import PrepareNode
from langgraph_loop.nodes.respond import RespondNode, wants_response
from langgraph_loop.nodes.router import RouterNode
from langgraph_loop.nodes.tools import ToolsNode

__all__ = ["Edge", "Routes", "create_loop_agent"]

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
        max_iterations: iterations per run; None = unbounded, < 1 is a ValueError.
        should_continue: ``(state) -> bool | (bool, feedback)``, asked when an iteration ends.
        judge: a second model that decides whether the request is answered. Each
            configuration model may also be given as a dict of its fields.
        next_message: ``(state, feedback) -> str | None``, the next iteration's input.
        record_feedback: ``(state, feedback) -> str | None``, an iteration's progress entry.
        inject_progress: put the progress log into continuation messages.
        fresh_context: later iterations see only the request, progress and the new one.
        prompt_factory: ``(state) -> str``, builds each iteration's prompt.
        limits: model calls per iteration, tool calls, token budget, time, final answer.
        loop_detection: ``LoopDetection()`` by default; None turns detection off.
        stall_detection: stop iterations that repeat themselves without new work.
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
    return LoopGraph.of(graph).with_config(recursion_limit=settings.recursion_limit)


# --- the conditional edges ---------------------------------------------------------------

class Routes:
    """The graph's conditional edges for one configuration.

    Each takes the state and the run's ``runtime`` (its context carries the per-run
    overrides) and returns one of the targets ``core/shape.py`` lists for its edge.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> from langgraph_loop.scripted import ScriptedChatModel
        >>> settings = LoopSettings.build(ScriptedChatModel())
        >>> routes = Routes(settings, LoopDetector(settings))
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1")
        >>> routes.after_model({"messages": [ai], "run": {"id": "r"}}, None)
        'tools'
        >>> routes.after_model({"messages": [AIMessage("done")], "run": {"id": "r"}}, None)
        'router'
        >>> routes.after_model({"messages": [ai], "run": {"id": "r"}, "remaining_steps": 3}, None)
        'loop_detector'
    """

    def __init__(self, settings: LoopSettings, detector: LoopDetector) -> None:
        self.settings = settings
        self.shape = settings.shape
        self.detector = detector

    def after_prepare(self, state: LoopState, runtime: Runtime[Any] | None = None) -> str:
        """Into the loop, unless the recursion limit is too small for even one call."""
        return self.shape.entry if state.get("stop_reason") is None else END

    def after_model(self, state: LoopState, runtime: Runtime[Any] | None) -> str:
        """The loop detector's decision: its node when it acts, else on like ``after_detector``.

        After a stop the model made the final answer (or none fits): the router ends the run.
        """
        if state.get("stop_reason") is not None:
            return "router"
        decision = self.detector.decide(state, self.settings.for_runtime(runtime))
        if decision is not None and decision.acts:
            return "loop_detector"
        return self.after_detector(state)

    def after_detector(self, state: LoopState, runtime: Runtime[Any] | None = None) -> str:
        """Tools (or approval) for a reply with calls; judge/router when the iteration ends."""
        if state.get("stop_reason") is not None:
            if (state.get("run") or {}).get("finalized") or not self.shape.final_answer:
                return "router"
            return self.shape.entry
        messages = state.get("messages") or []
        index, pending = unanswered_tail(messages)
        if pending:
            gated = self.shape.approval and needs_approval(messages[index], self.settings.approval)
            return "approval" if gated else "tools"
        if 0 <= index < len(messages) - 1:
            return self.shape.entry  # the loop detector answered every call (blocked)
        return self.shape.iteration_end

    def after_router(self, state: LoopState, runtime: Runtime[Any] | None) -> str:
        """End the run (after the structured final turn, if any), or start the next iteration."""
        if state.get("stop_reason") is None:
            return self.shape.entry
        if self.shape.respond and wants_response(state, self.settings.for_runtime(runtime)):
            return "respond"
        return END


class Edge(Runnable[LoopState, str]):
    """A conditional edge run inline, without a callback run of its own.

    LangGraph traces a plain function given as an edge; these routes are pure and cheap,
    so they run directly (a traced run shows the nodes only). The route gets the run's
    ``runtime`` (its context carries the per-run overrides).
    """

    def __init__(self, route: Callable[[LoopState, Runtime[Any] | None], str]) -> None:
        self.route = route
        self.name = route.__name__

    def invoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        """``route(state, runtime)``, inside the run's config context."""
        if config is None:
            return self.route(input, None)
        with set_config_context(config) as context:
            return context.run(lambda: self.route(input, get_runtime()))

    async def ainvoke(self, input: LoopState, config: RunnableConfig | None = None,
                      **kwargs: Any) -> str:
        """The same as ``invoke`` (a route does not block)."""
        return self.invoke(input, config)


_NODES: dict[str, Any] = {"prepare": PrepareNode, "model": ModelNode, "tools": ToolsNode,
                         "router": RouterNode, "judge": JudgeNode, "respond": RespondNode,
                         "approval": ApprovalNode, "compaction": CompactionNode}
"""The node classes that call out (models, tools, callbacks): sync and async entry points."""


def _assemble(settings: LoopSettings) -> StateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """The graph's nodes and edges, as ``settings.shape`` lists them."""
    shape = settings.shape
    detector = LoopDetector(settings)
    routes = Routes(settings, detector)
    builder: StateGraph[LoopState, LoopContext, LoopInput, LoopOutput] = StateGraph(
        LoopState, context_schema=LoopContext, input_schema=LoopInput, output_schema=LoopOutput
    )
    for name in shape.nodes:
        if name == "loop_detector":
            builder.add_node(name, detector)
            continue
        node = _NODES[name](settings)
        retry = RETRY if name in ("model", "respond", "compaction") else None
        builder.add_node(name, RunnableLambda(node.invoke, afunc=node.ainvoke, name=name),
                         retry_policy=retry)
    builder.add_edge(START, "prepare")
    builder.add_conditional_edges("prepare", Edge(routes.after_prepare), shape.prepare_targets)
    builder.add_conditional_edges("model", Edge(routes.after_model), shape.model_targets)
    builder.add_conditional_edges("loop_detector", Edge(routes.after_detector),
                                  shape.detector_targets)
    builder.add_conditional_edges("router", Edge(routes.after_router), shape.router_targets)
    for source, target in shape.fixed_edges:
        builder.add_edge(source, target)
    return builder
