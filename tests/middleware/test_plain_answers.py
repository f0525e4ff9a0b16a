"""Issue 43.12: a bad answer to one of our questions is a plain ``ValueError`` naming what the
question takes and a valid answer, never pydantic's internals, and the thread stays paused:
through ``create_agent`` with our middleware (no pre-check runs there), and for an approval edit
that renames a call into another gated tool (``create_loop_agent``), checked beside LangChain's
``HumanInTheLoopMiddleware``."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Approval, LoopDetection, create_loop_agent
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add_tokens

RAN: Counter[str] = Counter()


@tool
def status(job: str) -> str:
    """The status of a build job."""
    return f"{job}: pending"


@tool
def research(query: str) -> str:
    """Research a query."""
    return f"results for {query}: " + "lorem ipsum " * 60


@tool
def rm(path: str) -> str:
    """Remove a file."""
    RAN["rm"] += 1
    return f"removed {path}"


@tool
def wipe(path: str) -> str:
    """Wipe a disk."""
    RAN["wipe"] += 1
    return f"wiped {path}"


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def researching(messages: list[BaseMessage]) -> Any:
    return [("research", {"query": f"q{sum(m.type == 'tool' for m in messages)}"})]


def looping_agent() -> Any:
    model = ScriptedChatModel(default=lambda messages: [("status", {"job": "build"})])
    return create_agent(model, [status], checkpointer=InMemorySaver(),
                        middleware=[LoopDetectionMiddleware(LoopDetection(ask_human=True))])


def budgeted_agent() -> Any:
    model = ScriptedChatModel(default=researching, no_tools_reply="final")
    return create_agent(model, [research], checkpointer=InMemorySaver(),
                        middleware=[TokenBudgetMiddleware(token_budget=3000, budget_check_in=True)])


CASES = [
    (looping_agent, {"decisions": [{"type": "edit", "edited_action": {"name": "x", "args": {"hint": 3}}}]},
     "resume: loop question: an 'edit' carries its hint as args {'hint': '...'}, got {'hint': 3}; its "
     "question 'Loop detected: status' takes {'decisions': [{'type': 'approve' | 'edit' | 'reject', "
     "...}]}, e.g. {'decisions': [{'type': 'approve'}]}; nothing was resumed"),
    (budgeted_agent, add_tokens("lots"),
     "resume: token budget: the edited 'tokens' must be a whole number >= 1, got 'lots'; its "
     "question 'Token budget reached: add more?' takes {'decisions': [{'type': 'approve' | 'edit' "
     "| 'reject', ...}]}, e.g. {'decisions': [{'type': 'approve'}]}; nothing was resumed"),
]


@pytest.mark.parametrize(("agent_of", "answer", "message"), CASES)
def test_create_agent_refuses_a_bad_answer_plainly_and_stays_paused(
        agent_of: Any, answer: Any, message: str) -> None:
    agent, config = agent_of(), thread()
    (asked,) = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    with pytest.raises(ValueError) as refused:
        agent.invoke(Command(resume=answer), config)
    assert str(refused.value) == message
    assert "validation error" not in str(refused.value) and "function-" not in str(refused.value)
    assert [i.value for i in agent.get_state(config).interrupts] == [asked.value]
    done = agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), config)
    assert done["stop_reason"] in ("loop_detected", "token_budget")


RENAME = {"decisions": [{"type": "edit", "edited_action": {"name": "wipe", "args": {"path": "/"}}}]}


def test_an_approval_edit_into_another_gated_tool_is_refused_plainly() -> None:
    """LangChain's human-in-the-loop runs the renamed call (``wipe``) though ``wipe`` has a
    decision of its own to ask for; the loop refuses such an edit plainly and stays paused."""
    RAN.clear()
    hitl = create_agent(ScriptedChatModel(script=[[("rm", {"path": "/tmp/x"})], "done"]), [rm, wipe],
                        checkpointer=InMemorySaver(), middleware=[HumanInTheLoopMiddleware(
                            interrupt_on={"rm": True, "wipe": True})])
    config = thread()
    hitl.invoke({"messages": [HumanMessage("clean up")]}, config)
    hitl.invoke(Command(resume=RENAME), config)
    assert RAN == {"wipe": 1}  # create_agent: the gated wipe ran without its own decision
    RAN.clear()
    ours = create_loop_agent(ScriptedChatModel(script=[[("rm", {"path": "/tmp/x"})], "done"]),
                             [rm, wipe], checkpointer=InMemorySaver(),
                             approval=Approval(tools=["rm", "wipe"]))
    config = thread()
    (asked,) = ours.invoke({"messages": [HumanMessage("clean up")]}, config)["__interrupt__"]
    with pytest.raises(ValueError) as refused:
        ours.invoke(Command(resume=RENAME), config)
    assert str(refused.value) == (
        "resume: approval: decision 1 edits 'rm' into another gated tool 'wipe'; an edit may keep "
        "the tool or switch to an ungated one; its question 'rm' takes {'decisions': [{'type': "
        "'approve' | 'edit' | 'reject', ...}]}, e.g. {'decisions': [{'type': 'approve'}]}; nothing "
        "was resumed")
    assert RAN == {} and [i.value for i in ours.get_state(config).interrupts] == [asked.value]
    done = ours.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert RAN == {"rm": 1} and done["messages"][-1].content == "done"
