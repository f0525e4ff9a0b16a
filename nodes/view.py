"""The graph's side of the engine: its state read as a ``RunView``, its settings as a ``Policy``.

The engine takes no graph state: the ``model`` node hands it these two frozen records;
``LoopDetectionMiddleware`` fills in the same ones from a ``create_agent`` thread.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage

from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState, executed_calls, iteration_info
from langgraph_loop.engine.decision import Policy, RunView
from langgraph_loop.engine.limits import budget_spent, elapsed, run_budget
from langgraph_loop.nodes.approval import needs_approval

__all__ = ["allowed_in", "policy_of", "run_view"]


def policy_of(settings: LoopSettings) -> Policy:
    """What the engine checks for this graph (or run, with its overrides)."""
    return Policy(detection=settings.loop_detection, limits=settings.limits,
                  max_model_calls=settings.iterations.max_model_calls,
                  pressure=settings.limits.budget_pressure, output_tools=settings.output_tools)


def allowed_in(state: LoopState) -> dict[str, int] | None:
    """The loops a person let go on in the run under way (``state["loop_allowed"]``)."""
    stored = state.get("loop_allowed")
    run = state.get("run") or {}
    return stored["allowed"] if stored and stored["run"] == run.get("request_id") else None


def run_view(state: LoopState, settings: LoopSettings, reply: AIMessage | None = None,
             now: float | None = None) -> RunView:
    """The run as the engine reads it, from the graph's state (``reply``: the new reply,
    for whether the step limit leaves room for the round it asks for)."""
    run = state.get("run") or {}
    remaining = state.get("remaining_steps")
    gated = reply is not None and needs_approval(reply, settings.approval)
    return RunView(
        id=run.get("id"), request_id=run.get("request_id"), allowed=allowed_in(state),
        model_calls=iteration_info(state).get("model_calls", 0), tool_calls=executed_calls(state),
        usage=state.get("usage"), spent=budget_spent(state, settings), budget=run_budget(state, settings),
        pressure_queued=bool(run.get("pressure_queued")),
        elapsed_s=elapsed(state, now),
        remaining_steps=remaining, round_fits=settings.shape.can_continue_round(remaining, gated=gated))
