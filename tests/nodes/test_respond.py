"""``response_format`` through the loop: the answer that ends an iteration comes in the schema's
shape (``ToolStrategy``: a call of its output tool; ``ProviderStrategy``: JSON text) and the
``respond`` node reads it into ``structured_response``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.structured_output import (
    MultipleStructuredOutputsError,
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from langgraph_loop import Approval, Iterations, Judge, LoopDetection, Repeat, StopReason, create_loop_agent
from langgraph_loop.core import prompts
from langgraph_loop.core.shape import Shape
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread, types

ASK = {"messages": [HumanMessage("Where and when?")]}


class Answer(BaseModel):
    """The final answer."""

    city: str
    year: int


def answer(city: str = "Paris", year: int = 2024) -> list[tuple[str, dict[str, Any]]]:
    """A reply that calls the output tool."""
    return [("Answer", {"city": city, "year": year})]


def _agent(scripted: list, script: list, tools: Any = (add,), **kw: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=script)
    scripted.append(model)
    return create_loop_agent(model, tools, **kw), model


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_structured_answer_ends_the_iteration(scripted: list, mode: str) -> None:
    agent, model = _agent(scripted, [[("add", {"a": 1, "b": 2})], answer()], response_format=Answer)
    out = agent.invoke(ASK) if mode == "sync" else await agent.ainvoke(ASK)
    assert out["stop_reason"] == StopReason.COMPLETED
    assert out["structured_response"] == Answer(city="Paris", year=2024)
    assert types(out["messages"]) == ["human", "ai+calls", "tool:success", "ai+calls", "tool:success"]
    assert out["messages"][-1].content == prompts.STRUCTURED_RETURNED.format(
        response=Answer(city="Paris", year=2024))
    assert model.request_tools == [["add", "Answer"]] * 2
    assert model.request_tool_choice == ["any", "any"]
    assert "respond" in agent.get_graph().nodes
    assert out["iterations"][0]["tool_calls"][0]["name"] == "add"  # the output call is no tool run


def test_each_iteration_answers_and_the_last_answer_stays(scripted: list) -> None:
    agent, _ = _agent(scripted, [answer(year=2023), answer(year=2024)], response_format=Answer,
                      iterations=Iterations(should_continue=lambda s: s["structured_response"].year < 2024))
    out = agent.invoke(ASK)
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 2
    assert out["structured_response"].year == 2024


def test_the_judge_decides_on_structured_answers(scripted: list) -> None:
    judge = ScriptedChatModel(script=["VERDICT: MORE", "VERDICT: DONE"])
    agent, _ = _agent(scripted, [answer(year=1), answer(year=2)], response_format=Answer,
                      iterations=Iterations(judge=Judge(model=judge)))
    out = agent.invoke(ASK)
    assert out["stop_reason"] == StopReason.COMPLETED and out["structured_response"].year == 2
    assert '"year":1' in judge.requests[0][-1].content  # the judge reads the structured answer
    assert out["progress"][0] == '{"city":"Paris","year":1}'


def test_after_the_cap_the_last_iterations_answer_stays(scripted: list) -> None:
    agent, model = _agent(scripted, [answer("Rome", 1960)], response_format=Answer,
                          iterations=Iterations(max=1, should_continue=lambda s: True))
    out = agent.invoke(ASK)
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS
    assert out["structured_response"] == Answer(city="Rome", year=1960)
    assert model.calls == 1


def test_a_stop_ends_on_a_forced_structured_answer(scripted: list) -> None:
    """After a stop the final-answer call keeps every tool defined and forces the output tool."""
    agent, model = _agent(scripted, [[("add", {"a": 1, "b": 1})]] * 3 + [answer()], response_format=Answer,
                          loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=3)))
    out = agent.invoke(ASK)
    assert out["stop_reason"] == StopReason.LOOP_DETECTED
    assert out["structured_response"] == Answer(city="Paris", year=2024)
    assert model.request_defined_tools[-1] == ["add", "Answer"]
    assert model.request_tool_choice[-1] == "Answer"
    assert_valid_thread(out["messages"])


def test_a_limit_does_not_discard_the_answer_it_arrives_with(scripted: list) -> None:
    """A reply that only answers is text to the limits: no final-answer call is added."""
    agent, model = _agent(scripted, [[("add", {"a": 1, "b": 1})], answer()], response_format=Answer,
                          iterations=Iterations(max_model_calls=2))
    out = agent.invoke(ASK)
    assert out["stop_reason"] == StopReason.COMPLETED and model.calls == 2
    assert out["structured_response"] == Answer(city="Paris", year=2024)


def test_an_answer_that_does_not_parse_is_asked_again(scripted: list) -> None:
    agent, model = _agent(scripted, [[("Answer", {"city": "Paris"})], answer()], response_format=Answer)
    out = agent.invoke(ASK)
    assert out["structured_response"] == Answer(city="Paris", year=2024)
    error = out["messages"][2]
    assert error.content.startswith("Error: Failed to parse structured output for tool 'Answer'")
    assert error.content.endswith("Please fix your mistakes.")
    assert model.calls == 2


def test_handle_errors_false_raises(scripted: list) -> None:
    agent, _ = _agent(scripted, [[("Answer", {"city": "Paris"})]],
                      response_format=ToolStrategy(Answer, handle_errors=False))
    with pytest.raises(StructuredOutputValidationError):
        agent.invoke(ASK)


def test_two_output_calls_are_answered_with_the_handlers_text(scripted: list) -> None:
    two = AIMessage("", tool_calls=[{"name": "Answer", "args": {"city": "A", "year": 1}, "id": "x"},
                                    {"name": "Answer", "args": {"city": "B", "year": 2}, "id": "y"}])
    agent, _ = _agent(scripted, [two, answer()],
                      response_format=ToolStrategy(Answer, handle_errors="One answer, please."))
    out = agent.invoke(ASK)
    assert [m.content for m in out["messages"][2:4]] == ["One answer, please."] * 2
    assert out["structured_response"] == Answer(city="Paris", year=2024)
    with pytest.raises(MultipleStructuredOutputsError):
        _agent(scripted, [two], response_format=ToolStrategy(Answer, handle_errors=False))[0].invoke(ASK)


def test_an_answer_next_to_other_calls_lets_them_run_and_ends_the_iteration(scripted: list) -> None:
    mixed = [("add", {"a": 2, "b": 3}), *answer()]
    agent, model = _agent(scripted, [mixed, answer(year=2025)], response_format=Answer)
    out = agent.invoke(ASK)
    assert types(out["messages"]) == ["human", "ai+calls", "tool:success", "tool:success"]
    assert {m.name for m in out["messages"][2:4]} == {"add", "Answer"}
    assert out["structured_response"].year == 2024  # as create_agent: no second model call
    assert len(model.requests) == 1 and out["stop_reason"] == "completed"
    assert_valid_thread(out["messages"])


def test_provider_strategy_reads_the_json_text(scripted: list) -> None:
    agent, model = _agent(scripted, ['{"city": "Paris", "year": 2024}'],
                          response_format=ProviderStrategy(Answer))
    out = agent.invoke(ASK)
    assert out["structured_response"] == Answer(city="Paris", year=2024)
    assert types(out["messages"]) == ["human", "ai"]
    assert model.request_tool_choice == [None]


def test_provider_strategy_text_that_does_not_parse_raises(scripted: list) -> None:
    agent, _ = _agent(scripted, ["not json"], response_format=ProviderStrategy(Answer))
    with pytest.raises(StructuredOutputValidationError):
        agent.invoke(ASK)


def test_output_tool_names_may_not_shadow_the_agents_tools() -> None:
    with pytest.raises(ValueError, match="output tools"):
        create_loop_agent(ScriptedChatModel(), [add], response_format=ToolStrategy({
            "title": "add", "type": "object", "properties": {}}))


def test_the_shape_counts_respond_in_every_path() -> None:
    plain, respond = Shape(), Shape(respond=True)
    assert respond.round_steps(gated=False) == plain.round_steps(gated=False) + 1
    assert respond.finish_steps == plain.finish_steps + 1
    assert "respond" in respond.model_targets and "respond" in respond.detector_targets
    assert respond.respond_targets == ["model", "router", "tools"]


def test_a_gated_call_next_to_an_answer_still_asks_for_approval(scripted: list) -> None:
    decisions: list[Any] = []

    def resolver(request: dict[str, Any]) -> dict[str, Any]:
        decisions.append([a["name"] for a in request["action_requests"]])
        return {"decisions": [{"type": "approve"}]}

    agent, _ = _agent(scripted, [[("add", {"a": 2, "b": 3}), *answer()], answer(year=2025)],
                      response_format=Answer, approval=Approval(tools=["add"], resolver=resolver))
    out = agent.invoke(ASK)
    assert decisions == [["add"]]  # the output call is never gated
    assert out["structured_response"].year == 2024  # the answer given beside it ends the run
    assert_valid_thread(out["messages"])
