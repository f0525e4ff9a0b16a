"""How our middleware carries out a stop inside ``create_agent`` (both middlewares, one place).

A stop is decided by the engine (a loop stop, ``graph/engine/decision.py``; the token budget,
``graph/engine/limits.py``). Inside the model call that found it, the middleware then:

1. sends the **final-answer call** (``final_call``): the request with what the stop writes after
   the reply (its calls answered, the stop notice: ``engine/final.py: stop_notice``), every tool
   still defined and none usable (``tool_choice`` none where the provider takes it);
2. **records the stop** (``stopped``): the final answer as stored (its calls dropped, never
   empty: ``engine/final.py: final_answer``), the ``stop`` event, and the stop record
   ``stop_reason``/``stop_guard`` (``core/stop.py: stop_fields``), the same keys the graph writes.

Example:
    >>> from langgraph_loop.core.stop import guard
    >>> answer, update = stopped(None, guard("limits", "token_budget", limit=10, value=12), None)
    >>> answer, update["stop_reason"], update["stop_guard"]["limit"]
    ([], 'token_budget', 10)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langgraph.runtime import Runtime

from langgraph_loop.core.messages import notice_message
from langgraph_loop.core.state import StopEvent, emit
from langgraph_loop.core.stop import Guard, stop_fields
from langgraph_loop.engine.final import final_answer, none_choice, stop_notice

__all__ = ["final_call", "notice_for", "stopped", "stored_stop"]


def stored_stop(state: Mapping[str, Any]) -> Guard | None:
    """The stop record's guard in an agent's state (None: no stop recorded)."""
    value = state.get("stop_guard")
    return cast(Guard, value) if isinstance(value, dict) else None


def notice_for(why: Guard, run: str | None, *, hidden: bool) -> HumanMessage | None:
    """The stop notice the final-answer call reads, as one message."""
    return notice_message([stop_notice(why, str(run or ""))], hidden=hidden)


def final_call(request: ModelRequest[Any], messages: Sequence[AnyMessage],
               model_settings: Mapping[str, Any] | None = None) -> ModelRequest[Any]:
    """The final-answer call: ``messages`` sent with every tool defined and their use forbidden
    where the provider can (``model_settings``: e.g. ``max_tokens`` bounded to a budget)."""
    model = request.model
    choice = none_choice(model) if isinstance(model, BaseChatModel) else None
    extra: dict[str, Any] = {} if model_settings is None else {"model_settings": dict(model_settings)}
    return request.override(messages=list(messages), tool_choice=choice, **extra)


def stopped(runtime: Runtime[Any] | None, why: Guard, final: ModelResponse[Any] | None
            ) -> tuple[list[BaseMessage], dict[str, Any]]:
    """The final answer to store (none when no call was made) and the stop record; the
    ``stop`` event is emitted."""
    reply = next((m for m in final.result if isinstance(m, AIMessage)), None) if final else None
    emit(runtime, StopEvent(event="stop", reason=why["reason"], iteration=1, guard=why))
    return ([final_answer(reply, why["reason"])] if reply is not None else []), dict(stop_fields(why))
