"""The tool filter: evaluated per model call, enforced at execution."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from langgraph_loop import Hooks, Iterations, Limits, StopReason, create_loop_agent
from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.nodes.tools import plan_calls
from langgraph_loop.scripted import ScriptedChatModel

RAN: list[str] = []


@tool
def research(q: str) -> str:
    """Research a topic."""
    RAN.append(f"research:{q}")
    return f"notes on {q}"


@tool
def write(text: str) -> str:
    """Write the report."""
    RAN.append(f"write:{text}")
    return "written"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def go() -> dict[str, Any]:
    return {"messages": [HumanMessage("report on owls")]}


def by_pass(state: Any, tools: list[BaseTool]) -> list[BaseTool]:
    """Phase gating: research in pass 1, writing afterwards."""
    wanted = "research" if state["iteration"] == 1 else "write"
    return [t for t in tools if t.name == wanted]


@pytest.mark.parametrize("use_async", [False, True])
async def test_phase_gating_by_pass(scripted: list[ScriptedChatModel], use_async: bool) -> None:
    model = ScriptedChatModel(script=[[("research", {"q": "owls"})], "researched",
                                      [("write", {"text": "owls"})], "report written"])
    scripted.append(model)
    agent = create_loop_agent(model, [research, write],
                              iterations=Iterations(should_continue=lambda s: s["iteration"] < 2),
                              hooks=Hooks(tool_filter=by_pass))
    state = await agent.ainvoke(go()) if use_async else agent.invoke(go())
    assert state["stop_reason"] == StopReason.COMPLETED
    assert model.request_tools == [["research"], ["research"], ["write"], ["write"]]
    assert RAN == ["research:owls", "write:owls"]


def test_filter_is_evaluated_per_model_call(scripted: list[ScriptedChatModel]) -> None:
    seen: list[int] = []

    async def after_research(state: Any, tools: list[BaseTool]) -> list[str]:
        done = sum(isinstance(m, ToolMessage) for m in state["messages"])
        seen.append(done)
        return ["write"] if done else ["research"]   # names are accepted too

    model = ScriptedChatModel(script=[[("research", {"q": "owls"})],
                                      [("write", {"text": "owls"})], "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [research, write], hooks=Hooks(tool_filter=after_research))
    agent.invoke(go())
    assert model.request_tools == [["research"], ["write"], ["write"]]
    assert seen == [0, 1, 2]


def test_hidden_tool_called_anyway_is_refused_not_run(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[("write", {"text": "early"}), ("research", {"q": "owls"})],
                                      "ok"])
    scripted.append(model)
    agent = create_loop_agent(model, [research, write], hooks=Hooks(tool_filter=by_pass))
    state = agent.invoke(go())
    assert RAN == ["research:owls"]
    refused, ran = model.requests[1][-2:]
    assert isinstance(refused, ToolMessage) and refused.status == "error"
    assert "not available at this point" in str(refused.content)
    assert isinstance(ran, ToolMessage) and ran.status == "success"
    calls = state["iterations"][0]["tool_calls"]
    assert [(c["name"], c["status"]) for c in calls] == [("write", "refused"), ("research", "success")]


def test_refused_calls_do_not_count_against_max_tool_calls(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[("write", {"text": "x"})], [("research", {"q": "a"})], "ok"])
    scripted.append(model)
    agent = create_loop_agent(model, [research, write], hooks=Hooks(tool_filter=by_pass),
                              limits=Limits(max_tool_calls=1), loop_detection=None)
    state = agent.invoke(go())
    assert RAN == ["research:a"]
    assert state["stop_reason"] == StopReason.MAX_TOOL_CALLS


def test_final_answer_call_binds_no_tools(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=lambda _m: [("research", {"q": "again"})],
                              no_tools_reply="final")
    scripted.append(model)
    agent = create_loop_agent(model, [research, write], iterations=Iterations(max_model_calls=2),
                              hooks=Hooks(tool_filter=by_pass),
                              loop_detection=None)
    state = agent.invoke(go())
    assert state["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert model.request_tools == [["research"], ["research"], []]


def test_empty_filter_binds_no_tools_and_unknown_names_fail(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=["no tools needed"])
    scripted.append(model)
    agent = create_loop_agent(model, [research], hooks=Hooks(tool_filter=lambda s, t: []))
    agent.invoke(go())
    assert model.request_tools == [[]]
    bad = create_loop_agent(ScriptedChatModel(script=["x"]), [research],
                            hooks=Hooks(tool_filter=lambda s, t: ["missing"]))
    with pytest.raises(ValueError, match="tool_filter returned an unknown tool: 'missing'"):
        bad.invoke(go())


def test_raising_filter_names_itself() -> None:
    def broken(state: Any, tools: Any) -> Any:
        raise RuntimeError("no phase")

    agent = create_loop_agent(ScriptedChatModel(script=["x"]), [research], hooks=Hooks(tool_filter=broken))
    with pytest.raises(CallbackError, match="tool_filter raised RuntimeError"):
        agent.invoke(go())


def test_plan_calls_refuses_hidden_before_counting_allowance() -> None:
    calls = [{"name": "write", "args": {}, "id": "1"}, {"name": "research", "args": {}, "id": "2"},
             {"name": "research", "args": {}, "id": "3"}]
    plans = plan_calls(calls, known={"write", "research"}, offered=["research"], allowance=1)
    assert [p[0] for p in plans] == ["refuse", "run", "refuse"]
    assert "limit" in str(plans[2][1])


@pytest.mark.parametrize("returned", ["write", None, 42])
def test_a_filter_returning_no_list_names_the_filter(returned: Any) -> None:
    """Not "unknown tool: 'w'" and not every tool silently hidden: a clear error, no call."""
    model = ScriptedChatModel(script=["never"])
    agent = create_loop_agent(model, [research, write],
                              hooks=Hooks(tool_filter=lambda state, tools: returned))
    with pytest.raises(ValueError, match="tool_filter must return a list of tools") as err:
        agent.invoke(go())
    assert type(returned).__name__ in str(err.value) and model.calls == 0


def test_a_single_tool_is_accepted_as_a_list_of_one() -> None:
    model = ScriptedChatModel(script=[[("research", {"q": "owls"})], "Owls hoot."])
    result = create_loop_agent(model, research).invoke(go())
    assert result["messages"][-1].content == "Owls hoot." and RAN == ["research:owls"]
    assert model.request_tools[0] == ["research"]

    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    assert create_loop_agent(ScriptedChatModel(script=["x"]), lookup).get_graph() is not None
    for bad in ("research", {"research": research}):
        with pytest.raises(ValueError, match="tools must be a list of tools"):
            create_loop_agent(ScriptedChatModel(), bad)  # type: ignore[arg-type]
