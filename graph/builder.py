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
from typing import Any, Never, TypeAlias, TypeVar

from langchain.agents.middleware.types import AgentMiddleware
from langchain.agents.structured_output import StructuredOutputError
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.cache.base import BaseCache
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer, RetryPolicy

from langgraph_loop.core.compat import node_trace_policy
from langgraph_loop.core.config import Approval, Compaction, Hooks, Iterations, Limits, LoopDetection
from langgraph_loop.core.history import LoopGraph
from langgraph_loop.core.hosting import NODE_HOOKS
from langgraph_loop.core.messages import is_blocked, is_cut, is_notice, is_redirect, newest_reply
from langgraph_loop.core.models import ChatRunnable
from langgraph_loop.core.removed import removed_keyword
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopInput, LoopOutput, LoopState
from langgraph_loop.core.streams import TransformerFactory, stream_transformers
from langgraph_loop.nodes.approval import ApprovalNode, needs_approval
from langgraph_loop.nodes.compaction import CompactionNode
from langgraph_loop.nodes.hosted import HookNode, merged_schemas, middleware_end
from langgraph_loop.nodes.judge import JudgeNode
from langgraph_loop.nodes.loop_detector import LoopDetector
from langgraph_loop.nodes.model import ModelNode
from langgraph_loop.nodes.prepare import PrepareNode
from langgraph_loop.nodes.respond import RespondNode, structured_due
from langgraph_loop.nodes.router import RouterNode
from langgraph_loop.nodes.tools import ToolsNode

__all__ = ["Edge", "Routes", "create_loop_agent", "retryable"]

_LANGGRAPH_RETRY_ON = RetryPolicy().retry_on


def retryable(exc: BaseException) -> bool:
    """Whether sending the same request again may succeed, as the exception says itself:
    langchain-core's ``ModelError.is_retryable``, else the HTTP status a provider SDK
    attaches (408, 409, 429 and 5xx, as the openai SDK retries), else LangGraph's default."""
    if isinstance(exc, StructuredOutputError | InvalidUpdateError):
        return False  # the same reply parses the same way; a state conflict repeats
    flag = getattr(exc, "is_retryable", None)
    if isinstance(flag, bool):
        return flag
    status = getattr(exc, "status_code", None) or getattr(getattr(exc, "response", None),
                                                          "status_code", None)
    if isinstance(status, int):
        return status in (408, 409, 429) or status >= 500
    return bool(_LANGGRAPH_RETRY_ON(exc))  # type: ignore[operator, arg-type]


RETRY = RetryPolicy(max_attempts=3, initial_interval=0.5, backoff_factor=2.0, retry_on=retryable)
"""Retries of the nodes that call a model and change nothing before it answers."""

C = TypeVar("C")
Configured: TypeAlias = C | Mapping[str, Any] | None

_NOT_SETTINGS = frozenset({"model", "tools", "checkpointer", "store", "removed", "interrupt_before",
                           "interrupt_after", "debug", "cache", "transformers"})


DEFAULT_LOOP_DETECTION = LoopDetection()
"""``create_loop_agent``'s default loop detection (pass None to turn it off)."""


def create_loop_agent(
    model: ChatRunnable | str,
    tools: Sequence[BaseTool | Callable[..., Any] | dict[str, Any]] | BaseTool | Callable[..., Any]
    | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    iterations: Configured[Iterations] = None,
    limits: Configured[Limits] = None,
    loop_detection: Configured[LoopDetection] = DEFAULT_LOOP_DETECTION,
    approval: Configured[Approval] = None,
    compaction: Configured[Compaction] = None,
    hooks: Configured[Hooks] = None,
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    response_format: Any = None,
    state_schema: type[Any] | None = None,
    context_schema: type[Any] | None = None,
    handle_tool_errors: Any = None,
    checkpointer: Checkpointer = None,
    store: BaseStore | None = None,
    interrupt_before: list[str] | None = None,
    interrupt_after: list[str] | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: BaseCache[Any] | None = None,
    transformers: Sequence[TransformerFactory] | None = None,
    show_notices: bool = False,
    **removed: Never,
) -> CompiledStateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """Build the loop agent as a compiled graph whose recursion limit fits the configured limits.
    The arguments: README, "Configuration reference"; beyond it: ``middleware`` runs LangChain
    ``AgentMiddleware`` with ``create_agent``'s semantics (``nodes/hosted.py``);
    ``interrupt_before``, ``interrupt_after``, ``debug``, ``cache`` go to ``StateGraph.compile``
    (node names: ``core/shape.py``); ``transformers`` follow those ``create_agent`` registers
    (``core/streams.py``); ``show_notices=True`` gives the loop's notices plain ids instead of
    ``do-not-render-`` ones, which chat UIs keep out of view. A configuration model may be a
    dict of its fields.

    Raises:
        TypeError: a keyword it does not take (0.2's name the group that replaced them).
        ValueError: an argument is invalid (the message names it).
    """
    options = {k: v for k, v in locals().items() if k not in _NOT_SETTINGS}  # the loop's keywords
    if removed:
        raise removed_keyword(removed)
    settings = LoopSettings.build(model, tools, **options)
    graph = _assemble(settings).compile(checkpointer=checkpointer, store=store, name=name or "langgraph-loop",
                            interrupt_before=interrupt_before, interrupt_after=interrupt_after,
                            debug=debug, cache=cache,
                            transformers=stream_transformers(settings.middleware, transformers))
    metadata = {"lc_agent_name": name} if name else {}
    return LoopGraph.of(graph, settings.overrides).with_config(
        recursion_limit=settings.recursion_limit, metadata=metadata)


