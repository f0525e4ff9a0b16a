"""Drop-in cases LangChain's own ``create_agent`` tests found (issue 39) and middleware faults
(issue 40, items 5-7): each case through ``create_agent`` and ``create_loop_agent`` side by
side where ``create_agent`` defines the behaviour.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    TracePolicy,
    configure_trace_policy,
    hook_config,
    omit_payload,
)
from langchain.agents.middleware.types import ModelResponse, PrivateStateAttr
from langchain.agents.structured_output import StructuredOutputError, ToolStrategy
from langchain_core.exceptions import ModelRateLimitError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.tracers import BaseTracer, Run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel, Field

from langgraph_loop import create_loop_agent
from langgraph_loop.middleware import LoopDetectionMiddleware
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


# --- create_agent's keywords and what it registers --------------------------------------------

@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def echo_call(call_id: str = "e1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "echo", "args": {"text": "x"}, "id": call_id,
                                      "type": "tool_call"}])


@pytest.mark.parametrize("build", BUILDERS)
def test_tools_none_is_an_agent_without_tools(build: Any) -> None:
    model = scripted("hello")
    result = build(model, None).invoke(ask())
    assert result["messages"][-1].content == "hello"
    assert model.request_tools == [[]]


@pytest.mark.parametrize("build", BUILDERS)
def test_v3_stream_events_project_the_tool_calls_without_opt_in(build: Any) -> None:
    agent = build(scripted(echo_call(), "done"), [echo])
    run = agent.stream_events(ask(), version="v3")
    streamed = list(run.tool_calls)
    assert [(tc.tool_name, tc.tool_call_id, tc.completed, tc.error) for tc in streamed] == [
        ("echo", "e1", True, None)]


@pytest.mark.parametrize("build", BUILDERS)
def test_the_agents_name_is_in_every_streamed_tokens_metadata(build: Any) -> None:
    agent = build(scripted(echo_call(), "done"), [echo], name="helper")
    names = {meta.get("lc_agent_name")
             for _, meta in agent.stream(ask(), stream_mode="messages")}
    assert names == {"helper"}


@pytest.mark.parametrize("build", BUILDERS)
def test_compile_keywords_are_passed_through(build: Any) -> None:
    agent = build(scripted(echo_call(), "done"), [echo], interrupt_before=["tools"],
                  checkpointer=InMemorySaver(), debug=False, cache=None)
    thread = {"configurable": {"thread_id": "t"}}
    agent.invoke(ask(), thread)
    assert agent.get_state(thread).next == ("tools",)
    assert agent.invoke(None, thread)["messages"][-1].content == "done"


# --- a middleware's trace_policy ---------------------------------------------------------------

class Traced(BaseTracer):
    """Records the inputs of every traced run by name."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: dict[str, Any] = {}

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_chain_start(self, run: Run) -> None:
        self.inputs.setdefault(run.name, run.inputs)


class Hooked(AgentMiddleware[Any, Any]):
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None


class Secretive(Hooked):
    trace_policy = TracePolicy(process_inputs=omit_payload, process_outputs=omit_payload)


@pytest.mark.parametrize("build", BUILDERS)
def test_a_hook_nodes_trace_omits_what_its_trace_policy_omits(build: Any) -> None:
    tracer = Traced()
    build(scripted("done"), middleware=[Secretive()]).invoke(ask("my card is 4111"),
                                                              {"callbacks": [tracer]})
    assert tracer.inputs["Secretive.before_model"] == {}
    assert tracer.inputs["Secretive.after_model"] == {}
    assert "my card is 4111" in str(tracer.inputs["model"])  # the model node is traced as usual


@pytest.mark.parametrize("build", BUILDERS)
def test_the_default_trace_policy_set_after_the_build_applies_to_hook_nodes(build: Any) -> None:
    tracer = Traced()
    agent = build(scripted("done"), middleware=[Hooked()])
    configure_trace_policy(TracePolicy(process_inputs=omit_payload))
    try:
        agent.invoke(ask("my card is 4111"), {"callbacks": [tracer]})
    finally:
        configure_trace_policy(None)
    assert tracer.inputs["Hooked.before_model"] == tracer.inputs["Hooked.after_model"] == {}


