"""The recursion limit never escapes as GraphRecursionError, whatever nodes are configured.

Found by the property suite: with a judge and ``final_answer=False`` the step budget
reserved one step after a decision, but a pass end needs two (judge, router).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from langgraph_loop import (
    Approval,
    Compaction,
    Iterations,
    Judge,
    Limits,
    StopReason,
    create_loop_agent,
)
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread


class Verdict(BaseModel):
    """A structured final answer."""

    value: int


def _alternating(messages: list[BaseMessage], answer: Any = "partial answer") -> Any:
    """A tool round, then an answer, then again: every other reply ends a pass."""
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.name == "loop_warning":  # the final answer
        return answer
    if isinstance(last, HumanMessage) and last.name in (None, "loop_continue"):
        return [("add", {"a": len(messages), "b": 1})]
    if any(m.type == "tool" and m.name == "add" for m in messages[-2:]):
        return answer
    return [("add", {"a": len(messages), "b": 2})]


def _structured(messages: list[BaseMessage]) -> Any:
    """As ``_alternating``, answering with the ``Verdict`` output tool."""
    return _alternating(messages, [("Verdict", {"value": len(messages)})])


CONFIGS: dict[str, dict[str, Any]] = {
    "plain": {},
    "no_final_answer": {"limits": Limits(final_answer=False)},
    "judge": {"judge": "judge"},
    "judge_no_final_answer": {"judge": "judge",
                              "limits": Limits(final_answer=False)},
    "respond": {"response_format": Verdict},
    "judge_respond_compaction": {"judge": "judge", "response_format": Verdict,
                                 "compaction": Compaction(max_tokens=100_000)},
    "approval": {"approval": Approval(tools=["add"], resolver=lambda r: {
        "decisions": [{"type": "approve"}] * len(r["action_requests"])}, max_auto_rounds=1000)},
}


def _build(name: str) -> tuple[Any, ScriptedChatModel]:
    options = dict(CONFIGS[name])
    structured = "response_format" in options
    model = ScriptedChatModel(default=_structured if structured else _alternating,
                              no_tools_reply=None if structured else AIMessage("final answer"))
    loop: dict[str, Any] = {"max": None, "max_model_calls": None}
    if options.pop("judge", None) == "judge":
        loop["judge"] = Judge(model=ScriptedChatModel(default="VERDICT: MORE"))
    else:
        loop["should_continue"] = lambda _s: True
    agent = create_loop_agent(model, [add], iterations=Iterations(**loop), loop_detection=None,
                              **options)
    return agent, model


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("limit", [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 17, 23, 31])
def test_every_recursion_limit_stops_cleanly(name: str, limit: int, scripted: list) -> None:
    agent, model = _build(name)
    scripted.append(model)
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": limit})
    assert result["stop_reason"] == StopReason.STEP_LIMIT
    assert_valid_thread(result["messages"])
    if "response_format" in CONFIGS[name] and model.calls > 1:
        assert isinstance(result["structured_response"], Verdict)
