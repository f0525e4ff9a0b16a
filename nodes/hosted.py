"""The user's LangChain ``AgentMiddleware`` inside the loop graph, with ``create_agent``'s semantics:
each hook runs where ``create_agent`` runs it (``docs/middleware.md#what-runs-where``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, NotRequired, Required, get_args, get_origin, get_type_hints

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromSchema,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.runtime import get_runtime
from langgraph.types import Command
from typing_extensions import TypedDict

from langgraph_loop.core.drive import Io, StepNode, Steps, adrive, aperform, around, drive, perform
from langgraph_loop.core.history import removal_breaks, resolve_removals
from langgraph_loop.core.hosting import JUMP_TARGETS, can_jump_to, implements
from langgraph_loop.core.messages import as_message, call_names, newest_reply
from langgraph_loop.core.models import map_chat_models
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason, guard, stop_answer_text, stop_update
from langgraph_loop.engine.final import none_choice
from langgraph_loop.nodes.binding import native_kwargs
from langgraph_loop.nodes.respond import read_native_answer, read_tool_answer, structured_due

__all__ = ["HookNode", "ModelCalls", "Reply", "merged_schemas", "middleware_end", "tool_call_wrappers"]


# --- state: the middleware's schemas beside the loop's ----------------------------------------

def _omitted(hint: Any, flag: str) -> bool:
    """Is a field marked ``OmitFromInput``/``OmitFromOutput`` (``flag``: input or output)?"""
    while get_origin(hint) in (Required, NotRequired):
        hint = get_args(hint)[0]
    metadata = getattr(hint, "__metadata__", ()) if get_origin(hint) is Annotated else ()
    return any(isinstance(m, OmitFromSchema) and getattr(m, flag) for m in metadata)


def merged_schemas(settings: LoopSettings, input_schema: type[Any], output_schema: type[Any]
                   ) -> tuple[type[Any], type[Any], type[Any]]:
    """The loop's state, input and output schemas with the user's and the middleware's
    ``state_schema`` merged as ``create_agent`` merges them (the loop's keys win)."""
    extra: dict[str, Any] = {}
    if settings.middleware:
        extra["jump_to"] = get_type_hints(AgentState, include_extras=True)["jump_to"]
    for schema in [*(m.state_schema for m in settings.middleware), settings.state_schema]:
        if schema is not None:
            extra.update(get_type_hints(schema, include_extras=True))
    own = get_type_hints(LoopState, include_extras=True)
    extra = {k: v for k, v in extra.items() if k not in own}
    if not extra:
        return LoopState, input_schema, output_schema
    state = TypedDict("LoopAgentState", {**extra, **own}, total=False)  # type: ignore[operator,misc]

    def plus(schema: type[Any], flag: str) -> type[Any]:
        fields = {k: v for k, v in extra.items() if not _omitted(v, flag)}
        if not fields:
            return schema
        return TypedDict(schema.__name__, {**get_type_hints(schema, include_extras=True),  # type: ignore[operator,no-any-return]
                                           **fields}, total=False)

    return state, plus(input_schema, "input"), plus(output_schema, "output")


# --- node hooks ------------------------------------------------------------------------------

class HookNode(StepNode):
    """A middleware's node hook as the graph node ``"<middleware name>.<hook>"`` (only an
    async hook under ``invoke`` is an error, as under ``create_agent``)."""

    def __init__(self, middleware: AgentMiddleware[Any, Any], hook: str) -> None:
        self.middleware, self.hook = middleware, hook
        self.name = f"{middleware.name}.{hook}"
        self.has_sync, self.has_async = implements(middleware, hook), implements(middleware, f"a{hook}")

    def _steps(self, state: Any, config: RunnableConfig | None) -> Steps[Any]:
        """The hook's call: the async one under ``ainvoke`` (the sync one in a thread when only
        it is implemented), then its update checked."""
        hook = getattr(self.middleware, self.hook) if self.has_sync else self._async_only
        ahook = (getattr(self.middleware, f"a{self.hook}") if self.has_async
                 else partial(run_in_executor, config, hook))
        return self._checked(state, (yield Io(hook, ahook, (state, get_runtime()))))

    def _async_only(self, *args: Any) -> Any:
        raise NotImplementedError(f"{self.name}: only the async hook a{self.hook} is "
                                  f"implemented; run the agent with ainvoke/astream")

    def _checked(self, state: Any, update: Any) -> Any:
        """The hook's update with its ``RemoveMessage``s resolved against the stored messages
        (``REMOVE_ALL_MESSAGES`` spelled out: the lowest supported LangGraph does not know it), or
        a ``ValueError`` naming the hook for a ``jump_to`` that names no target, or removals that
        would break the pairing."""
        jump = update.get("jump_to") if isinstance(update, dict) else None
        if jump is not None and jump not in JUMP_TARGETS:
            declared = list(can_jump_to(self.middleware, self.hook))
            raise ValueError(f"middleware {self.name}: jump_to {jump!r} is not a target; use one "
                             f"of {list(JUMP_TARGETS)} (declared: {declared})")
        messages = update.get("messages") if isinstance(update, dict) else None
        if not isinstance(messages, list) or not any(isinstance(m, RemoveMessage) for m in messages):
            return update
        stored = state.get("messages") or []
        resolved = resolve_removals(stored, messages)
        broken = removal_breaks(stored, resolved)
        if broken:
            raise ValueError(f"middleware {self.name}: its update would break the transcript "
                             f"({'; '.join(broken)}); remove a tool call's AIMessage to remove "
                             f"its results with it, or replace a result under the same id")
        return {**update, "messages": resolved}


def middleware_end(state: LoopState) -> dict[str, Any]:
    """The ``middleware_end`` node: a hook jumped to ``"end"``. The run stops (``terminated``,
    no final answer); the newest reply's unanswered calls get error results."""
    newest = newest_reply(state.get("messages") or [])
    run = {k: v for k, v in (state.get("run") or {}).items() if k != "decision"}
    why = guard("hooks", StopReason.TERMINATED, detail="a middleware hook jumped to 'end'")
    names = call_names(newest.reply) if newest.reply is not None else {}
    answers = [ToolMessage(stop_answer_text(why), tool_call_id=i, name=names.get(i), status="error")
               for i in newest.pending]
    return {"messages": answers, **stop_update(run, why, finalized=True)}


# --- wrap_model_call ---------------------------------------------------------------------------

Layer = Steps[tuple[ModelResponse[Any], list[Command[Any]]]]  # the call from one middleware in


def _normalised(result: Any) -> tuple[ModelResponse[Any], list[Command[Any]]]:
    """A handler's return as ``(ModelResponse, its own commands)``."""
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result]), []
    if isinstance(result, ExtendedModelResponse):
        return result.model_response, [] if result.command is None else [result.command]
    return result, []


