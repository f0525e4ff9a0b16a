"""Conditional edges: pure functions of state that pick the next node.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> routes = Routes(LoopSettings.build(ScriptedChatModel()))
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1")
    >>> routes.after_model({"messages": [ai], "run": {"id": "r"}})
    'tools'
    >>> routes.after_model({"messages": [AIMessage("done")], "run": {"id": "r"}})
    'router'
    >>> routes.after_model({"messages": [ai], "run": {"id": "r"}, "remaining_steps": 3})
    'loop_detector'
"""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime, get_runtime

from langgraph_loop.core.pairing import unanswered_tail
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.nodes.approval import needs_approval
from langgraph_loop.nodes.base import settings_for_run
from langgraph_loop.nodes.loop_detector import decide
from langgraph_loop.nodes.respond import wants_response

__all__ = ["Routes"]


def _runtime() -> Runtime[LoopContext] | None:
    """The running graph's runtime (None when a route is called outside a graph)."""
    try:
        return get_runtime()
    except RuntimeError:
        return None


class Routes:
    """The graph's conditional edges for one configuration."""

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.entry = "compaction" if settings.compaction is not None else "model"
        self.pass_end = "judge" if settings.judge is not None else "router"

    def after_prepare(self, state: LoopState) -> str:
        """Into the loop, unless the recursion limit is too small for even one call."""
        return self.entry if state.get("stop_reason") is None else END

    def after_model(self, state: LoopState) -> str:
        """The loop detector's decision: its node when it acts, else on like ``after_detector``.

        After a stop the model made the final answer (or none fits): the router ends the run.
        """
        if state.get("stop_reason") is not None:
            return "router"
        decision = decide(state, settings_for_run(self.settings, _runtime()))
        if decision is not None and decision.acts:
            return "loop_detector"
        return self.after_detector(state)

    def after_detector(self, state: LoopState) -> str:
        """Tools (or approval) for a reply with calls; judge/router when the pass ends."""
        run = state.get("run") or {}
        if state.get("stop_reason") is not None:
            if run.get("finalized") or not self.settings.limits.final_answer:
                return "router"
            return self.entry
        messages = state.get("messages") or []
        _, pending = unanswered_tail(messages)
        if pending:
            gated = needs_approval(messages[-1], self.settings.approval)
            return "approval" if gated else "tools"
        return self.pass_end

    def after_router(self, state: LoopState) -> str:
        """End the run (after the structured final turn, if any), or start the next pass."""
        if state.get("stop_reason") is None:
            return self.entry
        if self.settings.response_format is not None and wants_response(state):
            return "respond"
        return END

    def router_targets(self) -> list[str]:
        """Every node ``after_router`` may pick (for the graph picture)."""
        extra = ["respond"] if self.settings.response_format is not None else []
        return [self.entry, *extra, END]

    def model_targets(self) -> list[str]:
        """Every node ``after_model`` may pick (for the graph picture)."""
        targets = {"loop_detector", "tools", "router", self.pass_end}
        if self.settings.approval is not None:
            targets.add("approval")
        return sorted(targets)

    def detector_targets(self) -> list[str]:
        """Every node ``after_detector`` may pick (for the graph picture)."""
        targets = [self.entry, "tools", self.pass_end]
        if self.settings.approval is not None:
            targets.append("approval")
        return sorted(set(targets) | {"router"})
