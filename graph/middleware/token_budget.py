"""``TokenBudgetMiddleware``: the hard token budget of ``create_loop_agent``, for ``create_agent``.

No request over the budget is sent: the graph's rule (``engine/limits.py: call_guard``)
decides inside ``wrap_model_call`` (``docs/token-budget.md#tokenbudgetmiddleware``). What was
spent is read from the thread's replies, so a run resumed by another agent object counts the same.
A check-in is asked in ``before_model``, on the call the last request foresees, so that a
person's redirect goes through the other ``before_model`` hooks as the graph's does.

Example:
    >>> from langchain.agents import create_agent
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.tools import tool
    >>> from langgraph_loop.middleware import TokenBudgetMiddleware
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> @tool
    ... def search(query: str) -> str:
    ...     '''Search the web.'''
    ...     return "a long page of results " * 50
    >>> model = ScriptedChatModel(default=lambda messages: [("search", {"query": "more"})],
    ...                           no_tools_reply="Here is what I found so far.")
    >>> agent = create_agent(model, [search], middleware=[TokenBudgetMiddleware(token_budget=3000)])
    >>> result = agent.invoke({"messages": [HumanMessage("research this")]})
    >>> result["stop_reason"], result["stop_guard"]["limit"], result["messages"][-1].content
    ('token_budget', 3000, 'Here is what I found so far.')
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Annotated, Any, Literal, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_loop.core.compat import checkpointer, resuming
from langgraph_loop.core.messages import notice_message, run_request
from langgraph_loop.core.questions import ask_plainly
from langgraph_loop.core.stop import Guard, StopReason, limit_guard
from langgraph_loop.engine.limits import (
    BUDGET_ANSWER,
    MIN_FINAL_OUTPUT,
    answer_room,
    call_guard,
    check_in,
    max_tokens_of,
    skipped_answer,
    skipped_reply,
    spent_tokens,
)
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

__all__ = ["BudgetExtension", "BudgetSpent", "TokenBudgetMiddleware", "TokenBudgetState"]

RENAMED = {"max_tokens": "token_budget", "check_in": "budget_check_in", "scope": "budget_scope"}
"""0.3's keywords of ``TokenBudgetMiddleware`` and their names since 0.4 (those of ``Limits``)."""


class BudgetExtension(TypedDict):
    """Tokens a person added to a run's budget (``budget_extra``)."""

    run: str | None
    """The run's request message id (None: the thread's, ``budget_scope="thread"``)."""
    tokens: int
    stop: NotRequired[Guard]
    """A person's stop, asked in ``before_model``: the model step makes it without asking again."""


class BudgetSpent(TypedDict):
    """What the run (or thread) spent, kept so that a rewritten thread hides none."""

    run: str | None
    tokens: int


class TokenBudgetState(AgentState[Any]):
    """The channels ``TokenBudgetMiddleware`` owns (merged into the agent's state)."""

    stop_reason: NotRequired[Annotated[str | None, OmitFromInput]]
    """``"token_budget"`` when the budget stopped the run (None otherwise)."""
    stop_guard: NotRequired[Annotated[Guard | None, OmitFromInput]]
    """Why it stopped (``docs/token-budget.md``): ``limit``, ``value``, ``estimate``, and
    ``final_answer`` or ``human`` when they apply."""
    budget_extra: NotRequired[Annotated[BudgetExtension | None, PrivateStateAttr]]
    """What a person granted at a check-in, for the run it was granted in."""
    budget_spent: NotRequired[Annotated[BudgetSpent | None, PrivateStateAttr]]
    """What was spent, counted as the replies come (``BudgetSpent``)."""
    budget_hooks: NotRequired[Annotated[bool | None, PrivateStateAttr]]
    """True: ``before_model`` hooks run before the check-in's (``ToolSteps``), for a resume elsewhere."""


@dataclass
class _Turn:
    """One model call as the budget sees it: the request, the stop (None: it fits), the writes."""

    request: ModelRequest[Any]
    why: Guard | None
    budget: int
    spent: int
    key: str | None
    added: list[HumanMessage] = field(default_factory=list)
    update: dict[str, Any] = field(default_factory=dict)
    room: int | None = None  # the tokens left when no final answer fits


