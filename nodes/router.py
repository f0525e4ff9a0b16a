"""The ``router`` node: the one place that ends an iteration, records it, and decides.

Every path to the end of a run goes through here (stops decided elsewhere too), so every
iteration gets its record and undelivered notices are dropped when a run ends. ``decide``: with
neither a predicate nor a judge the first natural completion ends the run; the predicate first,
and if it says stop, the judge. The next iteration starts with a continuation message.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.drive import StepNode, Steps
from langgraph_loop.core.messages import (
    CONTINUE_NAME,
    HIDDEN_ID_PREFIX,
    iteration_messages,
    loop_message,
    shorten,
)
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import (
    IterationRecord,
    LoopState,
    build_record,
    calls_of_iteration,
    emit,
    iteration_info,
    latest_answer,
    new_iteration,
)
from langgraph_loop.core.stop import Guard, StopReason, guard, limit_guard, stop_update
from langgraph_loop.engine.limits import budget_pressure_guard, timeout_guard
from langgraph_loop.nodes.stall import new_work_by_iteration, stall_guard

__all__ = ["RouterNode", "capped", "continuation_message", "continuation_text", "current_record", "decide",
           "default_message", "explain_stop", "guard_at_iteration_end", "normalize_predicate",
           "resend_message", "with_progress"]


# --- deciding --------------------------------------------------------------------------------

def normalize_predicate(result: Any) -> tuple[bool, str | None]:
    """``should_continue`` may return a bool or ``(bool, feedback)``."""
    if isinstance(result, tuple) and len(result) == 2:
        go, feedback = result
        return bool(go), None if feedback is None else str(feedback)
    if isinstance(result, bool):
        return result, None
    raise TypeError(f"should_continue must return bool or (bool, feedback), got {result!r}")


def decide(*, iteration: int, max_iterations: int | None, has_condition: bool,
           predicate: tuple[bool, str | None] | None,
           verdict: dict[str, Any] | None) -> tuple[StopReason | None, str | None]:
    """Stop reason (None = continue) and the feedback for the next iteration."""
    if not has_condition:
        return StopReason.COMPLETED, None
    if max_iterations is not None and iteration >= max_iterations:
        return StopReason.MAX_ITERATIONS, None
    if predicate is not None and predicate[0]:
        return None, predicate[1]
    if verdict is not None:
        if verdict.get("answered"):
            return StopReason.COMPLETED, None
        return None, verdict.get("reasoning") or None
    return StopReason.COMPLETED, predicate[1] if predicate else None


def capped(state: LoopState, settings: LoopSettings) -> bool:
    """Is this the last iteration ``Iterations.max`` allows (nothing is asked at its end)?"""
    return settings.iterations.max is not None and state.get("iteration", 1) >= settings.iterations.max


def current_record(state: LoopState) -> IterationRecord:
    """The record of the iteration that is ending (without feedback and verdict)."""
    iteration = state.get("iteration", 1)
    return build_record(iteration=iteration, info=iteration_info(state), answer=latest_answer(state),
                        calls=calls_of_iteration(state.get("call_log") or [], iteration))


def guard_at_iteration_end(state: LoopState, settings: LoopSettings) -> Guard | None:
    """Why a run that would continue must stop at this iteration end (None = continue)."""
    found = timeout_guard(state, settings) or budget_pressure_guard(state, settings)
    if found is not None or settings.iterations.stall is None:
        return found
    records = [*(state.get("iterations") or []), current_record(state)]
    return stall_guard(records, settings.iterations.stall,
                       new_work=new_work_by_iteration(state.get("call_log") or []))


def explain_stop(state: LoopState, settings: LoopSettings, stop: StopReason | None) -> Guard | None:
    """The guard that explains ``stop`` in the iteration record (None for ``completed``)."""
    if stop is None or stop == StopReason.COMPLETED:
        return None
    stored = state.get("stop_guard")
    if stored and stored.get("reason") == stop.value:
        return stored
    if stop == StopReason.MAX_ITERATIONS:
        return guard("max_iterations", stop, limit=settings.iterations.max, value=state.get("iteration", 1))
    if stop == StopReason.STEP_LIMIT:
        return limit_guard(stop, "recursion_limit", state.get("remaining_steps"))
    return guard("router", stop)


# --- the continuation message ----------------------------------------------------------------

def default_message(feedback: str | None) -> str:
    """The default continuation text, with the feedback when there is some."""
    return prompts.FEEDBACK.format(feedback=feedback, text=prompts.CONTINUE) if feedback else prompts.CONTINUE


def with_progress(text: str, progress: Sequence[str], inject: bool) -> str:
    """``text`` preceded by the latest progress entry (numbered by its iteration)."""
    if not inject or not progress:
        return text
    lines = f"{len(progress)}. {progress[-1]}"
    return f"{prompts.PROGRESS.format(lines=lines)}\n\n{text}"


def continuation_text(feedback: str | None, progress: Sequence[str], inject: bool) -> str:
    """The default continuation message's text."""
    return with_progress(default_message(feedback), progress, inject)


