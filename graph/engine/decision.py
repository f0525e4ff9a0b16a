"""The decision on a reply, and its effects: what both front doors carry out.

``decide(reply, transcript, view, policy)`` is the engine's one entry point (docs/architecture.md,
"One engine, two front doors"): ``None`` for a clean reply, or a ``Decision`` whose effects are
written here once and mapped by each door onto its own state. ``DetectorMemo`` keeps the
detector's state after each reply, so a decision costs one ``observe`` whatever the thread's
length; a process that has not seen the run replays it and gets the same state.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> ask = lambda i: AIMessage("", id=f"a{i}", tool_calls=[{"name": "status", "args": {}, "id": f"c{i}"}])
    >>> transcript, memo = [HumanMessage("done yet?", id="h")], DetectorMemo()
    >>> view, policy = RunView(id="r", request_id="h"), Policy(detection=LoopDetection())
    >>> for i in range(4):
    ...     decision = decide(ask(i), transcript, view, policy, memo)
    ...     transcript += [ask(i), ToolMessage("pending", tool_call_id=f"c{i}")]
    >>> decision.guard["reason"], [m.status for m in decision.answers()]
    ('loop_detected', ['error'])
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from langgraph_loop.core import prompts
from langgraph_loop.core.config import BudgetPressure, Limits, LoopDetection
from langgraph_loop.core.messages import (
    Notice,
    block_answer,
    call_ids,
    call_names,
    queue_notice,
    work_call_ids,
)
from langgraph_loop.core.state import BudgetPressureEvent, Event, LoopBlockEvent, LoopWarningEvent, Usage
from langgraph_loop.core.stop import Guard, StopReason, limit_guard, person_stop, stop_answer_text
from langgraph_loop.engine.detection import DetectorState, Finding, LoopWarning, observe
from langgraph_loop.engine.dialogue import began_at, checkpoint_before, evidence, first_cut, question
from langgraph_loop.engine.limits import PRESSURE_SOURCE, tool_errors_guard

__all__ = ["MEMO_SIZE", "Decision", "DecisionRecord", "DetectorMemo", "Policy", "RunView",
           "block_answers", "decide", "limit_stop", "results_before", "stop_answers"]


# --- what the engine reads ---------------------------------------------------------------------

@dataclass(frozen=True)
class RunView:
    """What the engine reads about a run besides its transcript; each door fills it in from its
    own state (the graph from ``LoopState``, the middleware from the agent's state)."""

    id: str | None = None  # the run's id (keys the memo)
    request_id: str | None = None  # the message that started the run (the detector's window starts there)
    allowed: Mapping[str, int] | None = None  # loops a person let go on: finding key → the count allowed
    model_calls: int = 0  # model calls in this iteration, the reply's included
    tool_calls: int = 0  # tool calls that ran in this run
    usage: Usage | None = None  # the run's token usage (what the budget-pressure event reports)
    spent: int = 0  # tokens the budget counts (the run's, or the thread's with a per-thread budget)
    budget: int | None = None  # the token budget, with what a person granted at a check-in (None: no budget)
    pressure_queued: bool = False  # the budget-pressure notice was queued in this run already
    elapsed_s: float | None = None  # seconds since the run started (None: not known)
    remaining_steps: int | None = None  # graph steps left under LangGraph's recursion limit (None: not known)
    round_fits: bool = True  # another tool round, and the steps to finish after it, fit the step limit


@dataclass(frozen=True)
class Policy:
    """What the engine checks: the loop layers, the inner limits and budget pressure."""

    detection: LoopDetection | None = None  # the loop layers (None: off)
    limits: Limits | None = None  # the run's limits (None: none: the middleware checks only the layers)
    max_model_calls: int | None = None  # model calls allowed per iteration (``Iterations.max_model_calls``)
    pressure: BudgetPressure | None = None  # a notice once the run has spent ``threshold`` of its budget
    output_tools: frozenset[str] = frozenset()  # structured-output tools: calling only these is an answer


def limit_stop(reply: AIMessage, transcript: Sequence[BaseMessage], view: RunView,
               policy: Policy) -> Guard | None:
    """The first inner limit the reply hits, or None (checked after every model call)."""
    limits = policy.limits
    if view.budget is not None and view.spent > view.budget:
        return limit_guard(StopReason.TOKEN_BUDGET, view.budget, view.spent)
    cap = limits.max_duration_s if limits is not None else None
    if cap is not None and view.elapsed_s is not None and view.elapsed_s >= cap:
        return limit_guard(StopReason.TIMEOUT, cap, round(view.elapsed_s, 3))
    if work_call_ids(reply, policy.output_tools):  # a structured answer is text
        max_tools = limits.max_tool_calls if limits is not None else None
        if policy.max_model_calls is not None and view.model_calls >= policy.max_model_calls:
            return limit_guard(StopReason.MAX_MODEL_CALLS, policy.max_model_calls, view.model_calls)
        if max_tools is not None and view.tool_calls >= max_tools:
            return limit_guard(StopReason.MAX_TOOL_CALLS, max_tools, view.tool_calls)
        if not view.round_fits:
            return limit_guard(StopReason.STEP_LIMIT, "recursion_limit", view.remaining_steps)
    return tool_errors_guard(reply, transcript, len(transcript), view.request_id,
                             limits.max_tool_errors if limits is not None else None)


# --- the detector's state before a reply ------------------------------------------------------

MEMO_SIZE = 4096  # detector states a ``DetectorMemo`` remembers (one per reply; the oldest are dropped)


def results_before(messages: Sequence[BaseMessage], end: int) -> list[ToolMessage]:
    """The results of the round before a reply at ``end`` (the ToolMessages after the last AIMessage)."""
    out: list[ToolMessage] = []
    for i in range(end - 1, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            out.append(msg)
        elif isinstance(msg, AIMessage):
            break
    out.reverse()
    return out


class DetectorMemo:
    """Detector states after each reply of a run (a bounded cache of a pure function). An entry
    is used only for the reply object it was computed after: a thread edited by id is read back
    as new objects, so the run is replayed as it reads then."""

    def __init__(self) -> None:
        self._states: OrderedDict[tuple[str, str],
                                  tuple[LoopDetection, DetectorState, BaseMessage]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, run_id: str | None, ai: BaseMessage, config: LoopDetection,
                 state: DetectorState) -> None:
        if run_id is None or ai.id is None:
            return
        key = (str(run_id), str(ai.id))
        with self._lock:
            if key in self._states:
                self._states.move_to_end(key)
            self._states[key] = (config, state, ai)
            while len(self._states) > MEMO_SIZE:
                self._states.popitem(last=False)

    def state_before(self, messages: Sequence[BaseMessage], view: RunView,
                     config: LoopDetection) -> DetectorState:
        """The detector state after every reply of the run in ``messages``."""
        prev = None
        for i in range(len(messages) - 1, -1, -1):  # the run's newest reply
            msg = messages[i]
            if isinstance(msg, AIMessage):
                prev = i
                break
            if view.request_id is not None and msg.id == view.request_id:
                return {}
        if prev is None:
            return {}
        if view.id is not None and messages[prev].id is not None:
            with self._lock:
                hit = self._states.get((str(view.id), str(messages[prev].id)))
            if hit is not None and hit[2] is messages[prev] and (hit[0] is config or hit[0] == config):
                return hit[1]
        return self._replay(messages, view, prev, config)

    def _replay(self, messages: Sequence[BaseMessage], view: RunView, last: int,
                config: LoopDetection) -> DetectorState:
        """Fold every reply of the run up to ``last`` (inclusive), remembering each state."""
        start = next((i for i in range(last, -1, -1)
                      if view.request_id is not None and messages[i].id == view.request_id), 0)
        det: DetectorState = {}
        for i in range(start, last + 1):
            msg = messages[i]
            if isinstance(msg, AIMessage):
                det = observe(det, msg, results_before(messages, i), config, view.allowed).state
                self.remember(view.id, msg, config, det)
        return det


# --- the decision and its effects -------------------------------------------------------------

class DecisionRecord(TypedDict, total=False):
    """A decision that acts, as plain values a door keeps (checkpointed) until the step applying it."""

    guard: Guard
    warnings: list[dict[str, Any]]
    blocks: dict[str, str]
    pressure: bool
    finding: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    """What the engine concluded about the newest reply: ``guard`` stops the run, ``warnings``
    are queued, ``blocks`` (call id → error text) answer calls instead of running them,
    ``pressure`` queues the budget-pressure notice, ``finding`` is behind a loop stop."""

    ai: AIMessage
    guard: Guard | None = None
    warnings: tuple[LoopWarning, ...] = ()
    pressure: bool = False
    blocks: Mapping[str, str] = field(default_factory=dict)
    finding: Finding | None = None
    allow: tuple[str, int] | None = None  # a person let the loop go on: its finding key and count
    hint: str | None = None  # a person's hint, queued as a notice

    def record(self) -> DecisionRecord:
        """The decision as plain values."""
        out = DecisionRecord()
        if self.guard is not None:
            out["guard"] = self.guard
        if self.warnings:
            out["warnings"] = [asdict(w) for w in self.warnings]
        if self.blocks:
            out["blocks"] = dict(self.blocks)
        if self.pressure:
            out["pressure"] = True
        if self.finding is not None:
            out["finding"] = asdict(self.finding)
        return out

    @classmethod
    def of(cls, ai: AIMessage, record: Mapping[str, Any]) -> Decision:
        """The decision ``record`` keeps, about the reply ``ai``."""
        found: dict[str, Any] | None = record.get("finding")
        if found is not None:
            found = {k: tuple(v) if isinstance(v, list) else v for k, v in found.items()}
        return cls(ai, guard=record.get("guard"),
                   warnings=tuple(LoopWarning(**{**w, "calls": tuple(w["calls"])})
                                  for w in record.get("warnings") or ()),
                   pressure=bool(record.get("pressure")), blocks=dict(record.get("blocks") or {}),
                   finding=None if found is None else Finding(**found))

    # --- effects ---------------------------------------------------------------------------
    def answers(self, output_tools: frozenset[str] = frozenset()) -> list[ToolMessage]:
        """The answers to calls that do not run: a stopped reply's (if it asked for work), a block's."""
        if self.guard is not None:
            return stop_answers(self.ai, self.guard) if work_call_ids(self.ai, output_tools) else []
        return block_answers(self.ai, self.blocks)

    def notices(self, run: str, queue: Sequence[Notice] = (),
                pressure: BudgetPressure | None = None) -> list[Notice]:
        """The deferred-notice queue with the decision's notices added: its warnings, a
        person's hint, the budget-pressure notice (``pressure``: its instruction)."""
        out = list(queue)
        for warning in self.warnings:
            out = queue_notice(out, run=run, key=f"loop:{warning.key}", text=warning.text, source="loop")
        if self.hint is not None:
            out = queue_notice(out, run=run, key="loop_hint",
                               text=prompts.LOOP_HINT.format(hint=self.hint), source="human")
        if self.pressure and pressure is not None:
            out = queue_notice(out, run=run, key="budget_pressure", text=pressure.instruction,
                               source=PRESSURE_SOURCE)
        return out

    def events(self, view: RunView = RunView(), pressure: BudgetPressure | None = None) -> list[Event]:
        """The events to emit: the block, one per warning, the budget pressure."""
        out: list[Event] = []
        if self.blocks and self.guard is None:
            out.append(LoopBlockEvent(event="loop_block", call_ids=list(self.blocks),
                                      texts=list(self.blocks.values())))
        out += [LoopWarningEvent(event="loop_warning", layer=w.layer, key=w.key, calls=list(w.calls),
                                 count=w.count, text=w.text) for w in self.warnings]
        if self.pressure and pressure is not None:
            out.append(BudgetPressureEvent(event="budget_pressure", usage=view.usage,
                                           threshold=pressure.threshold, limit=view.budget))
        return out

    def allowed(self, allowed: Mapping[str, int] | None) -> dict[str, int] | None:
        """The loops a person let go on in this run, with this decision's (if any)."""
        if self.allow is None:
            return dict(allowed) if allowed is not None else None
        return {**(allowed or {}), self.allow[0]: self.allow[1]}

    def located(self, transcript: Sequence[BaseMessage], request_id: Any,
                config: RunnableConfig | None) -> Decision:
        """A loop stop with where the loop began (the text layer's: the run's first cut
        reply): the reply's message id and the checkpoint before it, to fork from."""
        finding, why = self.finding, self.guard
        if why is None or (finding is None and why.get("layer") != "text"):
            return self
        since = finding.since if finding is not None else None
        began = (began_at(transcript, request_id, since) if since is not None
                 else first_cut(transcript, request_id))
        began_id = began.id if began is not None else None
        located: Guard = {**why, "began": {"response": since, "message_id": began_id},
                          "checkpoint_id": checkpoint_before(config, began_id)}
        return replace(self, guard=located)

    def asks(self, detection: LoopDetection | None, durable: bool) -> bool:
        """Does this stop go to a person first (``ask_human``, on a thread that can pause)?"""
        return (self.guard is not None and self.finding is not None and detection is not None
                and detection.ask_human and durable)

    def settled(self, transcript: Sequence[BaseMessage], request_id: Any, detection: LoopDetection,
                ask: Callable[[Any], tuple[str, str | None]]) -> Decision:
        """What a person decided at the loop question (``ask``: ``engine/dialogue.py: ask``):
        stop (with their reason), or go on (the loop allowed, their hint queued)."""
        finding, why = self.finding, self.guard
        assert finding is not None and why is not None, "only a loop stop is asked about"
        action, text = ask(question(why, finding, evidence(transcript, request_id, finding, detection)))
        if action == "stop":
            return Decision(self.ai, guard={**why, "human": person_stop(text)})
        return Decision(self.ai, allow=(finding.key, finding.count), hint=text)


def decide(reply: AIMessage, transcript: Sequence[BaseMessage], view: RunView, policy: Policy,
           memo: DetectorMemo | None = None) -> Decision | None:
    """The decision on ``reply`` (``transcript``: the messages before it): the inner limits,
    then the loop layers, then budget pressure; None for a clean reply. ``memo``: the detector
    states of earlier replies (a fresh one replays the run)."""
    why = limit_stop(reply, transcript, view, policy)
    if why is not None:
        return Decision(reply, guard=why)
    pressure = (policy.pressure is not None and view.budget is not None and not view.pressure_queued
                and view.spent >= policy.pressure.threshold * view.budget)
    detection = policy.detection
    if detection is None:
        return Decision(reply, pressure=True) if pressure else None
    memo = memo if memo is not None else DetectorMemo()
    before = memo.state_before(transcript, view, detection)
    obs = observe(before, reply, results_before(transcript, len(transcript)), detection, view.allowed)
    memo.remember(view.id, reply, detection, obs.state)
    if obs.stop is not None:
        return Decision(reply, guard=obs.stop, finding=obs.finding)
    if not (obs.warnings or obs.blocks or pressure):
        return None
    return Decision(reply, warnings=tuple(obs.warnings), pressure=pressure, blocks=obs.blocks)


# --- answers to calls that do not run ----------------------------------------------------------

def block_answers(ai: AIMessage, blocks: Mapping[str, str]) -> list[ToolMessage]:
    """The error ToolMessages that answer a reply's blocked calls (tagged: not tool results)."""
    names = call_names(ai)
    return [block_answer(i, names.get(i), text) for i, text in blocks.items()]


def stop_answers(ai: AIMessage, why: Guard) -> list[ToolMessage]:
    """One error ToolMessage per call (valid or malformed) of a stopped reply."""
    text, names = stop_answer_text(why), call_names(ai)
    return [ToolMessage(text, tool_call_id=i, name=names.get(i), status="error")
            for i in call_ids(ai)]
