"""Conditional edges: pure functions of state that pick the next node.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> routes = Routes(LoopSettings.build(ScriptedChatModel()))
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> routes.after_detector({"messages": [ai], "run": {}})
    'tools'
    >>> routes.after_detector({"messages": [AIMessage("done")], "run": {}})
    'router'
"""

from __future__ import annotations

from langgraph.graph import END

from langgraph_loop.core.pairing import unanswered_tail
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.nodes.approval import needs_approval
from langgraph_loop.nodes.respond import wants_response

__all__ = ["Routes"]


class Routes:
    """The graph's conditional edges for one configuration."""

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.entry = "compaction" if settings.compaction is not None else "model"
        self.pass_end = "judge" if settings.judge is not None else "router"

    def after_prepare(self, state: LoopState) -> str:
        """Into the loop, unless the recursion limit is too small for even one call."""
        return self.entry if state.get("stop_reason") is None else END

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

    def detector_targets(self) -> list[str]:
        """Every node ``after_detector`` may pick (for the graph picture)."""
        targets = [self.entry, "tools", self.pass_end]
        if self.settings.approval is not None:
            targets.append("approval")
        return sorted(set(targets) | {"router"})
