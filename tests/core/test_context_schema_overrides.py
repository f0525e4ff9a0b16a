"""Per-run overrides beside a user's ``context_schema`` (issue 43.6): a TypedDict, a dataclass
and a pydantic model all carry them, the user's own fields still reach the tools, and a wrong
override is the same error whichever kind the schema is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from langgraph_loop import StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel


class TypedCtx(TypedDict):
    user_id: str


@dataclass
class DataCtx:
    user_id: str


class ModelCtx(BaseModel):
    user_id: str


def user_of(context: Any) -> str:
    return context["user_id"] if isinstance(context, dict) else context.user_id


@tool
def whoami(n: int, runtime: ToolRuntime) -> str:
    """Say who asks."""
    return f"call {n} for {user_of(runtime.context)}"


def five_calls() -> ScriptedChatModel:
    calls = [AIMessage("", tool_calls=[{"name": "whoami", "args": {"n": i}, "id": f"c{i}"}])
             for i in range(5)]
    return ScriptedChatModel(script=[*calls, AIMessage("done")], no_tools_reply="Stopped early.")


@pytest.mark.parametrize("schema", [TypedCtx, DataCtx, ModelCtx], ids=["typeddict", "dataclass", "pydantic"])
def test_a_run_override_beside_the_users_context_holds_for_every_kind_of_schema(schema: type) -> None:
    agent = create_loop_agent(five_calls(), [whoami], context_schema=schema)
    out = agent.invoke({"messages": [HumanMessage("go")]},
                       context={"user_id": "ada", "limits": {"max_tool_calls": 2}})
    ran = [m.content for m in out["messages"] if isinstance(m, ToolMessage) and m.status != "error"]
    assert ran == ["call 0 for ada", "call 1 for ada"]  # the cap held; the user's field arrived
    assert out["stop_reason"] == StopReason.MAX_TOOL_CALLS
    assert out["messages"][-1].content == "Stopped early."
    # LangGraph Server keeps only the context keys the schema declares: the groups are there
    properties = agent.get_context_jsonschema()["properties"]  # type: ignore[index]
    assert {"user_id", "iterations", "limits", "loop_detection"} <= set(properties)


@pytest.mark.parametrize("schema", [TypedCtx, DataCtx, ModelCtx], ids=["typeddict", "dataclass", "pydantic"])
def test_a_wrong_override_beside_the_users_context_is_the_same_error_for_every_kind(schema: type) -> None:
    model = five_calls()
    agent = create_loop_agent(model, [whoami], context_schema=schema)
    with pytest.raises(ValueError, match=r"^invalid run context: limits\.max_tool_calls: .*\(got 0\)$"):
        agent.invoke({"messages": [HumanMessage("go")]},
                     context={"user_id": "ada", "limits": {"max_tool_calls": 0}})
    assert model.calls == 0  # nothing ran


def test_the_users_context_type_is_kept_for_its_own_code() -> None:
    seen: list[Any] = []

    @tool
    def look(runtime: ToolRuntime) -> str:
        """Look at the context."""
        seen.append(runtime.context)
        return "ok"

    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[{"name": "look", "args": {}, "id": "c"}]),
                                      AIMessage("done")])
    agent = create_loop_agent(model, [look], context_schema=DataCtx)
    agent.invoke({"messages": [HumanMessage("go")]}, context={"user_id": "ada"})
    assert isinstance(seen[0], DataCtx) and seen[0].user_id == "ada"