def _sent(request: ModelRequest[Any], extra: Sequence[BaseMessage] = ()) -> list[BaseMessage]:
    """The messages a request sends: its system message, its messages, ``extra``."""
    head = [request.system_message] if request.system_message is not None else []
    return [*head, *request.messages, *extra]


class TokenBudgetMiddleware(SteppedCalls, AgentMiddleware[TokenBudgetState, Any]):
    """A hard token budget per run for ``create_agent`` (``docs/token-budget.md``).

    Args:
        token_budget, budget_check_in, budget_scope: as the ``Limits`` fields of these names
            (the README's reference; a check-in needs a checkpointer, else the run stops).
        show_notices: False (default): the stop notice's id starts ``do-not-render-`` (chat
            UIs hide it); True: a plain id.

    Raises:
        ValueError: ``token_budget`` is not a whole number >= 1, ``budget_check_in`` or
            ``show_notices`` is not a bool, or ``budget_scope`` is neither ``"run"`` nor ``"thread"``.
    """

    state_schema = TokenBudgetState
    built_in_as = "limits=Limits(token_budget=..., budget_check_in=..., budget_scope=...)"
    """What ``create_loop_agent`` takes instead (it refuses this middleware)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> TokenBudgetMiddleware:
        asks = cls is TokenBudgetMiddleware and kwargs.get("budget_check_in") is True
        return super().__new__(_CheckingIn if asks else cls)

    def __init__(self, *, token_budget: int | None = None, budget_check_in: bool = False,
                 budget_scope: Literal["run", "thread"] = "run", show_notices: bool = False,
                 **renamed: Any) -> None:
        super().__init__()
        for old in renamed:
            new = RENAMED.get(old)
            raise TypeError(f"TokenBudgetMiddleware({old}=...) " + (
                f"was renamed in 0.4: use {new}=... (the name in Limits)" if new
                else "is not a keyword it takes"))
        if token_budget is None:
            raise TypeError("TokenBudgetMiddleware: token_budget is required (the tokens one run may spend)")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise ValueError(f"TokenBudgetMiddleware: token_budget must be a whole number >= 1, "
                             f"got {token_budget!r}")
        for flag, value in (("budget_check_in", budget_check_in), ("show_notices", show_notices)):
            if not isinstance(value, bool):
                raise ValueError(f"TokenBudgetMiddleware: {flag} must be True or False, got "
                                 f"{value!r}")
        if budget_scope not in ("run", "thread"):
            raise ValueError(f"TokenBudgetMiddleware: budget_scope must be 'run' or 'thread', got "
                             f"{budget_scope!r}")
        self.token_budget = token_budget
        self.budget_scope = budget_scope
        self.budget_check_in = budget_check_in
        self.show_notices = show_notices

    # --- before the call --------------------------------------------------------------------
    def _turn(self, request: ModelRequest[Any], *, answering: bool = False) -> _Turn:
        """The budget rule on this call; with ``budget_check_in``, a person decides first
        (``answering``: this hook's question is resumed, its answer is read whatever the rule says)."""
        state = request.state
        messages, fixed = thread_of(state)  # a message typed at the loop question: no new run
        if fixed:  # the loop middleware writes them; this call is sent as it would send it
            request = request.override(messages=applied(request.messages, fixed))
        start, run = run_request(messages)
        per_run = self.budget_scope == "run"  # per thread: every reply counts, an extension stays
        counted: dict[str, Any] = state.get("budget_spent") or {}  # type: ignore[assignment]
        key = (run or counted.get("run")) if per_run else None  # no request: summarized away
        granted: dict[str, Any] = state.get("budget_extra") or {}  # type: ignore[assignment]
        extra = int(granted.get("tokens") or 0) if granted.get("run") == key else 0
        spent = spent_tokens(messages, start if per_run else 0, request.model)
        if counted and counted.get("run") == key:  # what the thread no longer shows counts too
            spent = max(spent, int(counted.get("tokens") or 0))
        update: dict[str, Any] = {}
        if (stop := stored_stop(state)) is not None and stop["reason"] == StopReason.TOKEN_BUDGET and not any(
                isinstance(m, AIMessage) for m in messages[start + 1:]):
            update.update(stop_reason=None, stop_guard=None)  # a new run: the stop it wrote goes

        def over(more: int, added: Sequence[BaseMessage]) -> Guard | None:
            return call_guard(_sent(request, added), messages, budget=self.token_budget + more,
                              spent=spent, model=request.model)

        if granted.get("stop") and granted.get("run") == key:  # a person stopped in before_model
            update["budget_extra"] = BudgetExtension(run=key, tokens=extra)
            return _Turn(request, granted["stop"], self.token_budget + extra, spent, key, update=update)
        why = over(extra, [])
        due = why or (limit_guard(StopReason.TOKEN_BUDGET, self.token_budget + extra, spent)
                      if answering else None)  # asked where the request was known (another process)
        if due is None or not self.budget_check_in or checkpointer(get_config()) is None:
            return _Turn(request, why, self.token_budget + extra, spent, key, update=update)
        ask, granted_now = partial(ask_plainly, schema=BUDGET_ANSWER), extra
        added: list[HumanMessage] = []
        while (asked := check_in(lambda more: over(more, added), ask, extra=granted_now,
                                 scope=self.budget_scope, due=due)).added is not None:
            due, granted_now = None, asked.extra  # a redirect inside the call: asked again until it fits
            added.append(asked.added)
        if asked.extra != extra:
            update["budget_extra"] = BudgetExtension(run=key, tokens=asked.extra)
        if added:
            request = request.override(messages=[*request.messages, *added])
        return _Turn(request, asked.stop, self.token_budget + asked.extra, spent, key, added, update)

    def _final_request(self, turn: _Turn) -> tuple[HumanMessage | None, ModelRequest[Any] | None]:
        """The stop notice and the final answer's request (None: no room for an answer)."""
        assert turn.why is not None
        notice = notice_for(turn.why, None, hidden=not self.show_notices)
        tail = [notice] if notice is not None else []
        room = answer_room(_sent(turn.request, tail), budget=turn.budget, spent=turn.spent,
                           model=turn.request.model)
        if room < MIN_FINAL_OUTPUT:
            turn.why, turn.room = {**turn.why, "final_answer": skipped_answer(room)}, room
            return None, None
        settings = dict(turn.request.model_settings)
        supported, own = max_tokens_of(turn.request.model)
        if supported:
            settings["max_tokens"] = min(room, own or room)
        return notice, final_call(turn.request, [*turn.request.messages, *tail], settings)

    # --- after the call ----------------------------------------------------------------------
    def _counted(self, turn: _Turn, sent: ModelRequest[Any], response: ModelResponse[Any] | None
                 ) -> dict[str, Any]:
        """The update that counts the reply to ``sent`` (``budget_spent``)."""
        reply = [m for m in response.result if isinstance(m, AIMessage)][:1] if response else []
        messages = _sent(sent)
        used = spent_tokens([*messages, *reply], len(messages), sent.model)
        return {**turn.update, "budget_spent": BudgetSpent(run=turn.key, tokens=turn.spent + used)}

    def _went_on(self, turn: _Turn, response: ModelResponse[Any]) -> Result:
        """A call that fitted: the reply, any redirect or extension a person gave, the count."""
        answer = ModelResponse(result=[*turn.added, *response.result],
                               structured_response=response.structured_response)
        return ExtendedModelResponse(answer, Command(update=self._counted(turn, turn.request, response)))

    def _stopped(self, turn: _Turn, notice: HumanMessage | None, sent: ModelRequest[Any] | None,
                 final: ModelResponse[Any] | None) -> Result:
        """The stop: any redirect, the notice, the final answer (or, when none fits, the loop's
        reply saying so) and the stop record."""
        assert turn.why is not None
        record = stop_record(turn.request.runtime, turn.why)
        answer = ([skipped_reply(turn.why, turn.room)] if turn.room is not None
                  else answer_of(final, turn.why) if final is not None else [])
        # what the rest of the chain wrote before its reply (the loop's writes for a typed answer)
        before = [m for m in (final.result if final else []) if not isinstance(m, AIMessage)]
        result: list[BaseMessage] = [*before, *turn.added]
        if answer:
            result += [*([notice] if notice is not None else []), *answer]
        update = {**(self._counted(turn, sent, final) if sent is not None else turn.update), **record}
        if final is None or not answer:
            update["jump_to"] = "end"
        return ExtendedModelResponse(ModelResponse(result=result), Command(update=update))

    # --- the hooks ---------------------------------------------------------------------------
    def _steps(self, request: ModelRequest[Any]) -> Generator[Outgoing, ModelResponse[Any], Result]:
        """``wrap_model_call``'s work for both hooks: yields each call, receives its response."""
        turn = self._turn(request)
        if turn.why is None:
            return self._went_on(turn, (yield Outgoing(turn.request, turn.added)))
        notice, final = self._final_request(turn)
        shown = [*turn.added, *([notice] if notice is not None else [])]
        answer = (yield Outgoing(final, shown, final=True)) if final is not None else None
        return self._stopped(turn, notice, final, answer)


class _CheckingIn(ToolSteps, TokenBudgetMiddleware):
    """``TokenBudgetMiddleware`` with ``budget_check_in`` (``__new__`` picks it): the person is
    asked in ``before_model`` about the call the last request foresees (the thread's, else this
    object's latest: its system message and model, the thread's messages now and the loop
    notices queued for it), so that a redirect goes through the other ``before_model`` hooks
    (``ToolSteps``). A call over the budget not foreseen (the object's first, tokens another
    wrapper adds) is asked about in ``wrap_model_call``, as before."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._seen: dict[Any, ModelRequest[Any]] = {}  # each thread's last request (the newest 256)
        self.tool_steps, self.orders = {}, set()

    @property
    def name(self) -> str:
        return "TokenBudgetMiddleware"

    def _turn(self, request: ModelRequest[Any], *, answering: bool = False) -> _Turn:
        if request.model is not None:  # what it sends besides the thread, for ``before_model``
            if len(self._seen) >= 256:
                self._seen.clear()
            thread = get_config()["configurable"].get("thread_id")
            self._seen.pop(thread, None)  # the newest last
            self._seen[thread] = request.override(messages=[], state=cast(Any, {}))
        return super()._turn(request, answering=answering)

    def _foreseen(self, runtime: Runtime[Any]) -> ModelRequest[Any]:
        """The request the next call will resemble: the thread's last, else this object's latest
        (the same agent's system message and model), else the thread alone, weighed by the token
        estimate (this object's first call, or a question resumed in another process)."""
        seen = self._seen.get(get_config()["configurable"].get("thread_id"))
        if seen is None and self._seen:
            seen = next(reversed(self._seen.values()))
        return seen or ModelRequest(model=cast(Any, None), messages=[], runtime=runtime)

    @hook_config(can_jump_to=["model"])
    def before_model(self, state: TokenBudgetState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Ask about the foreseen call; write the extension, a stop for the model step, a redirect."""
        messages = list(state.get("messages") or [])
        kept, learned = state.get("budget_hooks"), self.learned_order(messages)
        order = {} if learned is None or learned == kept else {"budget_hooks": learned}
        if learned and order:  # kept with the thread before any question: a resume elsewhere
            return {**order, "jump_to": "model"}  # jumps too
        hooks_before = self.hooks_before(messages, kept)
        seen = self._foreseen(runtime)
        queued = notice_message(cast(Mapping[str, Any], state).get("loop_notices") or [])
        weighed = [*messages, queued] if queued is not None else messages
        turn = self._turn(replace(seen, messages=weighed, state=state, runtime=runtime),
                          answering=resuming(get_config()))
        stop = turn.why if turn.why is not None and "human" in turn.why else None
        if not turn.added and "budget_extra" not in turn.update and stop is None:
            return order or None
        extension = BudgetExtension(run=turn.key, tokens=turn.budget - self.token_budget)
        update = {**order, **turn.update, "budget_extra": {**extension, **({"stop": stop} if stop else {})}}
        if turn.added:
            update.update(messages=turn.added, **({"jump_to": "model"} if hooks_before else {}))
        return update
