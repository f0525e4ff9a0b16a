"""The user's middleware in the loop graph (``nodes/hosted.py``): the checks, what each hook
costs in graph steps, the loop's own controls beside it, and the pairing invariant on a jump."""

from __future__ import annotations

import asyncio
from typing import Any, NotRequired

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRetryMiddleware,
    after_agent,
    after_model,
    before_agent,
    before_model,
    hook_config,
    wrap_model_call,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import (
    Approval,
    Iterations,
    Judge,
    Limits,
    LoopDetection,
    Repeat,
    StopReason,
    create_loop_agent,
)
from langgraph_loop.core.hosting import DuplicateMiddlewareError
from langgraph_loop.core.messages import newest_reply
from langgraph_loop.scripted import ScriptedChatModel


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _rounds(n: int) -> list[Any]:
    return [[("lookup", {"q": f"x{i}"})] for i in range(n)] + ["done"]


class Passthrough(AgentMiddleware[Any, Any]):
    """A no-op wrap_model_call, sync and async."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


passthrough = Passthrough()


@before_model
def noop_before_model(state: Any, runtime: Any) -> None:
    return None


@after_model
def noop_after_model(state: Any, runtime: Any) -> None:
    return None


@before_agent
def noop_before_agent(state: Any, runtime: Any) -> None:
    return None


@after_agent
def noop_after_agent(state: Any, runtime: Any) -> None:
    return None


def run(agent: Any, payload: Any, invoke: str) -> Any:
    """``invoke`` or ``ainvoke`` the agent."""
    return asyncio.run(agent.ainvoke(payload)) if invoke == "ainvoke" else agent.invoke(payload)


def steps(middleware: list[Any], rounds: int) -> int:
    """Graph steps (checkpoints) of a run of ``rounds`` clean tool rounds and an answer."""
    agent = create_loop_agent(ScriptedChatModel(script=_rounds(rounds)), [lookup],
                              middleware=middleware, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    return len(list(agent.get_state_history(config)))


@pytest.mark.parametrize(("middleware", "per_round"), [
    ([], 2), ([passthrough], 2), ([noop_before_agent], 2), ([noop_after_agent], 2),
    ([noop_before_model], 3), ([noop_after_model], 3), ([noop_before_model, noop_after_model], 4),
])
def test_a_clean_round_costs_a_step_only_per_before_or_after_model_hook(
        middleware: list[Any], per_round: int) -> None:
    assert steps(middleware, 3) - steps(middleware, 2) == per_round


def test_once_per_run_hooks_cost_one_step_each() -> None:
    assert steps([noop_before_agent, noop_after_agent], 1) == steps([], 1) + 2


# --- checks ----------------------------------------------------------------------------------

def test_duplicate_middleware_names_are_refused_as_create_agent_refuses_them() -> None:
    model = ScriptedChatModel(script=["x"])
    with pytest.raises(ValueError, match="duplicate middleware"):
        create_loop_agent(model, middleware=[ModelRetryMiddleware(), ModelRetryMiddleware()])
    with pytest.raises(AssertionError):  # what create_agent raises, caught the same way
        create_loop_agent(model, middleware=[ModelRetryMiddleware(), ModelRetryMiddleware()])
    assert issubclass(DuplicateMiddlewareError, ValueError)


def test_something_other_than_middleware_is_refused() -> None:
    with pytest.raises(ValueError, match="not an AgentMiddleware"):
        create_loop_agent(ScriptedChatModel(script=["x"]), middleware=[lambda s: s])
    with pytest.raises(ValueError, match="list of AgentMiddleware"):
        create_loop_agent(ScriptedChatModel(script=["x"]), middleware=ModelRetryMiddleware())


def test_an_after_agent_jump_back_into_the_loop_is_refused() -> None:
    class Back(AgentMiddleware[Any, Any]):
        @hook_config(can_jump_to=["model"])
        def after_agent(self, state: Any, runtime: Any) -> None:
            return None

    with pytest.raises(ValueError, match="after_agent"):
        create_loop_agent(ScriptedChatModel(script=["x"]), middleware=[Back()])


def test_a_sync_only_wrap_model_call_under_ainvoke_fails_as_under_create_agent() -> None:
    @wrap_model_call
    def sync_only(request: Any, handler: Any) -> Any:
        return handler(request)

    agent = create_loop_agent(ScriptedChatModel(script=["x"]), middleware=[sync_only])
    with pytest.raises(NotImplementedError, match="awrap_model_call"):
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))


def test_tools_a_wrap_model_call_adds_that_nobody_runs_are_an_error() -> None:
    @tool
    def ghost() -> str:
        """Not registered."""
        return "boo"

    @wrap_model_call
    def add_ghost(request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, ghost]))

    agent = create_loop_agent(ScriptedChatModel(script=["x"]), [lookup], middleware=[add_ghost])
    with pytest.raises(ValueError, match="ghost"):
        agent.invoke({"messages": [HumanMessage("go")]})


# --- semantics the parity suite does not reach -------------------------------------------------

class Noted(AgentState[Any]):
    note: NotRequired[str]


class Note(AgentMiddleware[Noted, Any]):
    """wrap_model_call returning an ExtendedModelResponse with a command."""

    state_schema = Noted

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        response = handler(request)
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={"note": f"{len(request.messages)}"}))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        response = await handler(request)
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={"note": f"{len(request.messages)}"}))


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_a_wrap_model_call_command_updates_the_state_after_the_model_node(invoke: str) -> None:
    agent = create_loop_agent(ScriptedChatModel(script=_rounds(1)), [lookup], middleware=[Note()])
    payload = {"messages": [HumanMessage("go")]}
    result = run(agent, payload, invoke)
    assert result["note"] == "3" and result["stop_reason"] == StopReason.COMPLETED


def test_a_jump_to_end_after_a_reply_with_calls_answers_them_and_stops_terminated() -> None:
    @after_model(can_jump_to=["end"])
    def enough(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    agent = create_loop_agent(ScriptedChatModel(script=_rounds(2)), [lookup], middleware=[enough])
    result = agent.invoke({"messages": [HumanMessage("go")]})
    messages = result["messages"]
    assert result["stop_reason"] == StopReason.TERMINATED
    assert not newest_reply(messages).pending
    assert isinstance(messages[-1], ToolMessage) and messages[-1].status == "error"
    assert [m.type for m in messages] == ["human", "ai", "tool"]


def test_middleware_tools_run_and_can_be_gated() -> None:
    @tool
    def stamp() -> str:
        """A middleware's tool."""
        return "stamped"

    class Stamper(AgentMiddleware[Any, Any]):
        tools = [stamp]  # noqa: RUF012 - LangChain's declaration

    model = ScriptedChatModel(script=[[("stamp", {})], "done"])
    result = create_loop_agent(model, [lookup], middleware=[Stamper()]).invoke(
        {"messages": [HumanMessage("go")]})
    assert result["messages"][2].content == "stamped"
    assert model.request_tools[0] == ["stamp", "lookup"]  # create_agent's order
    gated = create_loop_agent(ScriptedChatModel(script=["x"]), [lookup], middleware=[Stamper()],
                              approval=Approval(tools=["stamp"]))
    assert "approval" in gated.get_graph().nodes


