"""The inner limits as pure decisions returning a ``Guard`` or None: time, the token budget
and its check-in, budget pressure, consecutive tool errors (docs/token-budget.md; examples:
``tests/core/test_limits_helpers.py``).
"""

from __future__ import annotations

import json
import math
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, UsageMetadata
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool

from langgraph_loop.core.messages import REDIRECT_KIND, is_blocked
from langgraph_loop.core.questions import BUDGET_TITLE, answer_schema, one_action, the_decision, whole_number
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import Guard, StopReason, guard, limit_guard, person_stop, stop_instruction

__all__ = ["BUDGET_ANSWER", "BUDGET_TEXT", "BUDGET_TITLE", "MIN_FINAL_OUTPUT",
           "NO_ANSWER_KIND", "PRESSURE_SOURCE", "BudgetAnswer", "CheckIn", "answer_room", "budget_guard",
           "budget_pressure_guard", "budget_question", "budget_spent", "call_guard", "check_in",
           "count_tokens", "estimate_input", "estimate_tokens", "failed_rounds", "final_answer_room",
           "max_tokens_of", "parse_budget_answer", "pressure_seen", "redirect_message", "run_budget",
           "skipped_answer", "skipped_reply", "spent_tokens", "suggested_tokens", "summary_room",
           "timeout_guard", "tool_errors_guard"]

MIN_FINAL_OUTPUT = 50
"""The least output room (tokens) worth a final-answer call under a token budget."""

NO_ROOM = ("(No answer: the run stopped ({reason}) with about {room:,} tokens of its token "
           "budget left, fewer than the {least} an answer needs, so the model was not asked for "
           "one. A larger token_budget leaves room for it.)")
"""The run's last message when the budget leaves no room for a final answer."""

PER_MESSAGE = 10
"""Tokens counted per message on top of its text (conservative)."""

PRESSURE_SOURCE = "budget_pressure"
"""The ``source`` of the pressure notice in the deferred-notice queue."""


def budget_spent(state: LoopState, settings: LoopSettings) -> int:
    """Agent tokens the budget counts (per ``Limits.budget_scope``)."""
    spent = int((state.get("usage") or {}).get("total_tokens", 0))
    if settings.limits.budget_scope == "thread":
        spent += int((state.get("thread_budget") or {}).get("spent") or 0)
    return spent


def run_budget(state: LoopState, settings: LoopSettings) -> int | None:
    """``Limits.token_budget`` plus what a person granted at check-ins (None: no budget)."""
    budget = settings.limits.token_budget
    if budget is None:
        return None
    extra = int((state.get("run") or {}).get("budget_extra") or 0)
    if settings.limits.budget_scope == "thread":
        extra += int((state.get("thread_budget") or {}).get("extra") or 0)
    return budget + extra


def elapsed(state: LoopState, now: float | None = None) -> float | None:
    """Seconds since the run started (None: not known)."""
    started = (state.get("run") or {}).get("started_at")
    return None if started is None else (time.time() if now is None else now) - started


def timeout_guard(state: LoopState, settings: LoopSettings, now: float | None = None) -> Guard | None:
    """``timeout`` when the run's wall-clock cap is spent, else None."""
    cap, spent = settings.limits.max_duration_s, elapsed(state, now)
    if cap is None or spent is None or spent < cap:
        return None
    return limit_guard(StopReason.TIMEOUT, cap, round(spent, 3))


# --- counting tokens -------------------------------------------------------------------------

_NO_COUNTER: dict[int, weakref.ref[Any]] = {}
"""Models whose own counter failed once (e.g. a tokenizer that cannot load offline)."""


def _has_counter(model: Any) -> bool:
    own = getattr(type(model), "get_num_tokens_from_messages", None)
    if own is None or own in (BaseLanguageModel.get_num_tokens_from_messages,
                              BaseChatModel.get_num_tokens_from_messages):
        return False
    failed = _NO_COUNTER.get(id(model))
    return failed is None or failed() is not model


