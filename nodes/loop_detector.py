"""The ``loop_detector`` node: the graph applies what the engine decided about a reply.

The model node computes the engine's decision on a reply once (``engine/decision.py: decide``)
and keeps it in ``run["decision"]``; the edge sends an acting decision here. ``apply`` maps its
effects onto the graph's state: answers right after the reply (the thread stays
provider-valid), notices to the queue, events, the stop (``stop_update``). With ``ask_human`` a
person decides first (``interrupt()``, which must not sit in the retried model node).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.messages import is_cut, work_call_ids
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopAllowed, LoopState, emit
from langgraph_loop.core.stop import stop_update
from langgraph_loop.engine.decision import Decision
from langgraph_loop.engine.dialogue import ask
from langgraph_loop.nodes.view import allowed_in, run_view

__all__ = ["LoopDetector", "apply", "settle"]


def settle(decision: Decision, state: LoopState, settings: LoopSettings) -> Decision:
    """A loop stop with where the loop began; with ``ask_human``, what a person decides."""
    detection = settings.loop_detection
    if decision.guard is None or detection is None:
        return decision
    messages = state.get("messages") or []
    request = (state.get("run") or {}).get("request_id")
    config = get_config()
    decision = decision.located(messages, request, config)
    if not decision.asks(detection, checkpointer(config) is not None):
        return decision
    return decision.settled(messages, request, detection, ask)


class LoopDetector:
    """The ``loop_detector`` node: applies the decision the model node kept in the run."""

    name = "loop_detector"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def __call__(self, state: LoopState, runtime: Runtime[Any]) -> dict[str, Any]:
        """``settle`` then ``apply`` the newest reply's decision; it leaves the run."""
        messages = state.get("messages") or []
        run: dict[str, Any] = dict(state.get("run") or {})
        record = run.pop("decision", None)
        ai = messages[-1] if messages else None
        if record is None or not isinstance(ai, AIMessage):
            return {"run": run} if "decision" in (state.get("run") or {}) else {}
        settings = self.settings.for_runtime(runtime)
        decision = settle(Decision.of(ai, record), state, settings)
        update = apply(decision, state, settings, runtime, run=run)
        update.setdefault("run", run)
        return update


def apply(decision: Decision, state: LoopState, settings: LoopSettings,
          runtime: Runtime[Any] | None = None, *, run: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state update that carries out ``decision`` (its events go to ``runtime``; ``run``:
    the run as it stands, when not ``state["run"]``)."""
    run = dict(state.get("run") or {}) if run is None else dict(run)
    before = dict(run)
    update: dict[str, Any] = {}
    answers = decision.answers(settings.output_tools)
    if answers:
        update["messages"] = answers
    why = decision.guard
    if why is not None:
        has_calls = bool(work_call_ids(decision.ai, settings.output_tools))  # a structured answer is text
        finalized = None
        if not has_calls and not is_cut(decision.ai):
            finalized = True  # the reply is already text: no final call needed
        elif not settings.shape.fits(state.get("remaining_steps"), settings.shape.answer_steps):
            finalized = True  # no room left for the final answer call (a cut reply is no answer)
            why = {**why, "final_answer": "skipped: the graph's step limit leaves no room"}
        update.update(stop_update(run, why, finalized=finalized))
        run = update["run"]
    if decision.allow is not None:
        update["loop_allowed"] = LoopAllowed(run=run.get("request_id"),
                                             allowed=decision.allowed(allowed_in(state)) or {})
    pressure = settings.limits.budget_pressure
    if decision.pressure and pressure is not None:
        run["pressure_queued"] = True
    queue = list(state.get("loop_notices") or [])
    notices = decision.notices(str(run.get("id")), queue, pressure)
    if notices != queue:
        update["loop_notices"] = notices
    for event in decision.events(run_view(state, settings), pressure):
        emit(runtime, event)
    if run != before:
        update["run"] = run
    return update