class Routes:
    """The conditional edges: each reads the state and returns a target ``core/shape.py`` lists."""

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.shape = settings.shape

    def after_prepare(self, state: LoopState) -> str:
        """Into the loop, unless the recursion limit is too small for even one call."""
        return self.shape.start if state.get("stop_reason") is None else END

    def after_model(self, state: LoopState) -> str:
        """The ``loop_detector`` node when the model node kept a decision that acts, else on
        like ``after_detector``; after a stop (the final answer made), the router."""
        if state.get("stop_reason") is not None:
            return self._respond_or("router", state)
        if "decision" in (state.get("run") or {}):
            return "loop_detector"
        return self._respond_or(self._after_reply(state), state)

    def after_call(self, state: LoopState) -> str:
        """After ``model``: a person's words it wrote (no call) go through the hooks (``entry``) first."""
        messages = state.get("messages") or []
        words = bool(messages) and (is_redirect(messages[-1]) or is_notice(messages[-1]))
        if state.get("stop_reason") is None and words:
            return self.shape.entry
        return self.shape.after_model[0] if self.shape.after_model else self.after_model(state)

    def after_detector(self, state: LoopState) -> str:
        """After a stop: the final-answer call (if due), then ``respond`` or the router; else on."""
        if state.get("stop_reason") is not None:
            if (state.get("run") or {}).get("finalized") or not self.shape.final_answer:
                return self._respond_or("router", state)
            return self.shape.entry
        return self._respond_or(self._after_reply(state), state)

    def _after_reply(self, state: LoopState) -> str:
        """Tools (or approval) while calls of the newest reply are unanswered, the model again
        after a reply cut while it streamed, else the end of the iteration."""
        messages = state.get("messages") or []
        if messages and is_cut(messages[-1]):
            return self.shape.entry  # its text looped: asked again, with the detector's notice
        index, ai, pending = newest_reply(messages)
        if pending:
            gated = self.shape.approval and needs_approval(ai, self.settings.approval)
            return "approval" if gated else "tools"
        if 0 <= index < len(messages) - 1 and all(is_blocked(m) for m in messages[index + 1:]):
            return self.shape.entry  # the loop detector answered every call (blocked)
        return self.shape.iteration_end

    def _respond_or(self, target: str, state: LoopState) -> str:
        """``respond`` when the newest reply carries the structured answer, else ``target``."""
        return "respond" if self.shape.respond and structured_due(state, self.settings.structured) else target

    def after_respond(self, state: LoopState) -> str:
        """After a structured answer: the reply's other calls, the model again when the answer
        did not parse, else the iteration's end (the router after a stop)."""
        if state.get("stop_reason") is not None:
            return "router"
        target = self._after_reply(state)
        if target == self.shape.iteration_end and state.get("structured_response") is None:
            return self.shape.entry
        return target

    def after_tools(self, state: LoopState) -> str:
        """The model again; the iteration's end when the reply whose calls ran also gave the
        structured answer (``create_agent`` ends there too)."""
        messages = state.get("messages") or []
        index = newest_reply(messages).at
        if state.get("stop_reason") is None and index >= 0 and any(
                isinstance(m, ToolMessage) and m.name in self.settings.output_tools and m.status != "error"
                for m in messages[index + 1:]):
            return self.shape.iteration_end
        return self.shape.entry

    def after_router(self, state: LoopState) -> str:
        """End the run (through the ``after_agent`` hooks), or start the next iteration."""
        return self.shape.entry if state.get("stop_reason") is None else self.shape.exit

    def jumped(self, node: str, state: Mapping[str, Any]) -> str | None:
        """Where a middleware hook node's ``jump_to`` leads (None: no jump), as
        ``core/shape.py`` maps it; a jump to the tools passes approval for gated calls."""
        jump = state.get("jump_to")  # AgentState's, in a graph with middleware hook nodes
        if not jump or jump not in dict(self.shape.jumps).get(node, ()):
            return None
        target = self.shape.jump_target(node, jump)
        if target == "tools":
            _, ai, pending = newest_reply(state.get("messages") or [])
            if pending and self.shape.approval and needs_approval(ai, self.settings.approval):
                return "approval"
        return target

    def after_hook(self, node: str, default: str) -> Callable[[LoopState], str]:
        """The edge after a middleware hook node: its jump, else ``default``."""
        def after(state: LoopState) -> str:
            return self.jumped(node, state) or default
        after.__name__ = f"after_{node}"
        return after

    def after_reply(self, state: LoopState) -> str:
        """After the last ``after_model`` hook: its jump, else ``after_model``."""
        return self.jumped(self.shape.reply_node, state) or self.after_model(state)


