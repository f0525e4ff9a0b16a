"""Drop-in cases LangChain's own ``create_agent`` tests found (issue 39) and middleware faults
(issue 40, items 5-7): each case through ``create_agent`` and ``create_loop_agent`` side by
side where ``create_agent`` defines the behaviour.
"""

from __future__ import annotations

import copy
from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime
from typing_extensions import Annotated

from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel

BUILDERS = [create_agent, create_loop_agent]


def scripted(*script: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=copy.deepcopy(list(script)))


def ask(text: str = "go") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def calls(*names: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": {}, "id": f"c{i}", "type": "tool_call"}
                                     for i, n in enumerate(names)])


# --- state_schema: LangChain's AgentState subclass -------------------------------------------

class Notes(AgentState[Any]):
    notes: NotRequired[str]
    secret: NotRequired[Annotated[str, PrivateStateAttr]]


@pytest.mark.parametrize("build", BUILDERS)
def test_a_users_agentstate_subclass_is_the_state_its_tools_read(build: Any) -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def peek(runtime: ToolRuntime) -> str:
        """Read the state."""
        seen.append({k: runtime.state.get(k) for k in ("notes", "secret")})
        return "peeked"

    agent = build(scripted(calls("peek"), "done"), [peek], state_schema=Notes)
    result = agent.invoke({**ask(), "notes": "kept", "secret": "dropped"})
    assert seen == [{"notes": "kept", "secret": None}]
    assert result["notes"] == "kept"
    assert "secret" not in result
    assert result["messages"][-1].content == "done"


class Clashing(AgentState[Any]):
    usage: int
    iteration: str


class ClashingMiddleware(AgentMiddleware[Clashing, Any]):
    state_schema = Clashing

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"usage": 5, "iteration": "first"}


def test_a_middleware_schema_redeclaring_the_loops_keys_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match=r"middleware ClashingMiddleware: state_schema Clashing "
                                         r"declares \['iteration', 'usage'\], keys the loop owns"):
        create_loop_agent(scripted("ok"), middleware=[ClashingMiddleware()])


def test_a_users_schema_redeclaring_the_loops_keys_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match=r"state_schema: state_schema Clashing declares"):
        create_loop_agent(scripted("ok"), state_schema=Clashing)
