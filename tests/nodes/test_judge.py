"""The judge: verdict parsing (pure) and the judge node end to end."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_loop import Iterations, Judge, JudgeVerdict, StopReason, create_loop_agent
from langgraph_loop.core.messages import CONTINUE_NAME
from langgraph_loop.core.prompts import CONTINUE as DEFAULT_CONTINUE
from langgraph_loop.core.prompts import JUDGE_INSTRUCTIONS as DEFAULT_JUDGE_INSTRUCTIONS
from langgraph_loop.core.prompts import JUDGE_INTRO as INTRO
from langgraph_loop.core.prompts import JUDGE_QUESTION as QUESTION
from langgraph_loop.nodes.judge import (
    REASONING_LIMIT,
    criteria_block,
    judge_instructions,
    parse_text_verdict,
    resolve_verdict,
)
from langgraph_loop.nodes.model import criteria_instruction
from langgraph_loop.scripted import ScriptedChatModel


def verdict(answered: bool, reasoning: str) -> list[tuple[str, dict[str, Any]]]:
    """A scripted structured verdict (answers ``with_structured_output(JudgeVerdict)``)."""
    return [("JudgeVerdict", {"answered": answered, "reasoning": reasoning})]


# --- verdict parsing -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "answered"), [
    ("All good.\nVERDICT: DONE", True),
    ("Missing the date.\nVERDICT: MORE", False),
    ("VERDICT: DONE\nhmm, no.\nVERDICT: MORE", False),
    ("verdict: done", True),
    ("**VERDICT: DONE**", True),
    ("VERDICT:MORE", False),
    ("Looks fine to me.", False),
    ("The request is UNANSWERED.", False),
    ("The request is answered.", False),
    ('{"answered": false, "reasoning": "x"}\nVERDICT: DONE', False),
    ("```json\n{\"answered\": false}\n```", False),
    ('{"answered": true, "reasoning": "fine"}', True),
    ('{"answered": true} but VERDICT: MORE', False),
    ("answered: false. VERDICT: DONE", False),
])
def test_text_verdict(text: str, answered: bool) -> None:
    assert parse_text_verdict(text)["answered"] is answered


def test_text_verdict_reasoning_drops_the_marker_line_and_is_bounded() -> None:
    assert parse_text_verdict("No sources cited.\nVERDICT: MORE")["reasoning"] == "No sources cited."
    assert parse_text_verdict('{"answered": false, "reasoning": "no date"}')["reasoning"] == "no date"
    long = parse_text_verdict("x" * 5000 + "\nVERDICT: MORE")["reasoning"]
    assert len(long) == REASONING_LIMIT and long.endswith("…")


def test_resolve_prefers_structured_then_tool_args_then_text() -> None:
    assert resolve_verdict(JudgeVerdict(answered=False, reasoning="r"), [], "VERDICT: DONE") == {
        "answered": False, "reasoning": "r"}
    assert resolve_verdict(None, [{"answered": True}], "") == {"answered": True, "reasoning": ""}
    assert resolve_verdict(None, [], "VERDICT: DONE")["answered"] is True
    assert resolve_verdict({"reasoning": "no answered field"}, [], "")["answered"] is False


def test_instructions_template_the_criteria() -> None:
    block = criteria_block(["cite sources", "under 100 words"])
    assert block == ("\n\nThe response must satisfy all of the following criteria:\n"
                     "- cite sources\n- under 100 words")
    assert judge_instructions(None, ["cite sources", "under 100 words"]) == (
        DEFAULT_JUDGE_INSTRUCTIONS.replace("{criteria}", block))
    assert judge_instructions(None, []) == DEFAULT_JUDGE_INSTRUCTIONS.replace("{criteria}", "")
    assert judge_instructions("Strict editor.{{criteria}} VERDICT: rules", ["a"]) == (
        "Strict editor." + criteria_block(["a"]) + " VERDICT: rules")
    custom = judge_instructions("Strict editor.", ["a"])
    assert "- a" not in custom and custom.startswith("Strict editor.\n\n") and "VERDICT: MORE" in custom


# --- the judge node, end to end ------------------------------------------------------------

class Tags(BaseCallbackHandler):
    """Records the tags of every chat-model call."""

    def __init__(self) -> None:
        self.tags: list[list[str]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kw: Any) -> None:
        self.tags.append(list(kw.get("tags") or []))


def _judge_loop(scripted: list, agent_script: list, judge_script: list, **kw: Any):
    agent_model = ScriptedChatModel(script=agent_script)
    judge_model = ScriptedChatModel(script=judge_script)
    scripted.extend([agent_model, judge_model])
    judge = Judge(model=judge_model, criteria=kw.pop("criteria", ("state the year",)))
    loop = {"max": kw.pop("max_iterations")} if "max_iterations" in kw else {}
    if "should_continue" in kw:
        loop["should_continue"] = kw.pop("should_continue")
    agent = create_loop_agent(agent_model, iterations=Iterations(judge=judge, **loop),
                              system_prompt="You answer questions.", **kw)
    return agent, agent_model, judge_model


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_judge_loop_needs_two_passes(scripted: list, mode: str) -> None:
    agent, model, judge_model = _judge_loop(
        scripted, ["Paris hosted the Olympics.", "Paris hosted the Olympics in 2024."],
        [verdict(False, "The year is missing."), verdict(True, "Complete.")])
    tags = Tags()
    inp = {"messages": [HumanMessage("When did Paris host the Olympics?", id="req")]}
    config = {"callbacks": [tags]}
    out = agent.invoke(inp, config) if mode == "sync" else await agent.ainvoke(inp, config)
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 2
    assert out["verdict"] == {"answered": True, "reasoning": "Complete."}
    assert [r["verdict"] for r in out["iterations"]] == [
        {"answered": False, "reasoning": "The year is missing."},
        {"answered": True, "reasoning": "Complete."}]
    # the judge's exact request on pass 1
    first = judge_model.requests[0]
    assert [type(m) for m in first] == [SystemMessage, HumanMessage, HumanMessage, HumanMessage]
    assert first[0].content == judge_instructions(None, ["state the year"])
    assert first[1].content == INTRO
    assert first[2].content == "When did Paris host the Olympics?"
    assert first[3].content == (
        f"The agent's latest response was:\n\nParis hosted the Olympics.\n\n{QUESTION}")
    assert judge_model.request_tools == [["JudgeVerdict"], ["JudgeVerdict"]]
    assert judge_model.requests[1][3].content.startswith(
        "The agent's latest response was:\n\nParis hosted the Olympics in 2024.")
    # the agent saw the criteria and, on pass 2, the judge's reasoning
    assert model.requests[0][0].content == (
        "You answer questions.\n\n" + criteria_instruction(["state the year"]))
    second = model.requests[1]
    assert [m.type for m in second] == ["system", "human", "ai", "human"]
    assert second[3].name == CONTINUE_NAME
    assert second[3].content == ("Progress so far:\n1. Paris hosted the Olympics.\n\n"
                                 "Feedback on your last answer: The year is missing.\n\n"
                                 + DEFAULT_CONTINUE)
    # usage: judge tokens apart from the agent's; judge calls tagged
    judge_tokens = sum(1 for t in tags.tags if "judge" in t)
    assert judge_tokens == 2 and len(tags.tags) == 4
    assert [("judge" in t) for t in tags.tags] == [False, True, False, True]
    assert out["judge_usage"]["total_tokens"] > 0
    assert out["usage"]["total_tokens"] == sum(r["usage"]["total_tokens"] for r in out["iterations"])


def test_judge_sees_multimodal_request_unflattened(scripted: list) -> None:
    agent, _, judge_model = _judge_loop(scripted, ["A cat."], [verdict(True, "ok")], criteria=())
    content = [{"type": "text", "text": "What is in this picture?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    out = agent.invoke({"messages": [HumanMessage(content)]})  # type: ignore[arg-type]
    assert out["stop_reason"] == StopReason.COMPLETED
    assert judge_model.requests[0][2].content == content


def test_text_fallback_when_the_judge_answers_in_text(scripted: list) -> None:
    agent, model, judge_model = _judge_loop(
        scripted, ["draft", "final"],
        ["Not yet: no year.\nVERDICT: MORE", "Good.\nVERDICT: DONE"])
    out = agent.invoke({"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 2
    assert out["iterations"][0]["verdict"] == {"answered": False, "reasoning": "Not yet: no year."}
    assert "Feedback on your last answer: Not yet: no year." in model.requests[1][-1].content
    assert judge_model.request_tools == [["JudgeVerdict"], ["JudgeVerdict"]]  # no extra call


def test_garbage_from_the_judge_is_not_answered(scripted: list) -> None:
    agent, _, _ = _judge_loop(scripted, ["a", "b"], ['{"answered": false}', "whatever"],
                              max_iterations=2)
    out = agent.invoke({"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS
    assert out["iterations"][0]["verdict"]["answered"] is False


class NoStructured(ScriptedChatModel):
    """A judge model that cannot do structured output at all."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_judge_without_structured_output_uses_text(scripted: list) -> None:
    agent_model = ScriptedChatModel(script=["done"])
    judge_model = NoStructured(script=["VERDICT: DONE"])
    scripted.extend([agent_model, judge_model])
    out = create_loop_agent(agent_model, iterations=Iterations(judge=Judge(model=judge_model))).invoke(
        {"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.COMPLETED
    assert judge_model.request_tools == [[]]


def test_judge_error_is_retried_once_as_text(scripted: list) -> None:
    agent, _, judge_model = _judge_loop(scripted, ["a"],
                                        [RuntimeError("503 from judge"), "VERDICT: DONE"])
    out = agent.invoke({"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 1
    assert judge_model.request_tools == [["JudgeVerdict"], []]
    assert judge_model.requests[0] == judge_model.requests[1]


def test_judge_failing_twice_counts_as_not_answered(scripted: list) -> None:
    agent, model, judge_model = _judge_loop(
        scripted, ["a", "b"],
        [RuntimeError("boom 1"), RuntimeError("boom 2"), verdict(True, "ok")])
    out = agent.invoke({"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 2
    assert out["iterations"][0]["verdict"] == {
        "answered": False, "reasoning": "",
        "error": "RuntimeError: boom 1; RuntimeError: boom 2"}
    assert model.requests[1][-1].content == "Progress so far:\n1. a\n\n" + DEFAULT_CONTINUE
    assert judge_model.calls == 3


def test_predicate_first_then_judge_and_nothing_on_the_capped_pass(scripted: list) -> None:
    asked: list[int] = []

    def keep_going(state: dict) -> tuple[bool, str] | bool:
        asked.append(state["iteration"])
        return (True, "write more") if state["iteration"] == 1 else False

    agent, model, judge_model = _judge_loop(
        scripted, ["one", "two", "three"], [verdict(False, "needs a conclusion")],
        should_continue=keep_going, max_iterations=3)
    out = agent.invoke({"messages": [HumanMessage("essay")]})
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS and out["iteration"] == 3
    assert asked == [1, 2]  # not asked on the capped pass
    assert judge_model.calls == 1  # skipped on pass 1 (predicate continued) and pass 3 (cap)
    assert judge_model.requests[0][3].content.startswith("The agent's latest response was:\n\ntwo")
    assert [r["verdict"] for r in out["iterations"]] == [
        None, {"answered": False, "reasoning": "needs a conclusion"}, None]
    assert "Feedback on your last answer: write more" in model.requests[1][-1].content
    assert "Feedback on your last answer: needs a conclusion" in model.requests[2][-1].content


def test_predicate_stop_lets_the_judge_stop(scripted: list) -> None:
    agent, _, judge_model = _judge_loop(scripted, ["x"], [verdict(True, "fine")],
                                        should_continue=lambda s: False)
    out = agent.invoke({"messages": [HumanMessage("q")]})
    assert out["stop_reason"] == StopReason.COMPLETED and judge_model.calls == 1


def test_graph_has_a_judge_node_only_when_configured(scripted: list) -> None:
    agent, _, _ = _judge_loop(scripted, [], [])
    assert "judge" in agent.get_graph().nodes
    assert "judge" not in create_loop_agent(ScriptedChatModel()).get_graph().nodes


def test_streamed_judge_tokens_carry_the_judge_tag(scripted: list) -> None:
    agent, _, _ = _judge_loop(scripted, ["the answer"], ["fine\nVERDICT: DONE"])
    chunks = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="messages"))
    tagged = {meta["langgraph_node"] for _, meta in chunks if "judge" in (meta.get("tags") or [])}
    untagged = {meta["langgraph_node"] for _, meta in chunks
                if "judge" not in (meta.get("tags") or [])}
    assert tagged == {"judge"} and untagged == {"model"}
