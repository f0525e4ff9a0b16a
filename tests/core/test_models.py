"""What ``create_loop_agent`` accepts as its model, as ``create_agent`` does (issue 20, item 3)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.chat_models import init_chat_model
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.retry import RunnableRetry
from langchain_openai import ChatOpenAI

from langgraph_loop import Iterations, Judge, create_loop_agent
from langgraph_loop.core.models import chat_models, map_chat_models, primary_chat_model, resolve_model
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.nodes.model import system_message
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add


def test_a_provider_string_goes_through_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"


@pytest.mark.parametrize("bad", [42, RunnableLambda(lambda x: x),
                                 ScriptedChatModel() | RunnableLambda(lambda x: x)])
def test_anything_else_is_refused_naming_what_is_accepted(bad: Any) -> None:
    with pytest.raises(ValueError, match="a 'provider:model' string, or a Runnable wrapping chat models"):
        create_loop_agent(bad)


def test_wrappers_are_kept_around_each_bound_chat_model() -> None:
    primary, backup = ScriptedChatModel(), ScriptedChatModel()
    model = resolve_model(primary.with_retry(stop_after_attempt=2).with_fallbacks([backup]))
    bound: Any = map_chat_models(model, lambda chat: chat.bind_tools([add]))
    assert isinstance(bound.runnable, RunnableRetry) and bound.runnable.max_attempt_number == 2
    assert [b.kwargs["tools"][0]["function"]["name"] for b in (bound.runnable.bound, bound.fallbacks[0])] == [
        "add", "add"]
    assert chat_models(model) == [primary, backup] and primary_chat_model(model) is primary


def test_a_configurable_model_is_a_chat_model_chosen_per_run() -> None:
    model = init_chat_model("openai:m", configurable_fields=("model",), api_key="test")
    assert chat_models(resolve_model(model)) == [model] and primary_chat_model(model) is None


def test_a_retried_model_answers_through_the_loop() -> None:
    chat = ScriptedChatModel(script=[RuntimeError("flaky"), "fine"])
    agent = create_loop_agent(chat.with_retry(stop_after_attempt=2, wait_exponential_jitter=False))
    assert agent.invoke({"messages": [HumanMessage("hi")]})["messages"][-1].content == "fine"


# --- the system prompt ---------------------------------------------------------------------------

def test_a_system_message_prompt_is_kept_with_its_name() -> None:
    prompt = SystemMessage("Be terse.", name="policy", id="p1")
    settings = LoopSettings.build(ScriptedChatModel(), system_prompt=prompt)
    assert system_message(settings, None) is prompt


def test_judge_criteria_join_a_system_message_prompt() -> None:
    judge = Judge(model=ScriptedChatModel(), criteria=["cite sources"])
    text = LoopSettings.build(ScriptedChatModel(), system_prompt=SystemMessage("Be terse.", name="p"),
                              iterations=Iterations(judge=judge))
    merged = system_message(text, None)
    assert merged is not None and merged.name == "p"
    assert str(merged.content).startswith("Be terse.\n\n") and "cite sources" in str(merged.content)
    blocks = [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}]
    cached = system_message(LoopSettings.build(ScriptedChatModel(), system_prompt=SystemMessage(blocks),
                                               iterations=Iterations(judge=judge)), None)
    assert cached is not None and cached.content[0] == blocks[0]  # type: ignore[index]
    assert "cite sources" in cached.content[1]["text"]  # type: ignore[index]


@pytest.mark.parametrize("bad", [3, ["a"]])
def test_a_system_prompt_of_another_type_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="system_prompt must be a str, a SystemMessage or None"):
        create_loop_agent(ScriptedChatModel(), system_prompt=bad)