# --- tools a middleware adds ------------------------------------------------------------------

@tool
def extra(text: str) -> str:
    """A tool only the middleware knows."""
    return f"extra ran on {text}"


class AddsAndRuns(AgentMiddleware[Any, Any]):
    """Offers ``extra`` to the model and runs it when called."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, extra]))

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "extra":
            return handler(request.override(tool=extra))
        return handler(request)


class OnlyAdds(AgentMiddleware[Any, Any]):
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[*request.tools, extra]))


def extra_call() -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "extra", "args": {"text": "x"}, "id": "x1",
                                      "type": "tool_call"}])


@pytest.mark.parametrize("build", BUILDERS)
def test_a_tool_a_middleware_adds_and_runs_runs(build: Any) -> None:
    model = scripted(extra_call(), "done")
    result = build(model, [echo], middleware=[AddsAndRuns()]).invoke(ask())
    assert [m.content for m in result["messages"][2:]] == ["extra ran on x", "done"]
    assert model.request_tools[0] == ["echo", "extra"]


@pytest.mark.parametrize("build", BUILDERS)
def test_a_tool_a_middleware_adds_but_nobody_runs_is_an_error_naming_it(build: Any) -> None:
    agent = build(scripted(extra_call(), "done"), [echo], middleware=[OnlyAdds()])
    with pytest.raises(ValueError, match=r"(?s)Middleware added tools.*Unknown tools:.*extra"):
        agent.invoke(ask())


# --- exceptions a wrap_tool_call middleware raises itself ---------------------------------------

class SyncOnly(AgentMiddleware[Any, Any]):
    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


class Refuses(AgentMiddleware[Any, Any]):
    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        raise PermissionError("policy check failed")


@pytest.mark.parametrize("build", BUILDERS)
async def test_a_sync_only_tool_wrapper_under_ainvoke_fails_the_run(build: Any) -> None:
    model = scripted(echo_call(), "done")
    agent = build(model, [echo], middleware=[SyncOnly()])
    with pytest.raises(NotImplementedError, match="awrap_tool_call is not available"):
        await agent.ainvoke(ask())
    assert len(model.requests) == 1


@pytest.mark.parametrize("build", BUILDERS)
def test_an_exception_a_tool_wrapper_raises_itself_fails_the_run(build: Any) -> None:
    model = scripted(echo_call(), "done")
    with pytest.raises(PermissionError, match="policy check failed"):
        build(model, [echo], middleware=[Refuses()]).invoke(ask())
    assert len(model.requests) == 1


# --- binding -----------------------------------------------------------------------------------

class Answer(BaseModel):
    text: str


@pytest.mark.parametrize("build", BUILDERS)
def test_a_model_without_bind_tools_builds_with_a_response_format_and_fails_when_called(
        build: Any) -> None:
    agent = build(GenericFakeChatModel(messages=iter([AIMessage("hi")])), response_format=Answer)
    assert "model" in agent.get_graph().nodes
    with pytest.raises(NotImplementedError):
        agent.invoke(ask())


# --- node hooks: jumps and removals (issue 40, items 5 and 6) ---------------------------------

class TypoAfterModel(AgentMiddleware[Any, Any]):
    @hook_config(can_jump_to=["end"])
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "finish"}


class TypoBeforeModel(AgentMiddleware[Any, Any]):
    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "finish"}


@pytest.mark.parametrize("build", BUILDERS)
def test_an_unknown_jump_target_after_the_model_fails_the_run_before_any_tool_runs(
        build: Any) -> None:
    ran: list[str] = []

    @tool
    def act(text: str) -> str:
        """Act."""
        ran.append(text)
        return "acted"

    model = scripted(AIMessage("", tool_calls=[{"name": "act", "args": {"text": "x"}, "id": "a1",
                                                "type": "tool_call"}]), "done")
    with pytest.raises(Exception) as raised:
        build(model, [act], middleware=[TypoAfterModel()]).invoke(ask())
    assert ran == []
    if build is create_loop_agent:
        assert raised.type is ValueError
        assert str(raised.value) == ("middleware TypoAfterModel.after_model: jump_to 'finish' is "
                                     "not a target; use one of ['model', 'tools', 'end'] "
                                     "(declared: ['end'])")


def test_an_unknown_jump_target_before_the_model_fails_before_the_model_is_called() -> None:
    model = scripted("done")
    with pytest.raises(ValueError, match=r"TypoBeforeModel.before_model: jump_to 'finish'"):
        create_loop_agent(model, middleware=[TypoBeforeModel()]).invoke(ask())
    assert model.requests == []


class DropsResults(AgentMiddleware[Any, Any]):
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        gone = [RemoveMessage(id=str(m.id)) for m in state["messages"] if isinstance(m, ToolMessage)]
        return {"messages": gone} if gone else None


class DropsRounds(AgentMiddleware[Any, Any]):
    """Removes each tool-calling reply: its results go with it."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        gone = [RemoveMessage(id=str(m.id)) for m in state["messages"]
                if isinstance(m, AIMessage) and m.tool_calls]
        return {"messages": gone} if gone else None