# --- the loop's own controls beside user middleware --------------------------------------------

EVERY_HOOK = [passthrough, noop_before_model, noop_after_model, noop_before_agent, noop_after_agent]


@pytest.mark.parametrize("invoke", ["invoke", "ainvoke"])
def test_loop_detection_stops_a_repeating_call_beside_every_hook(invoke: str) -> None:
    model = ScriptedChatModel(default=lambda messages: [("lookup", {"q": "same"})],
                              no_tools_reply="I kept looking up the same thing.")
    agent = create_loop_agent(model, [lookup], middleware=EVERY_HOOK,
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)))
    payload = {"messages": [HumanMessage("go")]}
    result = run(agent, payload, invoke)
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["messages"][-1].content == "I kept looking up the same thing."
    assert not newest_reply(result["messages"]).pending


def test_limits_and_iterations_work_beside_every_hook() -> None:
    model = ScriptedChatModel(default=lambda messages: [("lookup", {"q": str(len(messages))})],
                              no_tools_reply="stopped")
    result = create_loop_agent(model, [lookup], middleware=EVERY_HOOK, loop_detection=None,
                               limits=Limits(max_tool_calls=2)).invoke(
        {"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == StopReason.MAX_TOOL_CALLS
    assert result["messages"][-1].content == "stopped"
    again = create_loop_agent(ScriptedChatModel(script=["a", "b", "c"]), middleware=EVERY_HOOK,
                              iterations=Iterations(max=2, should_continue=lambda s: True)).invoke(
        {"messages": [HumanMessage("go")]})
    assert again["stop_reason"] == StopReason.MAX_ITERATIONS and again["iteration"] == 2


def test_the_step_budget_holds_with_hooks_on_every_round() -> None:
    model = ScriptedChatModel(default=lambda messages: [("lookup", {"q": str(len(messages))})],
                              no_tools_reply="out of steps")
    agent = create_loop_agent(model, [lookup], middleware=EVERY_HOOK, loop_detection=None)
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 30})
    assert result["stop_reason"] == StopReason.STEP_LIMIT
    assert not newest_reply(result["messages"]).pending
    assert isinstance(result["messages"][-1], AIMessage)


def test_the_judge_decides_beside_every_hook_and_its_model_is_not_wrapped() -> None:
    judge_model = ScriptedChatModel(script=[
        [("JudgeVerdict", {"answered": False, "reasoning": "no year"})],
        [("JudgeVerdict", {"answered": True, "reasoning": "fine"})]])
    agent_model = ScriptedChatModel(script=["It happened.", "It happened in 1969."])
    calls: list[int] = []

    class Count(AgentMiddleware[Any, Any]):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            calls.append(1)
            return handler(request)

    result = create_loop_agent(agent_model, middleware=[Count(), *EVERY_HOOK[1:]],
                               iterations=Iterations(max=3, judge=Judge(model=judge_model))).invoke(
        {"messages": [HumanMessage("When was the moon landing?")]})
    assert result["stop_reason"] == StopReason.COMPLETED and result["iteration"] == 2
    assert len(calls) == agent_model.calls == 2 and judge_model.calls == 2
