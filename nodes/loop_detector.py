"""The loop detector: a pure decision on every model reply, and the node that acts on it.

``LoopDetector.decide(state, settings)`` is a pure function of state: the inner limits
(``nodes/limits.py``), the loop-detection layers (``nodes/detection.py``) and the
budget-pressure threshold. It runs as the conditional edge after ``model``; a clean reply
goes straight to the tools. The ``loop_detector`` node runs only when the decision acts,
and ``apply`` turns it into a state update: warnings go to the deferred-notice queue
(never between an AIMessage and its ToolMessages); on a stop every pending call of the
reply gets an error ToolMessage, so the stored thread stays provider-valid whatever
happens next.

**The detector's state is derived, never checkpointed.** It is a pure function of the
current run's messages (from the run's request on): ``DetectorMemo.state_before`` folds
every reply of the run before the newest one. So a clean round writes no detector bytes.
Deriving it from scratch costs one ``observe`` per reply of the run, so the state after
each reply is remembered in the memo each ``LoopDetector`` owns (one per compiled graph,
bounded to ``MEMO_SIZE`` entries, keyed by run id and reply id, for an equal
``LoopDetection``). A process that has not seen the run (a restart, another worker)
replays the run's transcript and gets the same state. With the memo warm one decision
costs one ``observe``, O(window), whatever the length of the thread.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> [m.status for m in stop_answers(ai, {"guard": "limits", "reason": "loop_detected"})]
    ['error']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from langgraph_loop.core import prompts
from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import BLOCKED_KIND, Notice, call_ids, is_cut, queue_notice, work_call_ids
from langgraph_loop.core.records import emit
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import Guard, stop_answer_text, stop_update
from langgraph_loop.nodes.approval import needs_approval
from langgraph_loop.nodes.detection import Finding, LoopWarning, observe
from langgraph_loop.nodes.detector_state import DetectorState
from langgraph_loop.nodes.limits import PRESSURE_SOURCE, check_limits, pressure_due, tool_errors_guard
from langgraph_loop.nodes.loop_human import (
    began_at,
    checkpoint_before,
    evidence,
    first_cut,
    parse_answer,
    question,
)

__all__ = ["MEMO_SIZE", "Decision", "DetectorMemo", "LoopDetector", "block_answers",
           "results_before", "settle", "stop_answers"]

MEMO_SIZE = 4096
"""Detector states a ``DetectorMemo`` remembers (one per reply; the oldest are dropped)."""


def results_before(messages: Sequence[BaseMessage], index: int) -> list[ToolMessage]:
    """The ToolMessages between the reply at ``index`` and the AIMessage before it.

    Example:
        >>> msgs = [AIMessage("a"), ToolMessage("r", tool_call_id="c"), AIMessage("b")]
        >>> [m.content for m in results_before(msgs, 2)]
        ['r']
    """
    out: list[ToolMessage] = []
    for i in range(index - 1, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            out.append(msg)
        elif isinstance(msg, AIMessage):
            break
    out.reverse()
    return out


class DetectorMemo:
    """Detector states after each reply of a run (a bounded cache of a pure function)."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self._states: OrderedDict[tuple[str, str], tuple[LoopDetection, DetectorState]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, run: Mapping[str, Any], ai: BaseMessage, config: LoopDetection,
                 state: DetectorState) -> None:
        """Remember the detector state after ``ai`` (a reply of the run ``run``)."""
        if run.get("id") is None or ai.id is None:
            return
        key = (str(run["id"]), str(ai.id))
        with self._lock:
            self._states[key] = (config, state)
            self._states.move_to_end(key)
            while len(self._states) > self.size:
                self._states.popitem(last=False)

    def _recall(self, run: Mapping[str, Any], ai: BaseMessage,
                config: LoopDetection) -> DetectorState | None:
        if run.get("id") is None or ai.id is None:
            return None
        with self._lock:
            hit = self._states.get((str(run["id"]), str(ai.id)))
        if hit is None or not (hit[0] is config or hit[0] == config):
            return None
        return hit[1]

    def state_before(self, messages: Sequence[BaseMessage], run: Mapping[str, Any],
                     config: LoopDetection) -> DetectorState:
        """The detector state after every reply of the run before the newest message."""
        prev = _previous_reply(messages, run.get("request_id"))
        if prev is None:
            return {}
        known = self._recall(run, messages[prev], config)
        return known if known is not None else self._replay(messages, run, prev, config)

    def _replay(self, messages: Sequence[BaseMessage], run: Mapping[str, Any], end: int,
                config: LoopDetection) -> DetectorState:
        """Fold every reply of the run up to ``end`` (inclusive), remembering each state."""
        det: DetectorState = {}
        for i in range(_run_start(messages, end, run.get("request_id")), end + 1):
            msg = messages[i]
            if isinstance(msg, AIMessage):
                det = observe(det, msg, results_before(messages, i), config,
                              run.get("loop_allowed")).state
                self.remember(run, msg, config, det)
        return det


def _previous_reply(messages: Sequence[BaseMessage], request_id: Any) -> int | None:
    """Index of the run's reply before the newest message (None: the run has none)."""
    for i in range(len(messages) - 2, -1, -1):
        msg = messages[i]
        if isinstance(msg, AIMessage):
            return i
        if request_id is not None and msg.id == request_id:
            return None
    return None


def _run_start(messages: Sequence[BaseMessage], end: int, request_id: Any) -> int:
    """Index of the run's request (0 when it is no longer in the thread)."""
    for i in range(end, -1, -1):
        if request_id is not None and messages[i].id == request_id:
            return i
    return 0