def _non_latin(message: BaseMessage) -> float:
    """Tokens to add to ~4 characters per token so that text outside ASCII counts half a
    token per UTF-8 byte (a CJK character 1.5, Cyrillic or Greek 1, an emoji 2)."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False,
                                                               default=str)
    if isinstance(message, AIMessage) and message.tool_calls:
        text += json.dumps([c["args"] for c in message.tool_calls], ensure_ascii=False,
                           default=str)
    if text.isascii():
        return 0.0
    ascii_chars = len(text.encode("ascii", "ignore"))
    other_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    return other_bytes / 2 - (len(text) - ascii_chars) / 4


def estimate_tokens(messages: Sequence[BaseMessage], tools: Sequence[BaseTool] = (), *,
                    per_message: int = 3) -> int:
    """A conservative count without the model's tokenizer: about 4 ASCII characters per token,
    half a token per UTF-8 byte of any other script, and ``per_message`` per message."""
    base = count_tokens_approximately(list(messages), tools=list(tools) or None,
                                      extra_tokens_per_message=per_message)
    return base + math.ceil(sum(_non_latin(m) for m in messages))


def count_tokens(model: Any, messages: Sequence[BaseMessage], tools: Sequence[BaseTool] = (), *,
                 per_message: int = 3) -> int:
    """The loop's one token counter: the model's own when it has one that works, else
    ``estimate_tokens`` (``per_message``: its overhead per message)."""
    if _has_counter(model):
        try:
            return int(model.get_num_tokens_from_messages(list(messages), tools=list(tools) or None))
        except Exception:  # noqa: BLE001 - e.g. a tokenizer that cannot load offline
            _NO_COUNTER[id(model)] = weakref.ref(model)
    return estimate_tokens(messages, tools, per_message=per_message)


# --- the token budget ------------------------------------------------------------------------

def _reported(message: BaseMessage) -> UsageMetadata | None:
    """The usage a model call reported for this reply (None: none, or zero as ``skipped_reply``'s)."""
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    return usage if usage and usage["input_tokens"] + usage["output_tokens"] else None


def _estimate(request: Sequence[BaseMessage], model: Any = None) -> tuple[int, int]:
    """(reported tokens of the newest reply's call, tokens counted of the messages after it)."""
    for i in range(len(request) - 1, -1, -1):
        usage = _reported(request[i])
        if usage is not None:
            added = count_tokens(model, request[i + 1:], per_message=PER_MESSAGE)
            return usage["input_tokens"] + usage["output_tokens"], added
    return 0, count_tokens(model, request, per_message=PER_MESSAGE)


def estimate_input(request: Sequence[BaseMessage], model: Any = None) -> int:
    """Input tokens of a request: the newest reply's reported tokens plus the messages after it."""
    reported, added = _estimate(request, model)
    return reported + added


def _last_output(messages: Sequence[BaseMessage]) -> int:
    for message in reversed(messages):
        usage = _reported(message)
        if usage is not None:
            return int(usage["output_tokens"])
    return MIN_FINAL_OUTPUT


def call_guard(request: Sequence[BaseMessage], messages: Sequence[BaseMessage], *, budget: int,
               spent: int, model: Any = None) -> Guard | None:
    """Stop (``token_budget``) unless what is left covers this call (input plus the previous
    reply's output, from ``messages``) and a final answer after it (that, plus this round's
    results again, the stop notice and ``MIN_FINAL_OUTPUT``)."""
    reported, added = _estimate(request, model)
    this_call = reported + added + _last_output(messages)
    why = limit_guard(StopReason.TOKEN_BUDGET, budget, spent)
    notice = count_tokens(model, [HumanMessage(stop_instruction(why))], per_message=PER_MESSAGE)
    needed = this_call + (this_call + added + notice + MIN_FINAL_OUTPUT)
    if needed <= budget - spent:
        return None
    why["estimate"] = needed
    return why


def budget_guard(state: LoopState, settings: LoopSettings, request: Sequence[BaseMessage]) -> Guard | None:
    """``call_guard`` on the graph's state: the run's budget (``run_budget``) and usage."""
    budget = run_budget(state, settings)
    if budget is None:
        return None
    return call_guard(request, state.get("messages") or [], budget=budget,
                      spent=budget_spent(state, settings), model=settings.model)


def answer_room(request: Sequence[BaseMessage], *, budget: int, spent: int, model: Any = None) -> int:
    """Output tokens a final-answer call with this request may use."""
    return budget - spent - estimate_input(request, model)


def final_answer_room(state: LoopState, settings: LoopSettings,
                      request: Sequence[BaseMessage]) -> int | None:
    """``answer_room`` on the graph's state (None: no budget)."""
    budget = run_budget(state, settings)
    if budget is None:
        return None
    return answer_room(request, budget=budget, spent=budget_spent(state, settings), model=settings.model)


def skipped_answer(room: int) -> str:
    """The guard's ``final_answer`` note when no final answer fits."""
    return (f"skipped: the token budget leaves about {max(room, 0)} tokens, fewer than "
            f"{MIN_FINAL_OUTPUT} for an answer")


NO_ANSWER_KIND = "loop_no_answer"
"""The ``langgraph_loop`` kind of ``skipped_reply`` (no model wrote it; zero usage)."""


def skipped_reply(why: Mapping[str, Any], room: int, name: str | None = None) -> AIMessage:
    """The run's last message when no final answer fits: the loop says why (``NO_ANSWER_KIND``)."""
    return AIMessage(NO_ROOM.format(reason=why.get("reason") or "stopped", room=max(room, 0),
                                    least=MIN_FINAL_OUTPUT), name=name,
                     additional_kwargs={"langgraph_loop": {"kind": NO_ANSWER_KIND}},
                     usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})