def continuation_message(content: str | list[Any], *, hidden: bool = True) -> HumanMessage:
    """A continuation message (tagged; ``hidden``: with an id chat UIs do not render)."""
    prefix = HIDDEN_ID_PREFIX if hidden else ""
    return loop_message(content, name=CONTINUE_NAME, id=f"{prefix}{uuid.uuid4().hex}")


def resend_message(previous: Sequence[BaseMessage] | None, *, request_id: str | None,
                   fresh_context: bool, feedback: str | None, hidden: bool = True) -> HumanMessage:
    """The continuation returned None: re-send the previous iteration's input as it was (with
    fresh context the run's request is in every request already: the default text instead)."""
    last = previous[0] if previous else None
    if last is None or (fresh_context and last.id == request_id):
        return continuation_message(default_message(feedback), hidden=hidden)
    return continuation_message(last.content, hidden=hidden)


# --- the node --------------------------------------------------------------------------------

class _End:
    """One iteration end, step by step (pure; the node makes the callback calls)."""

    def __init__(self, state: LoopState, settings: LoopSettings) -> None:
        self.state, self.settings = state, settings
        stored = state.get("stop_reason")
        self.stop: StopReason | None = StopReason(stored) if stored is not None else None
        self.feedback: str | None = None
        self.found: Guard | None = None  # the guard that stops the run at this iteration end
        loop = settings.iterations
        self.has_condition = loop.should_continue is not None or loop.judge is not None
        self.inject = loop.inject_progress and not loop.fresh_context  # progress in the continuation
        self.verdict = state.get("verdict") if loop.judge is not None else None
        self.predicate = iteration_info(state).get("predicate")
        self.ask = self.stop is None and self.has_condition and not capped(state, settings)
        self.asks_predicate = self.ask and self.predicate is None and loop.should_continue is not None
        self.record: IterationRecord = {}
        self.progress: list[str] = []

    def decide(self, asked: Any = None) -> None:
        """The stop reason and feedback (``asked``: ``should_continue``'s answer)."""
        if self.stop is not None:
            return
        predicate = None
        if self.asks_predicate:
            predicate = normalize_predicate(asked)
        elif self.ask and self.predicate is not None:
            predicate = bool(self.predicate["continue"]), self.predicate.get("feedback")
        settings, state = self.settings, self.state
        self.stop, self.feedback = decide(
            iteration=state.get("iteration", 1), max_iterations=settings.iterations.max,
            has_condition=self.has_condition, predicate=predicate, verdict=self.verdict)
        if self.stop is None and not settings.shape.can_start_iteration(state.get("remaining_steps")):
            self.stop = StopReason.STEP_LIMIT
        if self.stop is None:  # time cap, budget-pressure wrap-up, stall
            self.found = guard_at_iteration_end(state, settings)
            self.stop = StopReason(self.found["reason"]) if self.found is not None else None

    def log(self, entry: Any = None) -> None:
        """Record the iteration (``entry``: ``record_feedback``'s answer, if asked)."""
        state = self.state
        if self.settings.iterations.record_feedback is not None:
            text = None if entry is None else str(entry)
        else:
            text = shorten(latest_answer(state), 300) or None
        self.progress = list(state.get("progress") or []) + ([text] if text else [])
        self.record = {**current_record(state), "feedback": text, "verdict": self.verdict,
                       "guard": self.found or explain_stop(state, self.settings, self.stop)}

    @property
    def view(self) -> LoopState:
        """The state the callbacks see (with this iteration's progress entry)."""
        return {**self.state, "progress": self.progress}

    def ended(self, answer: Any) -> dict[str, Any]:
        """The update once ``on_iteration_end`` answered (True stops: ``terminated``)."""
        if answer is True and self.stop is None:
            self.stop = StopReason.TERMINATED
            self.record["guard"] = guard("hooks", self.stop)
        emit(get_runtime(), {"event": "iteration_end", "record": self.record})
        update: dict[str, Any] = {"iterations": [*(self.state.get("iterations") or []), self.record],
                                  "progress": self.progress}
        if self.stop is not None:
            why = self.record["guard"] or guard("router", self.stop)
            update.update(stop_update(self.state.get("run") or {}, why), loop_notices=[])
            emit(get_runtime(), {"event": "stop", "reason": self.stop.value,
                                 "iteration": self.record["iteration"], "guard": self.record["guard"]})
        return update

    def continuation(self, text: Any, asked: bool) -> HumanMessage:
        """The next iteration's input (``text``: the callback's answer, when ``asked``)."""
        hidden = not self.settings.show_notices
        if not asked:
            return continuation_message(continuation_text(self.feedback, self.progress, self.inject),
                                        hidden=hidden)
        if text is None:
            start = iteration_info(self.state).get("start_id")
            previous = iteration_messages(self.state.get("messages") or [], start)[:1] if start else []
            return resend_message(previous, request_id=(self.state.get("run") or {}).get("request_id"),
                                  fresh_context=self.settings.iterations.fresh_context,
                                  feedback=self.feedback, hidden=hidden)
        return continuation_message(with_progress(str(text), self.progress, self.inject), hidden=hidden)

    def start_view(self, update: dict[str, Any]) -> LoopState:
        """What ``on_iteration_start`` sees."""
        messages = [*(self.state.get("messages") or []), *update["messages"]]
        return cast(LoopState, {**self.view, **update, "messages": messages})


