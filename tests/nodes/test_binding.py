"""What the model node binds per call (``nodes/binding.py``): provider-side tools, the response
format, and a final answer that keeps the tools defined and forbids their use (issue 20, item 5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain.chat_models import init_chat_model
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from langgraph_loop import Iterations, LoopDetection, Repeat, StopReason, create_loop_agent
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.engine.final import forbid_tools, none_choice, without_tool_calls
from langgraph_loop.nodes.binding import call_model, final_model
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, assert_valid_thread

WEB = {"type": "web_search"}


class Answer(BaseModel):
    """An answer."""

    text: str


def claude(**kw: Any) -> ChatAnthropic:
    return ChatAnthropic(model="claude-test", api_key="k", **kw)  # type: ignore[call-arg]


def gpt(model: str = "m", **kw: Any) -> ChatOpenAI:
    return ChatOpenAI(model=model, api_key="k", **kw)  # type: ignore[arg-type]


class ConverseLike(ScriptedChatModel):
    """A provider whose string ``tool_choice`` values all name a tool (as Bedrock Converse)."""

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> Runnable[Any, AIMessage]:
        choice = None if tool_choice is None else {"tool": {"name": tool_choice}}
        return super().bind_tools(tools, tool_choice=choice, **kwargs)


def kwargs_of(bound: Any) -> dict[str, Any]:
    return dict(bound.kwargs)


# --- forbidding tools ----------------------------------------------------------------------------

def test_the_none_choice_per_provider() -> None:
    assert none_choice(ScriptedChatModel()) == "none" and none_choice(gpt()) == "none"
    assert none_choice(claude()) == {"type": "none"}
    assert none_choice(init_chat_model("openai:m", configurable_fields=("model",), api_key="k")) is None
    assert none_choice(claude(profile={"tool_choice": False})) is None


def test_a_provider_that_misreads_none_gets_no_choice() -> None:
    bound = forbid_tools(ConverseLike(), [add])
    assert "tool_choice" not in kwargs_of(bound) or kwargs_of(bound)["tool_choice"] is None
    assert [t["function"]["name"] for t in kwargs_of(bound)["tools"]] == ["add"]


def test_the_final_answer_keeps_every_tool_defined() -> None:
    server_tool = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    settings = LoopSettings.build(claude(), [add, server_tool])
    bound = kwargs_of(final_model(settings))
    assert bound["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in bound["tools"]] == ["add", "web_search"]
    assert server_tool in bound["tools"]  # the provider tool as given


def test_each_fallback_gets_its_own_choice_and_cap() -> None:
    settings = LoopSettings.build(claude(max_tokens=50).with_fallbacks([gpt()]), [add])
    bound: Any = final_model(settings, room=80)
    assert kwargs_of(bound.runnable)["tool_choice"] == {"type": "none"}
    assert kwargs_of(bound.runnable)["max_tokens"] == 50  # its own cap is lower than the room
    assert kwargs_of(bound.fallbacks[0])["tool_choice"] == "none"


def test_without_tool_calls_drops_their_content_blocks_and_keeps_output_calls() -> None:
    reply = AIMessage(
        [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", "name": "add", "input": {}},
         {"type": "tool_use", "id": "t2", "name": "Answer", "input": {"text": "x"}}],
        tool_calls=[{"name": "add", "args": {}, "id": "t1"},
                    {"name": "Answer", "args": {"text": "x"}, "id": "t2"}])
    final = without_tool_calls(reply, keep={"Answer"})
    assert [c["id"] for c in final.tool_calls] == ["t2"]
    assert [b["type"] for b in final.content] == ["text", "tool_use"]  # type: ignore[index]
    assert final.response_metadata["langgraph_loop_dropped_tool_calls"][0]["id"] == "t1"


def test_a_dropped_call_never_runs_and_the_run_ends_on_text(scripted: list) -> None:
    """A model that ignores the choice: its call is dropped, the thread stays valid."""
    model = ConverseLike(script=[[("add", {"a": 1, "b": 1})]] * 3 + [
        AIMessage("final", tool_calls=[{"name": "add", "args": {"a": 0, "b": 0}, "id": "late"}])])
    scripted.append(model)
    agent = create_loop_agent(model, [add], loop_detection=LoopDetection(repeat=Repeat(warn_after=2,
                                                                                       stop_after=3)))
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert out["stop_reason"] == StopReason.LOOP_DETECTED and out["messages"][-1].content == "final"
    assert out["messages"][-1].tool_calls == [] and model.request_tool_choice[-1] is None
    assert model.request_defined_tools[-1] == ["add"]
    assert_valid_thread(out["messages"])


# --- a loop call ---------------------------------------------------------------------------------

def test_provider_side_tools_are_bound_and_never_run(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})], "done"])
    scripted.append(model)
    out = create_loop_agent(model, [add, WEB]).invoke({"messages": [HumanMessage("go")]})
    assert model.request_defined_tools == [["add", "web_search"]] * 2
    assert [m.name for m in out["messages"] if m.type == "tool"] == ["add"]


def test_the_name_is_on_every_reply_the_final_answer_too(scripted: list) -> None:
    model = ScriptedChatModel(script=[[("add", {"a": 1, "b": 2})]], no_tools_reply="stopped here")
    scripted.append(model)
    agent = create_loop_agent(model, [add], iterations=Iterations(max_model_calls=1), name="adder")
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert out["stop_reason"] == StopReason.MAX_MODEL_CALLS
    assert [m.name for m in out["messages"] if m.type == "ai"] == ["adder", "adder"]


def test_tool_strategy_forces_a_tool_and_adds_the_output_tools() -> None:
    bound = kwargs_of(call_model(LoopSettings.build(gpt(), [add], response_format=ToolStrategy(Answer))))
    assert bound["tool_choice"] == "required"  # "any", in OpenAI's words
    assert [t["function"]["name"] for t in bound["tools"]] == ["add", "Answer"]


def test_provider_strategy_binds_the_providers_format() -> None:
    bound = kwargs_of(call_model(LoopSettings.build(gpt(), [add], response_format=ProviderStrategy(Answer))))
    assert bound["response_format"]["json_schema"]["name"] == "Answer"
    assert bound["tools"][0]["function"]["strict"] is True  # as create_agent sets it


def test_a_bare_schema_is_native_where_the_profile_says_so() -> None:
    native = LoopSettings.build(gpt(model="gpt-4o"), [add], response_format=Answer).structured
    tools = LoopSettings.build(ScriptedChatModel(), [add], response_format=Answer).structured
    assert native is not None and native.native and tools is not None and not tools.native
