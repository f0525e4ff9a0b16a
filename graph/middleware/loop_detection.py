"""``LoopDetectionMiddleware``: the loop detector of ``create_loop_agent``, for ``create_agent``
(``docs/middleware.md#loopdetectionmiddleware``).

Example:
    >>> from langchain.agents import create_agent
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from langgraph_loop import LoopDetection
    >>> from langgraph_loop.middleware import LoopDetectionMiddleware
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> @tool
    ... def status() -> str:
    ...     '''The job's status.'''
    ...     return "pending"
    >>> model = ScriptedChatModel(default=lambda messages: [("status", {})])
    >>> agent = create_agent(model, [status], middleware=[LoopDetectionMiddleware()])
    >>> result = agent.invoke({"messages": [HumanMessage("is it done?")]})
    >>> result["stop_reason"], result["stop_guard"]["layer"], result["messages"][-1].tool_calls
    ('loop_detected', 'no_progress', [])
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
    ToolCallRequest,
    hook_config,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_loop.core.compat import checkpointer
from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import Notice, block_answer, call_ids, drain, run_request
from langgraph_loop.core.state import LoopAllowed, emit
from langgraph_loop.core.stop import Guard
from langgraph_loop.engine.decision import (
    Decision,
    DecisionRecord,
    DetectorMemo,
    Policy,
    RunView,
    decide,
    stop_answers,
)
from langgraph_loop.engine.detection import DetectorState
from langgraph_loop.engine.dialogue import ask
from langgraph_loop.middleware.stopping import (
    Outgoing,
    Result,
    SteppedCalls,
    ToolSteps,
    answer_of,
    applied,
    final_call,
    notice_for,
    stop_record,
    stored_stop,
    thread_of,
)

__all__ = ["LoopDetectionMiddleware", "LoopDetectionState"]

class LoopDetectionState(AgentState[Any]):
    """The channels ``LoopDetectionMiddleware`` owns (merged into the agent's state)."""

    stop_reason: NotRequired[Annotated[str | None, OmitFromInput]]
    """``"loop_detected"`` when the detector stopped the run (None otherwise)."""
    stop_guard: NotRequired[Annotated[Guard | None, OmitFromInput]]
    """Why it stopped: the layer, the calls and results, where the loop began."""
    loop_notices: NotRequired[Annotated[list[Notice], PrivateStateAttr]]
    """The deferred-notice queue: warnings waiting for the next model call."""
    loop_question: NotRequired[Annotated[DecisionRecord | None, PrivateStateAttr]]
    """A stop waiting for a person (``ask_human``), about the newest reply."""
    loop_allowed: NotRequired[Annotated[LoopAllowed | None, PrivateStateAttr]]
    """Loops a person let go on in this run: ``{"run": id, "allowed": {key: count}}``."""
    loop_detector: NotRequired[Annotated[DetectorSnapshot | None, PrivateStateAttr]]
    """The detector's state after the newest reply (``DetectorSnapshot``)."""
    loop_refused: NotRequired[Annotated[dict[str, str] | None, PrivateStateAttr]]
    """The newest reply's refused calls that wait for the tools step: ``{call id: answer}``."""


STEP_COUNTERS = ("run_model_call_count", "thread_model_call_count")
"""``ModelCallLimitMiddleware``'s step counters: beside them a stop's final answer is a model
step of its own (so that limit applies); else it is made in the stop's step, so no other
``after_model`` hook is shown the stopped reply's calls."""


class DetectorSnapshot(TypedDict):
    """The detector's state after the newest reply, for when a middleware rewrote the thread."""

    run: str | None
    reply: str | None
    state: DetectorState


@dataclass
class _Turn:
    """One model call: the request (the queued notice added), that notice, the run, the thread
    (a typed answer's writes, ``fixed``, applied), and what earlier calls of the step wrote."""

    request: ModelRequest[Any]
    notice: HumanMessage | None
    run: dict[str, Any]
    update: dict[str, Any]
    messages: list[BaseMessage]
    fixed: list[BaseMessage]
    earlier: list[BaseMessage]


def _run_of(state: Any, messages: Sequence[BaseMessage]) -> tuple[dict[str, Any], bool]:
    """The run a model call belongs to (``run_request``), and is this its first call."""
    start, request = run_request(messages)
    first = not any(isinstance(m, AIMessage) for m in messages[start + 1:])
    if request is None:  # the request was summarized away: the run the detector last saw
        request = (state.get("loop_detector") or {}).get("run")
    allowed = state.get("loop_allowed") or {}
    return {"id": request, "request_id": request,
            "loop_allowed": allowed.get("allowed") if request and allowed.get("run") == request
            else None}, first


def _reply_of(response: ModelResponse[Any]) -> AIMessage | None:
    """The reply among a response's messages (the first AIMessage)."""
    return next((m for m in response.result if isinstance(m, AIMessage)), None)


def _all_refused(ai: AIMessage, decision: Decision) -> bool:
    """Are all the reply's calls refused (nothing would run)?"""
    return bool(decision.blocks) and all(i in decision.blocks for i in call_ids(ai))


class LoopDetectionMiddleware(SteppedCalls, ToolSteps, AgentMiddleware[LoopDetectionState, Any]):
    """Detect a looping agent in ``create_agent`` (``docs/middleware.md``).

    Args:
        config: the ``LoopDetection`` settings (default: ``LoopDetection()``, as the
            graph's), or a dict of its fields.
        show_notices: False (default): the notices' ids start ``do-not-render-`` (chat UIs
            hide them); True: plain ids.

    Raises:
        ValueError: ``config`` is neither a ``LoopDetection`` nor a dict of valid fields,
            or ``show_notices`` is not a bool.
    """

    state_schema = LoopDetectionState
    built_in_as = "loop_detection=LoopDetection(...) (on by default)"
    """What ``create_loop_agent`` takes instead (it refuses this middleware)."""

    def __new__(cls, config: LoopDetection | dict[str, Any] | None = None, **kwargs: Any
                ) -> LoopDetectionMiddleware:
        asks = (config.get("ask_human") if isinstance(config, dict)
                else getattr(config, "ask_human", False))
        return super().__new__(_AskingLoopDetection if cls is LoopDetectionMiddleware and asks is True
                               else cls)

    def __init__(self, config: LoopDetection | dict[str, Any] | None = None, *,
                 show_notices: bool = False) -> None:
        super().__init__()
        if not isinstance(show_notices, bool):
            raise ValueError(f"LoopDetectionMiddleware: show_notices must be True or False, got "
                             f"{show_notices!r}")
        self.show_notices = show_notices
        if isinstance(config, dict):
            config = LoopDetection(**config)
        elif config is None:
            config = LoopDetection()
        elif not isinstance(config, LoopDetection):
            raise ValueError(f"LoopDetectionMiddleware: config must be a LoopDetection (or a dict "
                             f"of its fields), got {type(config).__name__}")
        self.config = config
        self.memo = DetectorMemo()
        """Detector states of earlier replies (a cache: the state is derived from the thread)."""
        self._hinted: dict[tuple[int, ...], LoopDetection] = {}
        self.tool_steps, self.orders = {}, set()

    def _detection(self, tools: Sequence[Any]) -> LoopDetection:
        """The configuration plus what the call's tools declare, once per set of tools."""
        key = tuple(id(t) for t in tools)
        found = self._hinted.get(key)
        if found is None:
            if len(self._hinted) >= 64:
                self._hinted.clear()
            found = self._hinted[key] = self.config.with_tool_hints(
                [t for t in tools if isinstance(t, BaseTool)])
        return found

    # --- before the call --------------------------------------------------------------------
    def _turn(self, request: ModelRequest[Any], earlier: _Turn | None = None) -> _Turn:
        """The call with this run's queued notice delivered and a typed answer taken as a
        redirect (``thread_of``); ``earlier``: the call before it in the same model step."""
        state = request.state
        update: dict[str, Any] = dict(earlier.update) if earlier is not None else {}
        messages, fixed = thread_of(state) if earlier is None else (list(state.get("messages") or []), [])
        if fixed:
            request = request.override(messages=applied(list(request.messages), fixed))
            update["loop_question"] = None
        run, first = _run_of(state, messages)
        notice = drain(state.get("loop_notices") or [], run=str(run["id"]),  # type: ignore[arg-type]
                       hidden=not self.show_notices)
        if notice is not None:
            request = request.override(messages=[*request.messages, notice])
            update["loop_notices"] = []
        if first and (stop := stored_stop(state)) is not None and stop["guard"] == "loop_detector":
            update.update(stop_reason=None, stop_guard=None)  # a new run: the stop it wrote goes
        if state.get("loop_refused"):  # the refusals of the round before are answered
            update["loop_refused"] = None
        return _Turn(request, notice, run, update, messages, fixed,
                     earlier.earlier if earlier is not None else [])

    def _again(self, turn: _Turn, written: list[BaseMessage], update: dict[str, Any]) -> _Turn:
        """The next call of the step, after a reply whose calls were all refused."""
        state: dict[str, Any] = dict(turn.request.state)
        new = [m for m in written if all(m is not f for f in turn.fixed)]
        sent: list[Any] = [*turn.request.messages, *(m for m in new if m is not turn.notice)]
        stored: Any = {**state, **update, "messages": [*turn.messages, *new]}
        request = turn.request.override(messages=sent, state=stored)
        return self._turn(request, _Turn(request, None, turn.run, update, stored["messages"], [],
                                         [*turn.earlier, *written]))

    # --- after the call ----------------------------------------------------------------------
    def _decide(self, turn: _Turn, ai: AIMessage | None) -> Decision | None:
        """The engine's decision on the reply (None: a clean reply)."""
        if ai is None:
            return None
        messages = list(turn.messages)
        if turn.notice is not None:
            messages.append(turn.notice)
        view = RunView(id=turn.run["id"], request_id=turn.run["request_id"],
                       allowed=turn.run["loop_allowed"])
        detection = self._detection(turn.request.tools)
        kept: DetectorSnapshot = turn.request.state.get("loop_detector") or {}  # type: ignore[assignment]
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        cut = not any(m.id == view.request_id for m in messages)  # the run's start summarized away
        if cut and kept.get("run") == view.id and last is not None and kept.get("reply") == last.id:
            self.memo.remember(view.id, last, detection, kept["state"])
        decision = decide(ai, messages, view, Policy(detection=detection), self.memo)
        turn.update["loop_detector"] = DetectorSnapshot(
            run=view.id, reply=ai.id, state=self.memo.state_before([*messages, ai], view, detection))
        if decision is not None and decision.guard is not None:
            decision = decision.located([*messages, ai], turn.run["request_id"], get_config())
        return decision

    def _asks(self, decision: Decision | None) -> bool:
        """Does this stop go to a person first?"""
        return decision is not None and decision.asks(self.config, checkpointer(get_config()) is not None)

    def _written(self, turn: _Turn, response: ModelResponse[Any], decision: Decision | None
                 ) -> tuple[list[BaseMessage], dict[str, Any]]:
        """What a call with no stop writes: the notice, the reply, warnings, and refusals (at
        once when nothing of the reply runs, else in ``wrap_tool_call``)."""
        ai = _reply_of(response)
        result = [*turn.fixed, *([turn.notice] if turn.notice is not None else []), *response.result]
        update = dict(turn.update)
        if decision is not None and ai is not None:
            if decision.blocks:
                if _all_refused(ai, decision):
                    result += decision.answers()
                else:
                    update["loop_refused"] = dict(decision.blocks)
            queue = update.get("loop_notices", turn.request.state.get("loop_notices")) or []
            notices = decision.notices(str(turn.run["id"]), queue)
            if notices != queue:
                update["loop_notices"] = notices
            for event in decision.events():
                emit(turn.request.runtime, event)
        return result, update

    @staticmethod
    def _result(turn: _Turn, written: list[BaseMessage], update: dict[str, Any],
                structured: Any = None) -> Result:
        """The model step's result: what earlier calls of the step wrote, then ``written``."""
        answer = ModelResponse(result=[*turn.earlier, *written], structured_response=structured)
        return ExtendedModelResponse(answer, Command(update=update)) if update else answer

    # --- a stop ------------------------------------------------------------------------------
    def _stop(self, turn: _Turn, response: ModelResponse[Any], ai: AIMessage, decision: Decision
              ) -> tuple[list[BaseMessage], dict[str, Any], Outgoing | None]:
        """A stop on the reply: what the step writes, the stop record, and the final-answer call
        (None: the next model step makes it, or with ``ask_human`` the question comes first)."""
        assert decision.guard is not None
        written = [*turn.fixed, *([turn.notice] if turn.notice is not None else []), *response.result]
        if self._asks(decision):  # the reply waits, its calls unanswered, for ``after_model``
            return written, {**turn.update, "loop_question": decision.record()}, None
        answers: list[BaseMessage] = list(stop_answers(ai, decision.guard))
        written += answers
        update = {**turn.update, "jump_to": "model"}
        notice = notice_for(decision.guard, turn.run["id"], hidden=not self.show_notices)
        written += [notice] if notice is not None else []
        update.update(stop_record(turn.request.runtime, decision.guard))
        if any(key in turn.request.state for key in STEP_COUNTERS):
            return written, update, None
        sent: list[Any] = list(turn.request.messages)
        head = sent if sent and sent[-1] is ai else [*sent, ai]
        tail: list[Any] = [*answers, *([notice] if notice is not None else [])]
        del update["jump_to"]
        return written, update, Outgoing(final_call(turn.request, [*head, *tail]), tail, final=True)

    def _pending(self, turn: _Turn) -> Guard | None:
        """The stop of a step before whose final answer is still to come (None: none waits)."""
        why = stored_stop(turn.request.state)
        if why is None or why.get("guard") != "loop_detector":
            return None
        start, _ = run_request(turn.messages)
        last = next((i for i in range(len(turn.messages) - 1, start, -1)
                     if isinstance(turn.messages[i], AIMessage)), None)
        return why if last is not None and call_ids(turn.messages[last]) else None  # type: ignore[arg-type]

    # --- the hooks ---------------------------------------------------------------------------
    def _steps(self, request: ModelRequest[Any]) -> Generator[Outgoing, ModelResponse[Any], Result]:
        """One model call's work, for both hooks: yields each call to send, receives its response."""
        turn = self._turn(request)
        shown = [turn.notice] if turn.notice is not None else []
        pending = self._pending(turn)
        if pending is not None:  # the answer to a stop of the step before
            final: ModelResponse[Any] = yield Outgoing(final_call(turn.request, turn.request.messages),
                                                       shown, final=True)
            return self._result(turn, [*([turn.notice] if turn.notice else []), *answer_of(final, pending)],
                                turn.update)
        while True:
            response = yield Outgoing(turn.request, shown)
            ai = _reply_of(response)
            decision = self._decide(turn, ai)
            if decision is not None and decision.guard is not None and ai is not None:
                written, update, now = self._stop(turn, response, ai, decision)
                if now is not None:
                    written += answer_of((yield now), decision.guard)
                return self._result(turn, written, update)
            written, update = self._written(turn, response, decision)
            if ai is None or decision is None or not _all_refused(ai, decision):
                return self._result(turn, written, update, response.structured_response)
            turn = self._again(turn, written, update)  # nothing to run: the model goes on
            shown = []

    def _refused(self, request: ToolCallRequest) -> ToolMessage | None:
        """A call the detector refused is answered with its refusal (``loop_refused``)."""
        call = request.tool_call
        text = (request.state.get("loop_refused") or {}).get(call.get("id"))  # type: ignore[union-attr]
        return None if text is None else block_answer(str(call.get("id")), call.get("name"), text)


class _AskingLoopDetection(LoopDetectionMiddleware):
    """``LoopDetectionMiddleware`` with ``ask_human`` (``__new__`` picks it): the question is
    asked in ``after_model``, as LangChain's human-in-the-loop asks, so a resume runs only it."""

    @property
    def name(self) -> str:
        return "LoopDetectionMiddleware"

    @hook_config(can_jump_to=["model"])
    def before_model(self, state: LoopDetectionState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A person's hint goes into the thread before the call, for the ``before_model`` hooks:
        those after this one at once, those before it (this hook ran later than the step after
        the tools) by a jump back to the first."""
        messages = list(state.get("messages") or [])
        run, _ = _run_of(state, messages)
        queue = state.get("loop_notices") or []
        if not any(n["source"] == "human" and n["run"] == str(run["id"]) for n in queue):
            return None
        update = {"messages": [drain(queue, run=str(run["id"]), hidden=not self.show_notices)],
                  "loop_notices": []}
        return {**update, "jump_to": "model"} if self.hooks_before(messages) else update

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: LoopDetectionState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Ask about the reply a stop waits on; continue: its calls run; stop: the final answer."""
        record = cast("DecisionRecord | None", state.get("loop_question"))
        messages = list(state.get("messages") or [])
        ai = messages[-1] if messages else None
        if not record or not isinstance(ai, AIMessage):
            return None
        run, _ = _run_of(state, messages)
        decision = Decision.of(ai, record).settled(messages, run["request_id"], self.config, ask)
        if decision.guard is not None:
            notice = notice_for(decision.guard, run["id"], hidden=not self.show_notices)
            return {"messages": [*stop_answers(ai, decision.guard), *([notice] if notice else [])],
                    **stop_record(runtime, decision.guard), "loop_question": None, "jump_to": "model"}
        update: dict[str, Any] = {"loop_question": None, "loop_allowed": LoopAllowed(
            run=run["id"], allowed=decision.allowed(run.get("loop_allowed")) or {})}
        notices = decision.notices(str(run["id"]))
        if notices:
            update["loop_notices"] = notices
        return update

    @hook_config(can_jump_to=["model"])
    async def aafter_model(self, state: LoopDetectionState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async ``after_model``."""
        return self.after_model(state, runtime)
