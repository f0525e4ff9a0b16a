"""Run the same tools and the same scripted model through LangChain's ``create_agent`` (the
reference) and ``create_loop_agent``, and compare what legitimately must be the same.

Each agent gets its own fresh model built from the same script, its own in-memory checkpointer
and one thread; a list of inputs is run in order on that thread (a later input may be a callable
``previous_result -> input``, e.g. to resume the interrupts the previous step raised).

Normalised away, because they differ legitimately: message ids, response/usage metadata, the
loop's own state keys (``stop_reason``, ``iteration``, ...: only the reference's keys are
compared) and the loop's notices (``is_notice``). Compared: every
state key the reference has (messages with their content, names, tool calls and call ids, tool
results with status and artifact; custom keys; ``structured_response``), the messages each
model call received, the interrupts raised, and the exception a run raised (type and text).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pprint import pformat
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from langgraph_loop import create_loop_agent
from langgraph_loop.core.messages import is_notice
from langgraph_loop.scripted import ScriptedChatModel

THREAD = {"configurable": {"thread_id": "parity"}}

Seen = Callable[[], list[Any]]
ModelFactory = Callable[[], tuple[Any, Seen]]


# --------------------------------------------------------------------------- scripts


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call with a fixed id (both agents see the same ids)."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def calls(*items: dict[str, Any], content: str = "") -> AIMessage:
    """A scripted model reply with these tool calls."""
    return AIMessage(content=content, tool_calls=list(items))


def scripted(*script: Any) -> ModelFactory:
    """A factory of fresh ``ScriptedChatModel``s replaying ``script``; what a model saw is its
    recorded requests."""

    def make() -> tuple[Any, Seen]:
        model = ScriptedChatModel(script=copy.deepcopy(list(script)))
        return model, lambda: [normalise_messages(r) for r in model.requests]

    return make


# --------------------------------------------------------------------------- normalising


def _content(content: Any) -> Any:
    """Message content with the volatile ids of content blocks removed."""
    if isinstance(content, list):
        return [{k: v for k, v in b.items() if k != "id"} if isinstance(b, dict) else b for b in content]
    return content


def _value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {"__model__": type(value).__name__, **value.model_dump()}
    return value


def normalise_message(message: BaseMessage) -> dict[str, Any]:
    """What must match between the agents: type, content, name, calls, call ids, status."""
    out: dict[str, Any] = {"type": message.type, "content": _content(message.content)}
    if message.name is not None:
        out["name"] = message.name
    if isinstance(message, AIMessage):
        out["tool_calls"] = [(c["name"], c["args"], c["id"]) for c in message.tool_calls]
        if message.invalid_tool_calls:
            out["invalid_tool_calls"] = [(c["name"], c["args"], c["id"]) for c in message.invalid_tool_calls]
    if isinstance(message, ToolMessage):
        out.update(tool_call_id=message.tool_call_id, status=message.status,
                   artifact=_value(message.artifact))
    if message.type == "remove":
        out["id"] = message.id
    return out


def normalise_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The messages without the loop's notices, each normalised."""
    return [normalise_message(m) for m in messages if not is_notice(m)]