@dataclass
class Reply:
    """What the middleware chain returned: the reply the loop records, the response's other
    messages and ``structured_response``, and the commands to apply after the node's update."""

    reply: AIMessage
    before: list[BaseMessage] = field(default_factory=list)
    after: list[BaseMessage] = field(default_factory=list)
    commands: list[Command[Any]] = field(default_factory=list)
    structured: Any = None

    @classmethod
    def of(cls, response: ModelResponse[Any], commands: list[Command[Any]]) -> Reply:
        """Split a response (``ValueError`` without an ``AIMessage``; a command's ``goto``,
        ``resume`` or ``graph`` is refused, as ``create_agent`` refuses it)."""
        for command in commands:
            for attr in ("goto", "resume", "graph"):
                if getattr(command, attr):
                    raise NotImplementedError(
                        f"Command {attr} is not yet supported in wrap_model_call middleware"
                        + (". Use the jump_to state field with before_model/after_model hooks "
                           "instead." if attr == "goto" else "."))
        result = list(response.result)
        at = max((i for i, m in enumerate(result) if isinstance(m, AIMessage)), default=-1)
        if at < 0:
            raise ValueError("wrap_model_call middleware: the model response holds no AIMessage")
        return cls(result[at], result[:at], result[at + 1:], commands,  # type: ignore[arg-type]
                   response.structured_response)

    def output(self, update: dict[str, Any]) -> Any:
        """The model node's update with the rest of the response, then the commands (a command
        that writes ``structured_response`` too is LangGraph's ``InvalidUpdateError``)."""
        if self.structured is not None:
            update = {**update, "structured_response": self.structured}
        if self.before or self.after:
            *head, reply = update["messages"]
            update = {**update, "messages": [*head, *self.before, reply, *self.after]}
        return [Command(update=update), *self.commands] if self.commands else update


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class ModelCalls:
    """The user's ``wrap_model_call`` middleware around the model node's call."""

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.chain = settings.hooked("wrap_model_call")
        self.dynamic_tools = bool(settings.hooked("wrap_tool_call"))

    def request(self, state: LoopState, messages: Sequence[BaseMessage],
                offered: Sequence[BaseTool] | None, *, final: bool) -> ModelRequest[Any]:
        """The ``ModelRequest`` the middleware see: the loop's request, as ``create_agent``
        shapes it (the system message apart; the tools without the output tools)."""
        settings = self.settings
        system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
        tools: list[Any] = [*(settings.tools if offered is None else offered), *settings.provider_tools]
        structured = settings.structured
        choice = None
        if final and structured is not None and not structured.native:
            choice = structured.forced_choice
        elif final and tools:
            choice = none_choice(settings.chat_model)
        return ModelRequest(model=settings.chat_model or settings.model,  # type: ignore[arg-type]
                            messages=list(messages[1:] if system is not None else messages),  # type: ignore[arg-type]
                            system_message=system, tool_choice=choice, tools=tools,
                            response_format=structured.strategy if structured else None,
                            state=state, runtime=get_runtime())  # type: ignore[arg-type]

    def bound(self, request: ModelRequest[Any], base: ModelRequest[Any],
              binding: Callable[[], Runnable[Any, Any]]) -> Runnable[Any, Any]:
        """The loop's own ``binding`` for an unchanged request, else the request bound as
        ``create_agent`` binds one (``ValueError`` for tools no one can run)."""
        if (request.model is base.model and _same(request.tools, base.tools)
                and request.tool_choice == base.tool_choice and not request.model_settings
                and request.response_format is base.response_format):
            return binding()
        known = {t.name for t in self.settings.tools}
        unknown = [t.name for t in request.tools if isinstance(t, BaseTool) and t.name not in known]
        if unknown and not self.dynamic_tools:
            raise ValueError(f"Middleware added tools that the agent doesn't know how to execute "
                             f"(wrap_model_call). Unknown tools: {unknown}; registered tools: "
                             f"{sorted(known)}. Pass them in tools=[...] or on the middleware's "
                             f"tools, or run them in a wrap_tool_call middleware")
        tools, fmt, structured = list(request.tools), request.response_format, self.settings.structured
        extra: dict[str, Any] = dict(request.model_settings)
        choice = request.tool_choice
        if isinstance(fmt, ToolStrategy):
            names = {spec.name for spec in fmt.schema_specs}
            declared = structured.bindings if structured is not None else {}
            if names - set(declared):
                raise ValueError(f"ToolStrategy specifies tools {sorted(names - set(declared))} "
                                 f"which weren't declared in the original response format")
            tools += [declared[n].tool for n in sorted(names)]
            choice = request.tool_choice if base.tool_choice is not None else "any"  # final: forced
        elif isinstance(fmt, ProviderStrategy):
            extra.update(fmt.to_model_kwargs())
        elif fmt is not None:
            raise ValueError("wrap_model_call middleware: response_format must be a ToolStrategy "
                             "or ProviderStrategy")

        def bind(chat: Any) -> Runnable[Any, Any]:
            if isinstance(fmt, ProviderStrategy):
                strict = native_kwargs(structured, chat) if structured is not None else {}
                return chat.bind_tools(tools, **{**strict, **extra})  # type: ignore[no-any-return]
            if tools:
                return chat.bind_tools(tools, tool_choice=choice, **extra)  # type: ignore[no-any-return]
            return chat.bind(**extra) if extra else chat  # type: ignore[no-any-return]

        # the agent's own model keeps its wrappers (fallbacks, retries, configurable fields)
        model = self.settings.model if request.model is base.model else request.model
        return map_chat_models(model, bind)

    def response(self, reply: AIMessage) -> ModelResponse[Any]:
        """The model's reply as the handler returns it; a structured answer that does not parse
        raises here, inside the chain, so a retry middleware sees it as under ``create_agent``."""
        structured = self.settings.structured
        if structured is not None and structured_due({"messages": [reply]}, structured):
            if structured.native:
                read_native_answer(reply, structured)
            else:
                read_tool_answer(reply, structured)
        return ModelResponse(result=[reply])

    def steps(self, state: LoopState, messages: Sequence[BaseMessage],
              binding: Callable[[], Runnable[Any, Any]], offered: Sequence[BaseTool] | None,
              final: bool, config: RunnableConfig) -> Steps[Reply]:
        """The model call through the chain, the first middleware outermost, as ``create_agent``
        nests the handlers."""
        base = self.request(state, messages, offered, final=final)

        def through(i: int, request: ModelRequest[Any]) -> Layer:
            """From middleware ``i`` in: the commands of inner layers' last call, then its own
            (inner first, as ``create_agent`` accumulates them; a retried call keeps only the last)."""
            if i == len(self.chain):  # the model itself
                bound = self.bound(request, base, binding)
                system = [request.system_message] if request.system_message else []
                reply = yield Io(bound.invoke, bound.ainvoke, ([*system, *request.messages], config))
                return self.response(as_message(reply, "model")), []
            seen: list[Command[Any]] = []

            def handler(req: ModelRequest[Any]) -> Steps[ModelResponse[Any]]:
                seen.clear()
                response, commands = yield from through(i + 1, req)
                seen.extend(commands)
                return response

            wrapper = self.chain[i]
            result = yield around(wrapper.wrap_model_call, wrapper.awrap_model_call, request, handler)
            response, own = _normalised(result)
            return response, [*seen, *own]

        return Reply.of(*(yield from through(0, base)))


