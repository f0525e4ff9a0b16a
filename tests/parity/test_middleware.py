"""LangChain middleware side by side: the same tools, middleware and scripted model through
``create_agent`` and ``create_loop_agent(..., middleware=[...])``.

Compared (``compare.Pair.assert_same``): how each run ended, the final state (every key the
reference has, messages normalised only for ids and the loop's notices) and the exact messages
every model call received (the agent's model and any model a middleware calls: fallback,
tool selector, summarizer). Each agent gets fresh models, tools and middleware from the same
``Setup``; sync and async.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NotRequired

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ExtendedModelResponse,
    LLMToolSelectorMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolRetryMiddleware,
    dynamic_prompt,
    hook_config,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel
from tests.parity.compare import Pair, _run, call, calls, normalise_messages

CARD = "4111 1111 1111 1111"


@dataclass
class Setup:
    """One agent's fresh parts: the model, the tools, the middleware and the other models
    whose requests are compared."""

    model: ScriptedChatModel
    tools: list[Any]
    middleware: list[AgentMiddleware[Any, Any]]
    others: list[ScriptedChatModel] = field(default_factory=list)

    def seen(self) -> list[Any]:
        """Every request each model received, normalised, and the tools the agent's model
        could call in each."""
        return [[normalise_messages(r) for r in m.requests] for m in [self.model, *self.others]
                ] + [self.model.request_tools]


def run_pair(make: Callable[[], Setup], inputs: Any, *, invoke: str = "invoke") -> Pair:
    """Build both agents from fresh parts and run the same inputs on one thread each."""
    steps = inputs if isinstance(inputs, list) else [inputs]
    outcomes = []
    for build in (create_agent, create_loop_agent):
        parts = make()
        agent = build(parts.model, parts.tools, middleware=parts.middleware,
                      checkpointer=InMemorySaver())
        outcomes.append(_run(agent, steps, invoke=invoke, context=None, config={}, seen=parts.seen))
    return Pair(*outcomes)


def scripted(*script: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=copy.deepcopy(list(script)))


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def other(q: str) -> str:
    """Another tool."""
    return f"other {q}"


def flaky_tool() -> BaseTool:
    """A tool that fails on its first call (fresh per agent)."""
    attempts: list[int] = []

    @tool
    def flaky(q: str) -> str:
        """Fails once, then answers."""
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("temporarily down")
        return f"flaky {q} after {len(attempts)} attempts"

    return flaky


ASK = {"messages": [HumanMessage("look up x")]}
ROUND = [calls(call("lookup", {"q": "x"}, "c1")), "done"]


# --- the custom middleware, one per hook ----------------------------------------------------

class Turns(AgentState[Any]):
    model_turns: NotRequired[int]
    finished: NotRequired[bool]


class CountTurns(AgentMiddleware[Turns, Any]):
    """before_model: counts model calls in its own state; ends the run at the third."""

    state_schema = Turns

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Turns, runtime: Any) -> dict[str, Any] | None:
        turns = state.get("model_turns", 0) + 1
        if turns > 2:
            return {"jump_to": "end"}
        return {"model_turns": turns}


class Gate(AgentMiddleware[Any, Any]):
    """before_agent: refuses a forbidden request without calling the model."""

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if "forbidden" in str(state["messages"][-1].content):
            return {"messages": [AIMessage("I cannot help with that.")], "jump_to": "end"}
        return None


class Redo(AgentMiddleware[Any, Any]):
    """after_model: sends a draft back to the model once."""

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and last.content == "draft":
            return {"messages": [HumanMessage("Improve the draft.")], "jump_to": "model"}
        return None


class Finish(AgentMiddleware[Turns, Any]):
    """after_agent: marks the run finished."""

    state_schema = Turns

    def after_agent(self, state: Turns, runtime: Any) -> dict[str, Any] | None:
        return {"finished": True}


class Shout(AgentMiddleware[Any, Any]):
    """A custom wrap_tool_call: rewrites the args, upper-cases the result."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        args = {**request.tool_call["args"], "q": request.tool_call["args"]["q"] + "!"}
        result = handler(request.override(tool_call={**request.tool_call, "args": args}))
        if isinstance(result, ToolMessage):
            result.content = str(result.content).upper()
        return result

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        args = {**request.tool_call["args"], "q": request.tool_call["args"]["q"] + "!"}
        result = await handler(request.override(tool_call={**request.tool_call, "args": args}))
        if isinstance(result, ToolMessage):
            result.content = str(result.content).upper()
        return result


class Noted(AgentState[Any]):
    note: NotRequired[str]


class Note(AgentMiddleware[Noted, Any]):
    """A custom wrap_model_call: a system prompt of its own, and a command with the reply."""

    state_schema = Noted

    def _request(self, request: Any) -> Any:
        return request.override(system_message=SystemMessage("Answer tersely."))

    def _extended(self, request: Any, response: Any) -> ExtendedModelResponse[Any]:
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={"note": f"{len(request.messages)}"}))

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return self._extended(request, handler(self._request(request)))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return self._extended(request, await handler(self._request(request)))


@dynamic_prompt
def turn_prompt(request: Any) -> str:
    return f"You see {len(request.messages)} message(s)."


# --- the cases ------------------------------------------------------------------------------

def _dynamic_prompt() -> Setup:
    return Setup(scripted(*ROUND), [lookup], [turn_prompt])