def normalise_state(state: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``keys`` of a state (missing keys show as ``"<missing>"``), messages normalised."""
    out: dict[str, Any] = {}
    for key in keys:
        value = state.get(key, "<missing>")
        is_messages = key == "messages" and isinstance(value, list)
        out[key] = normalise_messages(value) if is_messages else _value(value)
    return out


def _interrupts(result: Any) -> list[Any]:
    found = result.get("__interrupt__", []) if isinstance(result, Mapping) else []
    return sorted(repr(i.value) for i in found)


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    """One agent's run: the result of each step, its final stored state, what its model saw, and
    the exception that ended it (if any)."""

    results: list[Any] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    seen: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    agent: Any = None

    @property
    def result(self) -> Any:
        """The last step's result."""
        return self.results[-1] if self.results else None

    @property
    def messages(self) -> list[BaseMessage]:
        return list(self.state.get("messages", []))

    def error_text(self) -> str | None:
        return None if self.error is None else f"{type(self.error).__name__}: {self.error}"


@dataclass
class Pair:
    """The reference run (``create_agent``) and the loop run (``create_loop_agent``)."""

    reference: Outcome
    loop: Outcome

    def assert_same(self, *, seen: bool = True) -> None:
        """Same exception, same interrupts, same reference state keys, same model inputs."""
        ref, loop = self.reference, self.loop
        same("how the run ended (exception)", loop.error_text(), ref.error_text())
        same("interrupts of each step", [_interrupts(r) for r in loop.results],
              [_interrupts(r) for r in ref.results])
        keys = [k for k in ref.state if not k.startswith("__")]
        same("final state", normalise_state(loop.state, keys), normalise_state(ref.state, keys))
        result = ref.result if isinstance(ref.result, Mapping) else {}
        out_keys = [k for k in result if not k.startswith("__")]
        same("invoke output", normalise_state(loop.result or {}, out_keys),
              normalise_state(result, out_keys))
        if seen:
            same("messages each model call received", loop.seen, ref.seen)


def same(what: str, loop: Any, reference: Any) -> None:
    """Fail with both sides printed when the loop's ``what`` differs from the reference's."""
    if loop != reference:
        raise AssertionError(f"{what} differs\n--- create_agent:\n{pformat(reference, width=110)}"
                             f"\n--- create_loop_agent:\n{pformat(loop, width=110)}")


def _run(agent: Any, inputs: Sequence[Any], *, invoke: str, context: Any, config: Mapping[str, Any],
         seen: Seen) -> Outcome:
    outcome = Outcome(agent=agent)
    run_config = {**THREAD, **config}
    kwargs: dict[str, Any] = {} if context is None else {"context": context}
    try:
        for item in inputs:
            value = item(outcome.result) if callable(item) else item
            if invoke == "ainvoke":
                result = asyncio.run(agent.ainvoke(value, run_config, **kwargs))
            else:
                result = agent.invoke(value, run_config, **kwargs)
            outcome.results.append(result)
    except Exception as exc:  # noqa: BLE001 - the exception is part of the behaviour compared
        outcome.error = exc
    try:
        outcome.state = dict(agent.get_state(run_config).values)
    except Exception:  # noqa: BLE001 - nothing stored yet
        outcome.state = {}
    outcome.seen = seen()
    return outcome


def run_both(
    model: ModelFactory,
    tools: Sequence[Any],
    inputs: Any,
    *,
    common: Mapping[str, Any] | None = None,
    reference: Mapping[str, Any] | None = None,
    loop: Mapping[str, Any] | None = None,
    invoke: str = "invoke",
    context: Any = None,
    config: Mapping[str, Any] | None = None,
    loop_model: ModelFactory | None = None,
) -> Pair:
    """Build both agents from fresh models and the same tools and run the same inputs.

    ``inputs``: one input or a list of them (run in order on one thread). ``common`` keyword
    arguments go to both builders, ``reference``/``loop`` only to one. ``invoke`` is ``"invoke"``
    or ``"ainvoke"``. ``loop_model`` gives the loop a different model (for an input that only
    the loop accepts, compared with its equivalent under ``create_agent``). A builder that raises
    is recorded as the outcome's error.
    """
    steps = inputs if isinstance(inputs, list) else [inputs]
    outcomes: list[Outcome] = []
    runs = ((create_agent, reference, model), (create_loop_agent, loop, loop_model or model))
    for build, extra, factory in runs:
        chat_model, seen = factory()
        options = {"checkpointer": InMemorySaver(), **(common or {}), **(extra or {})}
        try:
            agent = build(chat_model, list(tools), **options)
        except Exception as exc:  # noqa: BLE001 - a rejected argument is an outcome too
            outcomes.append(Outcome(error=exc, seen=seen()))
            continue
        outcomes.append(_run(agent, steps, invoke=invoke, context=context, config=config or {}, seen=seen))
    return Pair(*outcomes)