def spent_tokens(messages: Sequence[BaseMessage], start: int = 0, model: Any = None) -> int:
    """Agent tokens of the replies in ``messages[start:]``: reported, else counted as the model
    node records them; derived from the thread, so any process counts the same."""
    total = 0
    for i in range(start, len(messages)):
        message = messages[i]
        if not isinstance(message, AIMessage):
            continue
        usage = message.usage_metadata
        if usage:
            total += int(usage.get("total_tokens") or usage["input_tokens"] + usage["output_tokens"])
        else:
            total += count_tokens(model, messages[:i]) + count_tokens(model, [message])
    return total


# --- checking in with a person at the budget ----------------------------------------------

BUDGET_TEXT = (
    "This {scope} has used {spent:,} of its {budget:,}-token budget; the next step needs about "
    "{needed:,} more (this model call and a final answer after it), so it is paused.\n\n"
    "- Approve: add {tokens:,} tokens and go on.\n"
    "- Edit: change \"tokens\" to the number of tokens to add, then submit.\n"
    "- Reject: stop here; the agent gives its final answer with what is left (your reason is "
    "passed to it).")
"""The check-in's description: where the budget stands and what each decision does."""
ROUND_TO = 1000
"""The suggested extension is rounded up to a multiple of this."""


@dataclass(frozen=True)
class BudgetAnswer:
    """A budget answer: ``extend`` by ``tokens``, ``stop`` (reason: ``message``), or ``redirect``
    (``message`` added as theirs, and ``tokens``)."""

    action: Literal["extend", "stop", "redirect"]
    tokens: int | None = None
    message: str | None = None


