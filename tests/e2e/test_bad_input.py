"""Bad input gets a clear error and loses nothing.

Malformed tool-call JSON from a real provider client, a provider that fails (retried,
then an error that leaves the thread resumable with its queued notice), judges that
answer garbage, user callbacks that raise, invalid configuration (``ValueError``
naming the field) and oversized tool outputs (cut to ``max_tool_output_chars`` with a
note saying so).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import SecretStr

from langgraph_loop import Iterations, Judge, Limits, LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.core.messages import LOOP_NOTICE, check_pairing
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add
from tests.support.openai_server import OpenAIServer, error, text, tool_calls


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21C"


@tool
def dump() -> str:
    """Return a very large output."""
    return "0123456789" * 500


def _cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _llm(server: OpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(base_url=server.base_url, api_key=SecretStr("x"), model="m", max_retries=0)


def test_malformed_tool_call_json_from_the_provider(server: OpenAIServer) -> None:
    """``invalid_tool_calls`` get an error ToolMessage naming the problem; nothing runs."""
    server.script += [tool_calls([("lookup", '{"city": "Par')]), text("Sorry, retrying."),]
    agent = create_loop_agent(_llm(server), [lookup])
    result = agent.invoke({"messages": [HumanMessage("Weather in Paris?")]})
    ai, answer = result["messages"][1], result["messages"][2]
    assert isinstance(ai, AIMessage) and ai.invalid_tool_calls and not ai.tool_calls
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert "not valid JSON" in str(answer.content) and "it was not run" in str(answer.content)
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert result["iterations"][0]["tool_calls"][0]["status"] == "invalid"
    assert not check_pairing(result["messages"]) and result["stop_reason"] == "completed"


def test_provider_failure_is_retried_then_raised_and_the_thread_resumes(
        server: OpenAIServer) -> None:
    """Three HTTP 500s exhaust the retry policy: the provider's error reaches the caller,
    the queued loop warning stays queued, and ``invoke(None)`` finishes the run."""
    call = [("lookup", {"city": "Paris"})]
    server.script += [tool_calls(call), tool_calls(call)] + [error(500, "overloaded")] * 3 + [
        text("Paris: 21C.")]
    agent = create_loop_agent(_llm(server), [lookup], checkpointer=InMemorySaver(),
                              loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)))
    with pytest.raises(openai.InternalServerError, match="overloaded"):
        agent.invoke({"messages": [HumanMessage("Weather in Paris?")]}, _cfg("down"))
    stored = agent.get_state(_cfg("down"))
    assert stored.next == ("model",) and not check_pairing(stored.values["messages"])
    assert [n["source"] for n in stored.values["loop_notices"]] == ["loop"]
    result = agent.invoke(None, _cfg("down"))
    assert result["stop_reason"] == "completed" and result["messages"][-1].content == "Paris: 21C."
    warnings = [m for m in result["messages"] if m.type == "human" and m.name == LOOP_NOTICE]
    assert len(warnings) == 1 and result["loop_notices"] == []
    assert len(server.requests) == 6 and result["iterations"][0]["model_calls"] == 3


def test_judge_answering_garbage_counts_as_not_answered(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=["first try", "second try"])
    judge = ScriptedChatModel(script=["¯\\_(ツ)_/¯ {answered: maybe"])
    scripted += [model, judge]
    agent = create_loop_agent(model, iterations=Iterations(judge=Judge(model=judge), max=2))
    result = agent.invoke({"messages": [HumanMessage("Do it.")]})
    assert result["stop_reason"] == "max_iterations"
    assert result["iterations"][0]["verdict"]["answered"] is False
    assert model.calls == 2 and judge.calls == 1  # the capped pass asks no judge


@pytest.mark.parametrize("name", ["should_continue", "continuation", "record_feedback"])
def test_callback_that_raises_names_itself_and_the_thread_resumes(
        scripted: list[ScriptedChatModel], name: str) -> None:
    model = ScriptedChatModel(script=["pass one", "pass two"])
    scripted.append(model)
    broken = [True]

    def callback(*args: Any) -> Any:
        if broken.pop() if broken else False:
            raise ZeroDivisionError("oops")
        return {"should_continue": args[0]["iteration"] < 2, "continuation": "Go on.",
                "record_feedback": "noted"}[name]

    options: dict[str, Any] = {name: callback}
    if name != "should_continue":
        options["should_continue"] = lambda s: s["iteration"] < 2
    agent = create_loop_agent(model, checkpointer=InMemorySaver(), iterations=Iterations(**options))
    with pytest.raises(CallbackError, match=f"{name} raised ZeroDivisionError: oops"):
        agent.invoke({"messages": [HumanMessage("Do it.")]}, _cfg(name))
    assert not check_pairing(agent.get_state(_cfg(name)).values["messages"])
    result = agent.invoke(None, _cfg(name))
    assert result["stop_reason"] == "completed" and model.calls == 2
    assert [r["iteration"] for r in result["iterations"]] == [1, 2]


@pytest.mark.parametrize(("options", "field"), [
    ({"limits": {"max_tool_calls": 0}}, "limits: max_tool_calls"),
    ({"limits": "strict"}, "limits: expected a Limits"),
    ({"loop_detection": {"repeat": {"warn_after": 4, "stop_after": 3}}},
     "loop_detection: repeat: Repeat: stop_after must be greater than warn_after"),
    ({"compaction": 8000}, "compaction: expected a Compaction"),
    ({"hooks": ["on_tool_call"]}, "hooks: expected a Hooks"),
    ({"approval": {"tools": ["nope"]}}, "approval.tools: unknown tools"),
    ({"system_prompt": 42}, "system_prompt"),
    ({"iterations": {"max": 0}}, "iterations: max: Input should be greater than or equal to 1"),
    ({"iterations": {"max": True}}, "iterations: max: Input should be a valid integer"),
    ({"iterations": {"judge": "gpt-4o"}}, "iterations: judge: Input should be a valid dictionary"),
    ({"iterations": {"fresh_context": "no"}}, "iterations: fresh_context: Input should be a valid boolean"),
    ({"iterations": {"stall": {"consecutive": 1}}}, "iterations: stall.consecutive"),
    ({"iterations": "fast"}, "iterations: expected an Iterations"),
    ({"hooks": {"tool_filter": "add"}}, "hooks: tool_filter: Input should be callable"),
    ({"limits": {"final_answr": False}}, "limits: final_answr: unknown field (fields of Limits: "
     "max_tool_calls, token_budget, max_duration_s, final_answer, max_tool_output_chars, "
     "max_tool_errors, budget_pressure, budget_check_in, budget_scope)"),
    ({"iterations": {"stall": {"consecutiv": 3}}},
     "iterations: stall.consecutiv: unknown field (fields of StallDetection: consecutive, tolerance)"),
    ({"limits": {"budget_pressure": {"treshold": 0.5}}},
     "limits: budget_pressure.treshold: unknown field (fields of BudgetPressure: threshold, instruction)"),
])
def test_invalid_configuration_names_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError) as info:
        create_loop_agent(ScriptedChatModel(script=[]), [add], **options)
    assert field in str(info.value)


@pytest.mark.parametrize(("options", "text"), [
    ({"max_iteration": 3}, "create_loop_agent: unknown arguments ['max_iteration']"),
    ({"max_iterations": 3}, "create_loop_agent(max_iterations=...) was removed in 0.4: use "
                            "iterations=Iterations(max=...)"),
])
def test_an_unknown_or_removed_keyword_is_a_type_error_naming_it(options: dict[str, Any],
                                                                  text: str) -> None:
    with pytest.raises(TypeError) as info:
        create_loop_agent(ScriptedChatModel(script=[]), [add], **options)
    assert str(info.value) == text


@pytest.mark.parametrize(("build", "text"), [
    (lambda: Limits(final_answr=False), "final_answr: unknown field (fields of Limits: max_tool_calls,"),
    (lambda: Iterations(maxx=3), "maxx: unknown field (fields of Iterations: max, max_model_calls,"),
    (lambda: Iterations(stall={"consecutiv": 3}),
     "consecutiv: unknown field (fields of StallDetection: consecutive, tolerance)"),
])
def test_a_misspelled_field_of_a_model_names_the_real_ones(build: Any, text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(text)):
        build()


def test_configuration_may_be_given_as_dicts(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=lambda _m: [("add", {"a": 1, "b": 1})],
                              no_tools_reply="stopped")
    scripted.append(model)
    agent = create_loop_agent(model, [add], limits={"max_tool_calls": 2}, loop_detection=None)
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == "max_tool_calls" and result["messages"][-1].content == "stopped"


@pytest.mark.parametrize("context", [None, {"limits": {"max_tool_output_chars": 150}}])
def test_oversized_tool_output_is_cut_with_a_note(scripted: list[ScriptedChatModel],
                                                  context: dict[str, Any] | None) -> None:
    model = ScriptedChatModel(script=[[("dump", {})], "ok"])
    scripted.append(model)
    agent = create_loop_agent(model, [dump], limits=Limits(max_tool_output_chars=300))
    result = agent.invoke({"messages": [HumanMessage("dump it")]}, context=context)
    limit = (context or {}).get("limits", {}).get("max_tool_output_chars", 300)
    sent = model.requests[1][-1]
    assert isinstance(sent, ToolMessage)
    assert sent.content == ("0123456789" * 500)[:limit] + (
        f"\n\n[output truncated: 5000 characters, the first {limit} are shown]")
    assert result["messages"][2].content == sent.content