def test_a_before_model_hook_removing_a_tool_result_is_refused_before_the_model_sees_it() -> None:
    model = scripted(echo_call(), "done")
    with pytest.raises(ValueError, match=r"middleware DropsResults.before_model: its update would "
                                         r"break the transcript \(message 1: tool calls \['e1'\] "
                                         r"not answered at the end\)"):
        create_loop_agent(model, [echo], middleware=[DropsResults()]).invoke(ask())
    assert len(model.requests) == 1


def test_a_before_model_hook_removing_a_reply_removes_its_results_with_it() -> None:
    model = scripted(echo_call(), "done")
    result = create_loop_agent(model, [echo], middleware=[DropsRounds()]).invoke(ask())
    assert [m.type for m in model.requests[1]] == ["human"]
    assert [m.content for m in result["messages"]] == ["go", "done"]


# --- errors inside the wrap_model_call chain --------------------------------------------------

class RetriesParseErrors(AgentMiddleware[Any, Any]):
    """Asks again once when the structured answer does not parse."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except StructuredOutputError as exc:
            request.messages.append(HumanMessage(f"That did not parse: {exc}. Try again."))
            return handler(request)


class PassesThrough(AgentMiddleware[Any, Any]):
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


def answer_call(args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "Answer", "args": args, "id": call_id,
                                      "type": "tool_call"}])


@pytest.mark.parametrize("build", BUILDERS)
def test_a_retry_middleware_sees_a_structured_answer_that_did_not_parse(build: Any) -> None:
    model = scripted(answer_call({"wrong": 1}, "s1"), answer_call({"text": "ok"}, "s2"))
    agent = build(model, middleware=[RetriesParseErrors()],
                  response_format=ToolStrategy(Answer, handle_errors=False))
    result = agent.invoke(ask())
    assert result["structured_response"] == Answer(text="ok")
    assert len(model.requests) == 2
    assert model.requests[1][-1].content.startswith("That did not parse: Failed to parse")


@pytest.mark.parametrize("build", BUILDERS)
def test_an_error_out_of_the_wrap_model_call_chain_is_not_retried_by_the_agent(build: Any) -> None:
    model = scripted(ModelRateLimitError("slow down"), "hello")
    with pytest.raises(ModelRateLimitError):
        build(model, middleware=[PassesThrough()]).invoke(ask())
    assert len(model.requests) == 1


@pytest.mark.parametrize("build", BUILDERS)
def test_a_reply_with_the_structured_answer_and_another_call_ends_after_that_call(build: Any) -> None:
    both = AIMessage("", tool_calls=[
        {"name": "echo", "args": {"text": "x"}, "id": "e1", "type": "tool_call"},
        {"name": "Answer", "args": {"text": "ok"}, "id": "s1", "type": "tool_call"}])
    model = scripted(both, "never asked")
    result = build(model, [echo], response_format=ToolStrategy(Answer)).invoke(ask())
    assert len(model.requests) == 1
    assert result["structured_response"] == Answer(text="ok")
    answers = {m.tool_call_id: (m.name, m.status) for m in result["messages"]
               if isinstance(m, ToolMessage)}
    assert answers == {"e1": ("echo", "success"), "s1": ("Answer", "success")}
    assert result["messages"][-1].type == "tool"
    assert result.get("stop_reason", "completed") == "completed"


class SetsStructuredResponse(AgentMiddleware[Any, Any]):
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        response = handler(request)
        return ModelResponse(result=response.result, structured_response={"from": "middleware"})


@pytest.mark.parametrize("build", BUILDERS)
def test_a_structured_response_a_model_call_middleware_sets_is_the_runs(build: Any) -> None:
    result = build(scripted("hello"), middleware=[SetsStructuredResponse()]).invoke(ask())
    assert result["structured_response"] == {"from": "middleware"}
    assert [m.content for m in result["messages"]] == ["go", "hello"]


class Where(BaseModel):
    place: str


class CountsBindings(ScriptedChatModel):
    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound.append(sorted(getattr(t, "name", "") for t in tools))
        return super().bind_tools(tools, **kwargs)


class NarrowsToAnswer(AgentMiddleware[Any, Any]):
    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(response_format=ToolStrategy(Answer)))


@pytest.mark.parametrize("build", BUILDERS)
def test_a_model_call_middleware_that_narrows_the_response_format_binds_only_its_tool(
        build: Any) -> None:
    model = CountsBindings(script=[answer_call({"text": "ok"}, "s1")])
    result = build(model, [], response_format=ToolStrategy(Answer | Where),
                   middleware=[NarrowsToAnswer()]).invoke(ask())
    assert result["structured_response"] == Answer(text="ok")
    assert model.bound == [["Answer"]]
    assert model.request_defined_tools == [["Answer"]]


# --- the final answer after a middleware stop -------------------------------------------------

@tool
def status() -> str:
    """The job's status."""
    return "pending"