def suggested_tokens(why: Guard) -> int:
    """What the next step needs beyond what is left, rounded up to ``ROUND_TO``."""
    short = int(why.get("estimate") or 0) - (int(why.get("limit") or 0) - int(why.get("value") or 0))
    return max(ROUND_TO, -(-short // ROUND_TO) * ROUND_TO)


def budget_question(why: Guard, scope: str = "run") -> HITLRequest:
    """The check-in question."""
    tokens = suggested_tokens(why)
    text = BUDGET_TEXT.format(scope="conversation" if scope == "thread" else scope,
                              spent=int(why.get("value") or 0), budget=int(why.get("limit") or 0),
                              needed=int(why.get("estimate") or 0), tokens=tokens)
    return one_action(BUDGET_TITLE, {"tokens": tokens}, text)


def parse_budget_answer(value: Any, offered: int = ROUND_TO) -> BudgetAnswer:
    """A budget answer: approve adds ``offered`` tokens, edit the edited ``tokens`` (with a
    ``message``: a redirect), reject stops. A ``ValueError`` names the shape to send."""
    decision = the_decision(value, "token budget")
    if decision["type"] == "approve":
        return BudgetAnswer(action="extend", tokens=offered)
    if decision["type"] == "reject":
        message = decision.get("message")
        return BudgetAnswer(action="stop", message=message.strip() if isinstance(message, str)
                            and message.strip() else None)
    args = (decision.get("edited_action") or {}).get("args")
    if not isinstance(args, Mapping) or "tokens" not in args:
        raise ValueError(f"token budget: an 'edit' carries args {{'tokens': N}}, got {args!r}")
    tokens = whole_number(args["tokens"], "token budget: the edited 'tokens'")
    message = args.get("message")
    if isinstance(message, str) and message.strip():
        return BudgetAnswer(action="redirect", tokens=tokens, message=message.strip())
    return BudgetAnswer(action="extend", tokens=tokens)


BUDGET_ANSWER = answer_schema(parse_budget_answer)
"""The check-in's resume schema, checked inside ``interrupt()`` before it is stored."""


def redirect_message(text: str) -> HumanMessage:
    """A person's redirect, marked so that it is not taken for a new run's request."""
    return HumanMessage(text, additional_kwargs={"langgraph_loop": {"kind": REDIRECT_KIND}})


@dataclass
class CheckIn:
    """A check-in's outcome: the extension in all, a person's redirect (the thread gets it first,
    through the ``before_model`` hooks, then the call is weighed again), the stop."""

    extra: int
    added: HumanMessage | None = None
    stop: Guard | None = None


def check_in(over: Callable[[int], Guard | None], ask: Callable[[Any], Any], *, extra: int = 0,
             scope: str = "run", due: Guard | None = None) -> CheckIn:
    """Ask (``ask``: ``interrupt``) until ``over(extra)``, the budget rule with ``extra``
    granted, passes, the person stops, or they write a redirect; ``due``: a question asked
    already, whose answer is read first even if the call now fits."""
    while (why := due or over(extra)) is not None:
        due = None
        answer = parse_budget_answer(ask(budget_question(why, scope)), suggested_tokens(why))
        if answer.action == "stop":
            return CheckIn(extra, stop={**why, "human": person_stop(answer.message)})
        extra += answer.tokens or 0
        if answer.action == "redirect":
            return CheckIn(extra, redirect_message(str(answer.message)))
    return CheckIn(extra)


def summary_room(state: LoopState, settings: LoopSettings, request: Sequence[BaseMessage],
                 summarizer: Any) -> int | None:
    """Output tokens a compaction summary may use (None: no budget): what is left after its
    input, a compacted call and a final answer, so a summary never passes ``token_budget``."""
    budget = run_budget(state, settings)
    if budget is None or settings.compaction is None:
        return None
    held = budget_spent(state, settings) + settings.compaction.max_tokens + MIN_FINAL_OUTPUT
    return budget - held - count_tokens(summarizer, request, per_message=PER_MESSAGE)


def max_tokens_of(model: Any) -> tuple[bool, int | None]:
    """Does the model take a ``max_tokens`` setting, and its configured value."""
    fields = getattr(type(model), "model_fields", {})
    if "max_tokens" not in fields:
        return False, None
    value = getattr(model, "max_tokens", None)
    return True, value if isinstance(value, int) else None


# --- budget pressure -------------------------------------------------------------------------

def pressure_seen(state: LoopState) -> bool:
    """The budget-pressure notice was queued in this run and has been delivered."""
    if not (state.get("run") or {}).get("pressure_queued"):
        return False
    return not any(n.get("source") == PRESSURE_SOURCE for n in state.get("loop_notices") or [])


def budget_pressure_guard(state: LoopState, settings: LoopSettings) -> Guard | None:
    """``budget_pressure`` once the model has seen the pressure notice, else None."""
    pressure, budget = settings.limits.budget_pressure, run_budget(state, settings)
    if pressure is None or budget is None or not pressure_seen(state):
        return None
    return guard("budget_pressure", StopReason.BUDGET_PRESSURE, threshold=pressure.threshold,
                 limit=budget, value=budget_spent(state, settings))


# --- consecutive tool errors ----------------------------------------------------------------

def failed_rounds(messages: Sequence[BaseMessage], end: int, request_id: str | None, *,
                  limit: int) -> int:
    """Failed rounds in a row in ``messages[:end]`` (counted up to ``limit``)."""
    count, statuses = 0, []
    for i in range(end - 1, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if request_id is not None and msg.id == request_id:
            break
        if isinstance(msg, ToolMessage):
            if not is_blocked(msg):
                statuses.append(msg.status)
            continue
        if not isinstance(msg, AIMessage):
            continue  # notices and continuation messages between rounds
        if statuses and set(statuses) != {"error"}:
            break  # a round with a success
        count += bool(statuses)
        statuses = []
        if count >= limit:
            break
    return count


def tool_errors_guard(ai: AIMessage, messages: Sequence[BaseMessage], end: int,
                      request_id: str | None, limit: int | None) -> Guard | None:
    """The stop when ``ai`` (at ``end``) asks for tools after ``limit`` failed rounds in a row."""
    if limit is None or not (ai.tool_calls or ai.invalid_tool_calls):
        return None
    count = failed_rounds(messages, end, request_id, limit=limit)
    return limit_guard(StopReason.TOOL_ERRORS, limit, count) if count >= limit else None