class RouterNode(StepNode):
    """Record the iteration; continue with a continuation message or end the run."""

    name = "router"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """The predicate, the feedback log, ``on_iteration_end``; then the stop, or the
        continuation and ``on_iteration_start`` (each callback an ``Io``)."""
        end = _End(state, self.settings.for_runtime(get_runtime()))
        hooks = end.settings.hooks
        predicate = end.settings.iterations.should_continue
        end.decide((yield callback(predicate, state, name="should_continue"))
                   if predicate is not None and end.asks_predicate else None)
        feedback = end.settings.iterations.record_feedback
        end.log((yield callback(feedback, state, end.feedback, name="record_feedback"))
                if feedback is not None else None)
        update = end.ended((yield callback(hooks.on_iteration_end, dict(end.record), end.view,
                                           name="hooks.on_iteration_end"))
                           if hooks.on_iteration_end is not None else None)
        if end.stop is not None:
            return update
        continuation = end.settings.iterations.continuation
        text = ((yield callback(continuation, end.view, end.feedback, name="continuation"))
                if continuation is not None else None)
        message = end.continuation(text, continuation is not None)
        update.update(messages=[message], iteration=state.get("iteration", 1) + 1,
                      iteration_info=new_iteration(message.id), verdict=None)
        if hooks.on_iteration_start is not None:
            yield callback(hooks.on_iteration_start, end.start_view(update), name="hooks.on_iteration_start")
        emit(get_runtime(), {"event": "iteration_start", "iteration": update["iteration"]})
        return update