def stubborn(messages: Any) -> AIMessage:
    """Always asks for the status again, the legacy way too (no-tools request ignored)."""
    n = sum(isinstance(m, AIMessage) for m in messages)
    return AIMessage("", tool_calls=[{"name": "status", "args": {}, "id": f"s{n}", "type": "tool_call"}],
                     additional_kwargs={"function_call": {"name": "status", "arguments": "{}"}},
                     response_metadata={"finish_reason": "tool_calls"})


def test_a_middleware_stop_ends_on_an_answer_without_the_calls_the_model_still_asked_for() -> None:
    model = ScriptedChatModel(default=stubborn)
    result = create_agent(model, [status], middleware=[LoopDetectionMiddleware()]).invoke(ask())
    final = result["messages"][-1]
    assert result["stop_reason"] == "loop_detected"
    assert final.tool_calls == []
    assert final.content.startswith("(No answer: the run stopped (loop_detected)")
    assert "function_call" not in final.additional_kwargs
    assert final.response_metadata["finish_reason"] == "stop"


# --- return_direct follows the tool that ran --------------------------------------------------

@tool(return_direct=True)
def direct(x: str) -> str:
    """Answers the user directly."""
    return f"direct {x}"


@tool
def normal(x: str) -> str:
    """Answers the model."""
    return f"normal {x}"


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize(("requested", "replacement", "turns_after"),
                         [("direct", "normal", 1), ("normal", "direct", 0)])
def test_an_edited_call_ends_the_run_as_the_tool_that_ran_says(
        build: Any, requested: str, replacement: str, turns_after: int) -> None:
    model = scripted(AIMessage("", tool_calls=[{"name": requested, "args": {"x": "1"}, "id": "r1",
                                                "type": "tool_call"}]), "done")
    hitl = HumanInTheLoopMiddleware(interrupt_on={requested: {"allowed_decisions": ["approve", "edit"]}})
    agent = build(model, [direct, normal], middleware=[hitl], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "edit"}}
    agent.invoke(ask(), thread)
    edit = {"type": "edit", "edited_action": {"name": replacement, "args": {"x": "1"}}}
    final = agent.invoke(Command(resume={"decisions": [edit]}), thread)
    at = max(i for i, m in enumerate(final["messages"]) if isinstance(m, ToolMessage))
    # the tool that ran answered (HumanInTheLoopMiddleware's wording around it varies by version)
    assert final["messages"][at].name == replacement
    assert final["messages"][at].content.endswith(f"{replacement} 1")
    assert sum(isinstance(m, AIMessage) for m in final["messages"][at + 1:]) == turns_after