def _fallback() -> Setup:
    backup = scripted(calls(call("lookup", {"q": "x"}, "c1")))
    primary = scripted(RuntimeError("provider down"), "done")
    return Setup(primary, [lookup], [ModelFallbackMiddleware(backup)], [backup])


def _retry() -> Setup:
    model = scripted(RuntimeError("flaky"), *ROUND)
    return Setup(model, [lookup], [ModelRetryMiddleware(max_retries=2, initial_delay=0.0,
                                                        jitter=False)])


def _selector() -> Setup:
    selector = ScriptedChatModel(default=lambda messages: AIMessage(
        "", tool_calls=[{"name": "ToolSelectionResponse", "args": {"tools": ["lookup"]},
                         "id": "sel"}]))
    return Setup(scripted(*ROUND), [lookup, other],
                 [LLMToolSelectorMiddleware(model=selector, max_tools=1)], [selector])


def _context_editing() -> Setup:
    script = [calls(call("lookup", {"q": f"x{i}"}, f"c{i}")) for i in range(4)] + ["done"]
    return Setup(scripted(*script), [lookup],
                 [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=20, keep=1)])])


def _tool_retry() -> Setup:
    script = [calls(call("flaky", {"q": "x"}, "c1")), "done"]
    return Setup(scripted(*script), [flaky_tool()],
                 [ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)])


def _custom_tool_wrapper() -> Setup:
    return Setup(scripted(*ROUND), [lookup], [Shout()])


def _summarization() -> Setup:
    summarizer = scripted("The user asked to look things up; x0 and x1 were found.")
    script = [calls(call("lookup", {"q": f"x{i}"}, f"c{i}")) for i in range(3)] + ["done"]
    return Setup(scripted(*script), [lookup],
                 [SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))],
                 [summarizer])


def _custom_hooks() -> Setup:
    script = ["draft", calls(call("lookup", {"q": "x"}, "c1")), "never sent"]
    return Setup(scripted(*script), [lookup], [Gate(), CountTurns(), Redo(), Finish()])


CASES: dict[str, tuple[Callable[[], Setup], Any]] = {
    "dynamic_prompt": (_dynamic_prompt, ASK),
    "custom wrap_model_call with a command": (lambda: Setup(scripted(*ROUND), [lookup], [Note()]),
                                              ASK),
    "ModelFallbackMiddleware": (_fallback, ASK),
    "ModelRetryMiddleware": (_retry, ASK),
    "LLMToolSelectorMiddleware": (_selector, ASK),
    "ContextEditingMiddleware": (_context_editing, ASK),
    "ToolRetryMiddleware": (_tool_retry, ASK),
    "custom wrap_tool_call": (_custom_tool_wrapper, ASK),
    "PIIMiddleware": (lambda: Setup(scripted(*ROUND), [lookup],
                                    [PIIMiddleware("credit_card", strategy="mask")]),
                      {"messages": [HumanMessage(f"My card is {CARD}, look up x")]}),
    "SummarizationMiddleware": (_summarization, ASK),
    "before_agent/before_model/after_model/after_agent with jump_to": (_custom_hooks, ASK),
    "before_agent jump_to end": (_custom_hooks, {"messages": [HumanMessage("forbidden thing")]}),
}


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_middleware_sees_and_does_the_same_under_both_agents(case: str, invoke: str) -> None:
    make, inputs = CASES[case]
    pair = run_pair(make, inputs, invoke=invoke)
    assert pair.reference.error is None, pair.reference.error
    pair.assert_same()


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_a_masked_card_number_never_reaches_the_model(invoke: str) -> None:
    make, inputs = CASES["PIIMiddleware"]
    pair = run_pair(make, inputs, invoke=invoke)
    sent = [str(m["content"]) for request in pair.loop.seen[0] for m in request]
    assert sent and not any(CARD in s or CARD.replace(" ", "") in s for s in sent)
    assert any("**** 1111" in s for s in sent)  # masked, not dropped


def test_the_tool_selector_narrows_the_tools_the_model_may_call() -> None:
    pair = run_pair(_selector, ASK)
    assert pair.loop.seen[-1] == [["lookup"], ["lookup"]]


def test_the_custom_hooks_stop_the_loop_as_terminated_with_their_state_merged() -> None:
    pair = run_pair(*CASES["before_agent/before_model/after_model/after_agent with jump_to"][:1],
                    ASK)
    state = pair.loop.state
    assert state["stop_reason"] == StopReason.TERMINATED
    assert state["model_turns"] == 2 and state["finished"] is True
    refused = run_pair(_custom_hooks, {"messages": [HumanMessage("forbidden thing")]})
    assert refused.loop.state["stop_reason"] == StopReason.TERMINATED
    assert refused.loop.seen == [[], []]  # the model was never called


def test_the_comparison_can_fail() -> None:
    """A middleware that only the loop gets makes the requests differ, and the check says so."""
    outcomes = []
    for build, middleware in ((create_agent, []), (create_loop_agent, [turn_prompt])):
        parts = _dynamic_prompt()
        agent = build(parts.model, parts.tools, middleware=middleware, checkpointer=InMemorySaver())
        outcomes.append(_run(agent, [ASK], invoke="invoke", context=None, config={},
                             seen=parts.seen))
    with pytest.raises(AssertionError, match="messages each model call received"):
        Pair(*outcomes).assert_same()

