"""The ``loop_detector`` node: it applies what the engine decided about a reply.

The decision on a reply (the inner limits, the loop-detection layers, budget pressure) is a
pure function of the engine (``graph/engine/detection.py: decide``), computed once, by the
``model`` node right after the reply is recorded. When it acts, the model node keeps it in
``run["decision"]`` (plain values, checkpointed with the reply) and the edge after ``model``
sends the run here; a clean reply goes straight to the tools. This node turns the decision
into a state update (``apply``): warnings go to the deferred-notice queue (never between an
AIMessage and its ToolMessages); blocked calls get their error answers; on a stop every pending
call of the reply gets an error ToolMessage, so the stored thread stays provider-valid whatever
happens next. With ``LoopDetection(ask_human=True)`` a person decides first (``settle``:
``interrupt()``, which must not sit in the retried model node).

Example:
    >>> from langchain_core.messages import AIMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> [m.status for m in stop_answers(ai, {"guard": "limits", "reason": "loop_detected"})]
    ['error']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from langgraph_loop.core import prompts
from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import BLOCKED_KIND, Notice, call_ids, is_cut, queue_notice, work_call_ids
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState, emit
from langgraph_loop.core.stop import Guard, person_stop, stop_answer_text, stop_update
from langgraph_loop.engine.detection import Decision
from langgraph_loop.engine.dialogue import ask, began_at, checkpoint_before, evidence, first_cut, question
from langgraph_loop.engine.limits import PRESSURE_SOURCE

__all__ = ["LoopDetector", "apply", "block_answer", "block_answers", "locate", "settle", "stop_answers"]


def locate(decision: Decision, messages: Sequence[BaseMessage], request_id: Any) -> Decision:
    """A loop stop with where the loop began (the text layer's: the run's first cut reply):
    the reply's message id and the checkpoint before it (``graph/engine/dialogue.py``)."""
    finding, why = decision.finding, decision.guard
    if why is None or (finding is None and why.get("layer") != "text"):
        return decision
    since = finding.since if finding is not None else None
    began = (began_at(messages, request_id, since) if since is not None
             else first_cut(messages, request_id))
    began_id = began.id if began is not None else None
    why = Guard(**{**why, "began": {"response": since, "message_id": began_id},  # type: ignore[typeddict-item]
                   "checkpoint_id": checkpoint_before(get_config(), began_id)})
    return replace(decision, guard=why)


def settle(decision: Decision, state: LoopState, detection: LoopDetection | None) -> Decision:
    """A loop stop with where the loop began (``locate``); with ``ask_human``, what a human
    decides (``interrupt()``; see ``graph/engine/dialogue.py``)."""
    if decision.guard is None or detection is None:
        return decision
    messages = state.get("messages") or []
    request = (state.get("run") or {}).get("request_id")
    decision = locate(decision, messages, request)
    finding, why = decision.finding, decision.guard
    if (why is None or finding is None or not detection.ask_human
            or checkpointer(get_config()) is None):
        return decision
    results = evidence(messages, request, finding, detection)
    action, text = ask(question(why, finding, results))  # validated before it is stored
    if action == "stop":
        return replace(decision, guard={**why, "human": person_stop(text)})
    return Decision(decision.ai, allow=(finding.key, finding.count), hint=text)


def block_answers(ai: AIMessage, blocks: Mapping[str, str]) -> list[ToolMessage]:
    """The error ToolMessages that answer a reply's blocked calls (tagged: not tool results).

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
        >>> [(m.status, m.name) for m in block_answers(ai, {"c1": "Error: not run"})]
        [('error', 'f')]
    """
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [block_answer(i, names.get(i), text) for i, text in blocks.items()]


def block_answer(call_id: str, name: str | None, text: str) -> ToolMessage:
    """The error ToolMessage that answers one blocked call (tagged: not a tool result)."""
    return ToolMessage(text, tool_call_id=call_id, name=name, status="error",
                       additional_kwargs={"langgraph_loop": {"kind": BLOCKED_KIND}})


def stop_answers(ai: AIMessage, why: Guard) -> list[ToolMessage]:
    """One error ToolMessage per call (valid or malformed) of a stopped reply."""
    text = stop_answer_text(why)
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error")
            for i in call_ids(ai)]


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
        decision = settle(Decision.of(ai, record), state, settings.loop_detection)
        update = apply(decision, {**state, "run": run}, settings, runtime)  # type: ignore[typeddict-item]
        update.setdefault("run", run)
        return update


def _queue(notices: list[Notice], decision: Decision, run: dict[str, Any], settings: LoopSettings,
           state: LoopState, runtime: Runtime[Any] | None) -> list[Notice]:
    """Queue the decision's warnings and pressure notice, emitting their events."""
    for warning in decision.warnings:
        notices = queue_notice(notices, run=run["id"], key=f"loop:{warning.key}",
                               text=warning.text, source="loop")
        emit(runtime, {"event": "loop_warning", "layer": warning.layer, "key": warning.key,
                       "calls": list(warning.calls), "count": warning.count, "text": warning.text})
    if decision.hint is not None:
        notices = queue_notice(notices, run=run["id"], key="loop_hint",
                               text=prompts.LOOP_HINT.format(hint=decision.hint), source="human")
    pressure = settings.limits.budget_pressure
    if decision.pressure and pressure is not None:
        run["pressure_queued"] = True
        notices = queue_notice(notices, run=run["id"], key="budget_pressure",
                               text=pressure.instruction, source=PRESSURE_SOURCE)
        emit(runtime, {"event": "budget_pressure", "usage": state.get("usage"),
                       "threshold": pressure.threshold, "limit": settings.limits.token_budget})
    return notices


def apply(decision: Decision, state: LoopState, settings: LoopSettings,
          runtime: Runtime[Any] | None = None) -> dict[str, Any]:
    """The state update that carries out ``decision`` (events go to ``runtime``)."""
    run: dict[str, Any] = dict(state.get("run") or {})
    update: dict[str, Any] = {}
    why = decision.guard
    if why is not None:
        has_calls = bool(work_call_ids(decision.ai, settings.output_tools))  # a structured answer is text
        finalized = None
        if has_calls:
            update["messages"] = stop_answers(decision.ai, why)
        if not has_calls and not is_cut(decision.ai):
            finalized = True  # the reply is already text: no final call needed
        elif not settings.shape.fits(state.get("remaining_steps"), settings.shape.answer_steps):
            finalized = True  # no room left for the final answer call (a cut reply is no answer)
            why = {**why, "final_answer": "skipped: the graph's step limit leaves no room"}
        update.update(stop_update(run, why, finalized=finalized))
        run = update["run"]
    elif decision.blocks:
        update["messages"] = block_answers(decision.ai, decision.blocks)
        emit(runtime, {"event": "loop_block", "call_ids": list(decision.blocks),
                       "texts": list(decision.blocks.values())})
    if decision.allow is not None:
        run = {**run, "loop_allowed": {**(run.get("loop_allowed") or {}),
                                       decision.allow[0]: decision.allow[1]}}
    notices = _queue(list(state.get("pending_notices") or []), decision, run, settings, state,
                     runtime)
    if notices != list(state.get("pending_notices") or []):
        update["pending_notices"] = notices
    if run != state.get("run"):
        update["run"] = run
    return update

