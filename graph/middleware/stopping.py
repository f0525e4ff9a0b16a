"""What both our middlewares share inside ``create_agent``: sending a call (what a step
writes before it is streamed first, in the order the model saw), a stop (the calls not run
answered, the stop notice and record, one tools-free final answer tagged ``final_answer``),
and the tools' steps, by which a person's words reach the ``before_model`` hooks (``ToolSteps``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, NamedTuple, cast

from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import merge_configs
from langgraph.config import get_config
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.types import Command

from langgraph_loop.core.drive import adrive, drive
from langgraph_loop.core.messages import notice_message
from langgraph_loop.core.state import StopEvent, ashow_messages, emit, show_messages
from langgraph_loop.core.stop import Guard, stop_fields
from langgraph_loop.engine.dialogue import typed_instead
from langgraph_loop.engine.final import final_answer, none_choice, stop_notice

__all__ = ["FINAL_ANSWER", "Outgoing", "Result", "SteppedCalls", "ToolSteps", "answer_of", "applied",
           "asend", "final_call", "notice_for", "send", "stop_record", "stored_stop", "thread_of"]

FINAL_ANSWER = "final_answer"
"""The tag and run name of the final-answer call (the graph's too)."""


class Outgoing(NamedTuple):
    """A call to send, the messages written before it, and is it the final answer."""

    request: ModelRequest[Any]
    shown: Sequence[BaseMessage] = ()
    final: bool = False


def _response(result: ModelResponse[Any] | AIMessage) -> ModelResponse[Any]:
    return result if isinstance(result, ModelResponse) else ModelResponse(result=[result])


def send(handler: Callable[[ModelRequest[Any]], Any], call: Outgoing) -> ModelResponse[Any]:
    """Send ``call`` through ``handler`` (the rest of ``create_agent``'s chain)."""
    config = get_config()
    show_messages(config, list(call.shown))
    if not call.final:
        return _response(handler(call.request))
    step = RunnableLambda(handler, name=FINAL_ANSWER)
    return _response(step.invoke(call.request, merge_configs(config, {"tags": [FINAL_ANSWER]})))


async def asend(handler: Callable[[ModelRequest[Any]], Awaitable[Any]], call: Outgoing) -> ModelResponse[Any]:
    """Async ``send``."""
    config = get_config()
    await ashow_messages(config, list(call.shown))
    if not call.final:
        return _response(await handler(call.request))
    step: RunnableLambda[Any, Any] = RunnableLambda(lambda _: None, afunc=handler, name=FINAL_ANSWER)
    return _response(await step.ainvoke(call.request, merge_configs(config, {"tags": [FINAL_ANSWER]})))


Result = ModelResponse[Any] | ExtendedModelResponse[Any]
ToolResult = ToolMessage | Command[Any]


class SteppedCalls:
    """``wrap_model_call`` of both middlewares: the calls their ``_steps`` yields are sent
    through the rest of the chain (``send``), each response handed back to it."""

    def _steps(self, request: ModelRequest[Any]) -> Generator[Outgoing, ModelResponse[Any], Result]:
        raise NotImplementedError

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> Result:
        """Send the calls ``_steps`` makes; its result is the model step's."""
        return drive(self._steps(request), lambda call: send(handler, call))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Callable[
            [ModelRequest[Any]], Awaitable[ModelResponse[Any]]]) -> Result:
        """Async ``wrap_model_call``."""
        async def sent(call: Outgoing) -> ModelResponse[Any]:
            return await asend(handler, call)

        return await adrive(self._steps(request), sent)


class ToolSteps:
    """``wrap_tool_call`` of both middlewares: a call runs unless ``_refused`` answers it, and
    the graph step it is answered in is noted (by call id, the newest 256) for a ``before_model``
    hook that writes a person's words: hooks listed before it ran already once the tools were
    answered, so it jumps back to the first (``hooks_before``)."""

    tool_steps: dict[str, int]
    orders: set[bool]  # the orders this object has learned (both: it serves two agents)

    def _refused(self, request: ToolCallRequest) -> ToolMessage | None:
        return None

    def _noted(self, request: ToolCallRequest) -> ToolMessage | None:
        if len(self.tool_steps) >= 256:
            self.tool_steps.clear()
        self.tool_steps[str(request.tool_call.get("id"))] = get_config()["metadata"]["langgraph_step"]
        return self._refused(request)

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolResult]) -> ToolResult:
        """The call, or its refusal."""
        refused = self._noted(request)
        return refused if refused is not None else handler(request)

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[ToolResult]]) -> ToolResult:
        """Async ``wrap_tool_call``."""
        refused = self._noted(request)
        return refused if refused is not None else await handler(request)

    def learned_order(self, messages: Sequence[BaseMessage]) -> bool | None:
        """Did ``before_model`` hooks run before this one? Learned when the tools ran here (the
        newest message answers a call noted here), else None."""
        ran = self.tool_steps.get(str(getattr(messages[-1], "tool_call_id", ""))) if messages else None
        if ran is None:
            return None
        learned = get_config()["metadata"]["langgraph_step"] > ran + 1
        self.orders.add(learned)
        return learned

    def hooks_before(self, messages: Sequence[BaseMessage], kept: bool | None = None) -> bool:
        """``learned_order``, else ``kept`` (what the thread learned), else the one order this
        object has learned (none once it has learned both: it serves two agents)."""
        learned = self.learned_order(messages)
        if learned is not None:
            return learned
        return kept if kept is not None else self.orders == {True}


def applied(messages: Sequence[BaseMessage], writes: Sequence[BaseMessage]) -> list[Any]:
    """``messages`` with ``writes`` applied as the thread's reducer applies them."""
    ids = {m.id for m in messages}  # writes applied already: their removals are done
    kept = [w for w in writes if not (isinstance(w, RemoveMessage) and w.id not in ids)]
    merged: Any = add_messages(list(messages), kept)  # type: ignore[arg-type]
    return list(merged)


def thread_of(state: Mapping[str, Any]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The thread as both middlewares read it, and the writes that make it so: a message a
    person typed while the loop question was open is a redirect of the paused run
    (``typed_instead``), not a new run, whichever of the two reads it first."""
    messages: list[BaseMessage] = list(state.get("messages") or [])
    fixed = (typed_instead(messages) if state.get("loop_question") else None) or []
    return (applied(messages, fixed) if fixed else messages), fixed


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


def stop_record(runtime: Runtime[Any] | None, why: Guard) -> dict[str, Any]:
    """The stop record to write; the ``stop`` event is emitted."""
    emit(runtime, StopEvent(event="stop", reason=why["reason"], iteration=1, guard=why))
    return dict(stop_fields(why))


def answer_of(final: ModelResponse[Any], why: Guard) -> list[BaseMessage]:
    """The final answer as stored (its calls dropped, never empty)."""
    reply = next((m for m in final.result if isinstance(m, AIMessage)), None)
    return [final_answer(reply, why["reason"])] if reply is not None else []