@dataclass(frozen=True)
class Decision:
    """What the detector concluded about the newest reply.

    ``guard`` stops the run; ``warnings`` are queued; ``blocks`` answer calls (by id)
    with an error instead of running them; ``pressure`` queues the budget-pressure notice;
    ``detector`` is the detection layers' new state (None when detection is off; derived,
    never written to graph state); ``finding`` is the loop finding behind the stop.
    """

    ai: AIMessage
    guard: Guard | None = None
    warnings: tuple[LoopWarning, ...] = ()
    pressure: bool = False
    detector: DetectorState | None = None
    blocks: Mapping[str, str] = field(default_factory=dict)
    finding: Finding | None = None
    allow: tuple[str, int] | None = None
    """A human let the loop go on: its finding key and count (``run["loop_allowed"]``)."""
    hint: str | None = None
    """A human's hint, queued as a notice."""

    @property
    def acts(self) -> bool:
        """Does the ``loop_detector`` node run (a stop, a block, a warning or the notice)?"""
        return (self.guard is not None or bool(self.warnings) or bool(self.blocks)
                or self.pressure)


def settle(decision: Decision, state: LoopState, settings: LoopSettings) -> Decision:
    """A loop stop with where the loop began (the text layer's: the run's first cut reply);
    with ``ask_human``, what a human decides (``interrupt()``; see ``nodes/loop_human.py``)."""
    finding, why, detection = decision.finding, decision.guard, settings.loop_detection
    if why is None or detection is None or (finding is None and why.get("layer") != "text"):
        return decision
    messages = state.get("messages") or []
    request = (state.get("run") or {}).get("request_id")
    since = finding.since if finding is not None else None
    began = began_at(messages, request, since) if since is not None else first_cut(messages, request)
    began_id = began.id if began is not None else None
    config = get_config()
    why = Guard(**{**why, "began": {"response": since, "message_id": began_id},  # type: ignore[typeddict-item]
                   "checkpoint_id": checkpoint_before(config, began_id)})
    if finding is None or not detection.ask_human or checkpointer(config) is None:
        return replace(decision, guard=why)
    results = evidence(messages, request, finding, detection)
    action, hint = parse_answer(interrupt(question(why, finding, results)))
    if action == "stop":
        return replace(decision, guard={**why, "human": {"action": "stop"}})
    return Decision(decision.ai, detector=decision.detector, allow=(finding.key, finding.count),
                    hint=hint)


def block_answers(ai: AIMessage, blocks: Mapping[str, str]) -> list[ToolMessage]:
    """The error ToolMessages that answer a reply's blocked calls (tagged: not tool results).

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
        >>> [(m.status, m.name) for m in block_answers(ai, {"c1": "Error: not run"})]
        [('error', 'f')]
    """
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error",
                        additional_kwargs={"langgraph_loop": {"kind": BLOCKED_KIND}})
            for i, text in blocks.items()]


def stop_answers(ai: AIMessage, why: Guard) -> list[ToolMessage]:
    """One error ToolMessage per call (valid or malformed) of a stopped reply."""
    text = stop_answer_text(why)
    names = {c.get("id"): c.get("name") for c in [*ai.tool_calls, *ai.invalid_tool_calls]}
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error")
            for i in call_ids(ai)]


class LoopDetector:
    """The decision on every reply (``decide``) and the ``loop_detector`` node (``__call__``)."""

    name = "loop_detector"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.memo = DetectorMemo()

    def decide(self, state: LoopState, settings: LoopSettings) -> Decision | None:
        """The decision on the newest reply (None: nothing to judge, the run already stopped)."""
        messages = state.get("messages") or []
        ai = messages[-1] if messages else None
        if state.get("stop_reason") is not None or not isinstance(ai, AIMessage):
            return None
        gated = settings.approval is not None and needs_approval(ai, settings.approval)
        has_calls = bool(work_call_ids(ai, settings.output_tools))  # a structured answer is text
        why = check_limits(state, settings, has_calls=has_calls, gated=gated)
        run = state.get("run") or {}
        if why is None:
            why = tool_errors_guard(messages, run.get("request_id"),
                                    settings.limits.max_tool_errors)
        if why is not None:
            return Decision(ai, guard=why)
        warnings: tuple[LoopWarning, ...] = ()
        detector: DetectorState | None = None
        blocks: Mapping[str, str] = {}
        if settings.loop_detection is not None:
            before = self.memo.state_before(messages, run, settings.loop_detection)
            obs = observe(before, ai, results_before(messages, len(messages) - 1),
                          settings.loop_detection, run.get("loop_allowed"))
            self.memo.remember(run, ai, settings.loop_detection, obs.state)
            if obs.stop is not None:
                return Decision(ai, guard=obs.stop, detector=obs.state, finding=obs.finding)
            detector, warnings, blocks = obs.state, tuple(obs.warnings), obs.blocks
        return Decision(ai, warnings=warnings, pressure=pressure_due(state, settings),
                        detector=detector, blocks=blocks)

    def __call__(self, state: LoopState, runtime: Runtime[Any]) -> dict[str, Any]:
        """The node: ``decide`` as the edge after ``model`` did, then ``apply``.

        The node runs one step after that edge, so it decides with the steps the edge saw
        (one more than its own) and reaches the same decision.
        """
        settings = self.settings.for_runtime(runtime)
        remaining = state.get("remaining_steps")
        seen: LoopState = state if remaining is None else {**state, "remaining_steps": remaining + 1}
        decision = self.decide(seen, settings)
        if decision is None:
            return {}
        return apply(settle(decision, state, settings), state, settings, runtime)


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
    pressure = settings.budget_pressure
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