class Edge(Runnable[LoopState, str]):
    """A conditional edge run inline: LangGraph traces a plain function given as an edge, and
    these routes only read state (a traced run shows the nodes only)."""

    def __init__(self, route: Callable[[LoopState], str]) -> None:
        self.route = route
        self.name = route.__name__

    def invoke(self, input: LoopState, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return self.route(input)

    async def ainvoke(self, input: LoopState, config: RunnableConfig | None = None,
                      **kwargs: Any) -> str:
        return self.route(input)  # a route does not block


_NODES: dict[str, Any] = {"prepare": PrepareNode, "model": ModelNode, "tools": ToolsNode,
                         "router": RouterNode, "judge": JudgeNode, "approval": ApprovalNode,
                         "compaction": CompactionNode, "loop_detector": LoopDetector,
                         "respond": RespondNode}
"""Each node's class, built from the settings. Those that call out (models, tools, callbacks) are
Runnables LangGraph calls directly, sync or async (no wrapper, no callback run of their own)."""


def _assemble(settings: LoopSettings) -> StateGraph[LoopState, LoopContext, LoopInput, LoopOutput]:
    """The graph's nodes and edges, as ``settings.shape`` lists them."""
    shape = settings.shape
    routes = Routes(settings)
    state, given, output = merged_schemas(settings, LoopInput, LoopOutput)
    builder: StateGraph[LoopState, LoopContext, LoopInput, LoopOutput] = StateGraph(
        state, context_schema=settings.context_schema or LoopContext,
        input_schema=given, output_schema=output,
    )
    hooks = {f"{m.name}.{hook}": HookNode(m, hook) for hook in NODE_HOOKS
             for m in settings.hooked(hook)}
    for name in shape.nodes:
        if name in hooks:  # the user's middleware hooks, traced as their trace_policy says
            builder.add_node(name, hooks[name], trace_policy=node_trace_policy(
                hooks[name].middleware.trace_policy))
        elif name == "middleware_end":
            builder.add_node(name, middleware_end)
        else:  # the user's wrap_model_call middleware own the model call's retries
            retried = name == "compaction" or (name == "model" and not settings.hooked("wrap_model_call"))
            builder.add_node(name, _NODES[name](settings), retry_policy=RETRY if retried else None)
    builder.add_edge(START, "prepare")
    # into the loop, or the end when not even one model call fits the recursion limit
    builder.add_conditional_edges("prepare", Edge(routes.after_prepare), shape.prepare_targets)
    # a person's words the model wrote: the hooks first; a reply: tools, the detector, respond, the end
    if shape.after_model:
        builder.add_conditional_edges("model", Edge(routes.after_call), [shape.after_model[0], shape.entry])
        builder.add_conditional_edges(shape.reply_node, Edge(routes.after_reply), shape.model_targets)
    else:
        builder.add_conditional_edges("model", Edge(routes.after_call),
                                      sorted({*shape.model_targets, shape.entry}))
    # the detector applied a decision: on to the tools, the final answer, or the end
    builder.add_conditional_edges("loop_detector", Edge(routes.after_detector),
                                  shape.detector_targets)
    if shape.respond:  # a structured answer read: its other calls, the model again, or the end
        builder.add_conditional_edges("respond", Edge(routes.after_respond), shape.respond_targets)
    # the next iteration, or the end (through the after_agent hooks)
    builder.add_conditional_edges("router", Edge(routes.after_router), shape.router_targets)
    if shape.respond:  # after the tools: the model again, or the end of an answered iteration
        builder.add_conditional_edges("tools", Edge(routes.after_tools),
                                      sorted({shape.entry, shape.iteration_end}))
    for source, target in shape.fixed_edges:
        builder.add_edge(source, target)
    for node, default, targets in shape.hook_edges:
        if targets == [default]:
            builder.add_edge(node, default)
        else:
            builder.add_conditional_edges(node, Edge(routes.after_hook(node, default)), targets)
    return builder
