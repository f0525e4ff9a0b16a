"""The ``router`` node: the one place that ends a pass, records it, and decides.

Every path to the end of a run goes through here: natural pass ends (continue or
stop) and stops decided elsewhere (limits, loop detector), so every pass gets its
record and undelivered notices are dropped when a run ends.

Deciding at the end of a pass (``decide``): with neither a predicate nor a judge the
first natural completion ends the run (``completed``). On the capped pass neither
is asked (``max_iterations``). The predicate is asked first; if it asks to continue
the loop continues; if it says stop, the judge (when configured) decides.

Example:
    >>> decide(iteration=1, max_iterations=10, has_condition=False, predicate=None, verdict=None)
    (<StopReason.COMPLETED: 'completed'>, None)
    >>> decide(iteration=2, max_iterations=5, has_condition=True, predicate=(True, "more"),
    ...        verdict=None)
    (None, 'more')
    >>> decide(iteration=5, max_iterations=5, has_condition=True, predicate=None, verdict=None)
    (<StopReason.MAX_ITERATIONS: 'max_iterations'>, None)
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Call, Logic
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.core.text import shorten
from langgraph_loop.nodes.base import LoopNode, emit
from langgraph_loop.nodes.continuation import (
    CONTINUE_NAME,
    DEFAULT_CONTINUE,
    continuation_text,
    loop_message,
    resend_message,
    with_progress,
)
from langgraph_loop.nodes.pass_end import explain_stop, guard_at_pass_end
from langgraph_loop.nodes.passes import answer_text, build_record, calls_of_pass, last_ai, new_pass
from langgraph_loop.nodes.request import pass_messages
from langgraph_loop.nodes.steps import can_start_pass

__all__ = ["CONTINUE_NAME", "DEFAULT_CONTINUE", "RouterNode", "continuation_text", "decide",
           "normalize_predicate"]


def normalize_predicate(result: Any) -> tuple[bool, str | None]:
    """``should_continue`` may return a bool or ``(bool, feedback)``."""
    if isinstance(result, tuple) and len(result) == 2:
        go, feedback = result
        return bool(go), None if feedback is None else str(feedback)
    if isinstance(result, bool):
        return result, None
    raise TypeError(f"should_continue must return bool or (bool, feedback), got {result!r}")


def decide(
    *,
    iteration: int,
    max_iterations: int | None,
    has_condition: bool,
    predicate: tuple[bool, str | None] | None,
    verdict: dict[str, Any] | None,
) -> tuple[StopReason | None, str | None]:
    """Stop reason (None = continue) and the feedback for the next pass."""
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


class RouterNode(LoopNode):
    """Record the pass; continue with a continuation message or end the run."""

    name = "router"

    def _predicate(self, state: LoopState, settings: LoopSettings) -> Logic:
        stored = (state.get("pass_info") or {}).get("predicate")
        if stored is not None:
            return bool(stored["continue"]), stored.get("feedback")
        if settings.should_continue is None:
            return None
        result = yield Call(settings.should_continue, (state,), name="should_continue")
        return normalize_predicate(result)

    def _decision(self, state: LoopState, settings: LoopSettings) -> Logic:
        iteration = state.get("iteration", 1)
        has_condition = settings.should_continue is not None or settings.judge is not None
        capped = settings.max_iterations is not None and iteration >= settings.max_iterations
        predicate = None
        if has_condition and not capped:
            predicate = yield from self._predicate(state, settings)
        verdict = state.get("verdict") if settings.judge is not None else None
        stop, feedback = decide(iteration=iteration, max_iterations=settings.max_iterations,
                                has_condition=has_condition, predicate=predicate,
                                verdict=verdict)
        if stop is None and not can_start_pass(state.get("remaining_steps"), settings):
            stop = StopReason.STEP_LIMIT
        if stop is None:  # time cap, budget-pressure wrap-up, stall (nodes/pass_end.py)
            guard = guard_at_pass_end(state, settings)
            stop = StopReason(guard["reason"]) if guard is not None else None
        return stop, feedback

    def _feedback(self, state: LoopState, settings: LoopSettings, feedback: str | None) -> Logic:
        if settings.record_feedback is not None:
            entry = yield Call(settings.record_feedback, (state, feedback), name="record_feedback")
            return None if entry is None else str(entry)
        return shorten(answer_text(last_ai(state.get("messages") or [])), 300) or None

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        stored = state.get("stop_reason")
        stop = StopReason(stored) if stored is not None else None
        feedback: str | None = None
        if stop is None:
            stop, feedback = yield from self._decision(state, settings)
        entry = yield from self._feedback(state, settings, feedback)
        progress = list(state.get("progress") or []) + ([entry] if entry else [])
        record = build_record(
            iteration=state.get("iteration", 1), pass_info=state.get("pass_info") or {},
            calls=calls_of_pass(state.get("call_log") or [], state.get("iteration", 1)),
            answer=answer_text(last_ai(state.get("messages") or [])), feedback=entry,
            verdict=state.get("verdict") if settings.judge is not None else None,
            guard=explain_stop(state, settings, stop),
        )
        view: LoopState = {**state, "progress": progress}  # type: ignore[typeddict-item]
        hook = settings.hooks.on_iteration_end
        if hook is not None:
            ended = yield Call(hook, (dict(record), view), name="hooks.on_iteration_end")
            if ended is True and stop is None:
                stop = StopReason.TERMINATED
                record["guard"] = {"guard": "hooks", "reason": stop.value}
        emit(runtime, {"event": "iteration_end", "record": record})
        update: dict[str, Any] = {"iterations": [*(state.get("iterations") or []), record],
                                  "progress": progress}
        if stop is not None:
            update.update(stop_reason=stop, pending_notices=[])
            emit(runtime, {"event": "stop", "reason": stop, "iteration": record["iteration"],
                           "guard": record["guard"]})
            return update
        continuation = yield from self._continuation(view, settings, feedback)
        next_pass = new_pass(continuation.id)
        update.update(messages=[continuation], iteration=state.get("iteration", 1) + 1,
                      pass_info=next_pass, verdict=None)
        hook = settings.hooks.on_iteration_start
        if hook is not None:
            messages = [*(state.get("messages") or []), continuation]
            yield Call(hook, ({**view, **update, "messages": messages},),
                       name="hooks.on_iteration_start")
        emit(runtime, {"event": "iteration_start", "iteration": update["iteration"]})
        return update

    def _continuation(self, state: LoopState, settings: LoopSettings,
                      feedback: str | None) -> Logic:
        """The next pass's input: prompt_factory, next_message or the default text."""
        progress = list(state.get("progress") or [])
        inject = settings.inject_progress and not settings.fresh_context
        if settings.prompt_factory is not None:
            text = yield Call(settings.prompt_factory, (state,), name="prompt_factory")
            return loop_message(with_progress(str(text), progress, inject))
        if settings.next_message is None:
            return loop_message(continuation_text(feedback, progress, inject))
        text = yield Call(settings.next_message, (state, feedback), name="next_message")
        if text is None:
            run = state.get("run") or {}
            start = (state.get("pass_info") or {}).get("start_id")
            previous = pass_messages(state.get("messages") or [], start)[:1] if start else []
            return resend_message(previous, request_id=run.get("request_id"),
                                  fresh_context=settings.fresh_context, feedback=feedback)
        return loop_message(with_progress(str(text), progress, inject))