# --- wrap_tool_call --------------------------------------------------------------------------

Wrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Any]], Any]
OwnWrapper = Callable[[ToolCallRequest, Callable[[ToolCallRequest], Steps[Any]]], Steps[Any]]


def _invalid_args(exc: Exception) -> str:
    """``ToolNode``'s handling under ``create_agent``: only invalid arguments become results
    inside the call; anything else is raised through the middleware."""
    if isinstance(exc, ToolInvocationError):
        return str(exc)
    raise exc


def tool_call_wrappers(settings: LoopSettings, own: OwnWrapper, errors: Callable[[Exception], str]
                       ) -> tuple[Wrapper, Wrapper, Any]:
    """``ToolNode``'s ``wrap_tool_call``/``awrap_tool_call`` and ``handle_tool_errors``: the
    user's wrappers (the first outermost) around the loop's own (``own``, a step). By default a
    tool's exception passes through them (``ToolRetryMiddleware`` sees it), then ``errors`` makes
    it an error result; one a middleware raises itself fails the run, as under ``create_agent``."""
    users = settings.hooked("wrap_tool_call")
    default = settings.handle_tool_errors is None

    def steps(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Steps[Any]:
        raised: list[Exception] = []

        def tool(req: ToolCallRequest) -> Steps[Any]:
            """``ToolNode``'s ``execute`` (the run's mode's own: it is both sides of the ``Io``)."""
            try:
                return (yield Io(execute, execute, (req,)))
            except Exception as exc:
                raised.append(exc)
                raise

        def at(i: int, req: ToolCallRequest) -> Steps[Any]:
            if i == len(users):
                return (yield from own(req, tool))
            return (yield around(users[i].wrap_tool_call, users[i].awrap_tool_call, req, partial(at, i + 1)))
        try:
            return (yield from at(0, request))
        except Exception as exc:  # only the tool's own exception becomes an error result
            if not (users and default) or isinstance(exc, GraphBubbleUp) or all(exc is not e for e in raised):
                raise
            call = request.tool_call
            return ToolMessage(errors(exc), tool_call_id=str(call["id"]), name=call["name"], status="error")

    def wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        return drive(steps(request, execute), perform)

    async def awrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        return await adrive(steps(request, execute), aperform)

    handled = (_invalid_args if users else errors) if default else settings.handle_tool_errors
    return wrap, awrap, handled
