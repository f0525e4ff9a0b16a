"""The tools node: what the loop adds around LangGraph's ToolNode (refusals, answers in call
order, loop-owned keys, return_direct, the default error text)."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from langgraph_loop import Limits, StopReason, create_loop_agent
from langgraph_loop.nodes.tools import outcome_of, plan_calls, tool_error_text
from langgraph_loop.scripted import ScriptedChatModel

CALL = {"name": "f", "args": {}, "id": "c1"}


def test_plan_refuses_unknown_hidden_and_over_the_cap_in_order() -> None:
    calls = [{"name": n, "args": {}, "id": str(i)} for i, n in enumerate(["a", "zz", "b", "a"])]
    plans = plan_calls(calls, known={"a", "b"}, offered={"a"}, allowance=1)
    assert [p[0] for p in plans] == ["run", "refuse", "refuse", "refuse"]
    assert "unknown tool 'zz'" in str(plans[1][1]) and "not available" in str(plans[2][1])
    assert "limit" in str(plans[3][1])


def test_a_command_answering_another_call_leaves_this_call_an_error_and_no_orphan() -> None:
    wrong = Command(update={"messages": [ToolMessage("x", tool_call_id="other")], "notes": ["n"]})
    out = outcome_of(CALL, [wrong], 0.1)
    assert out.message.status == "error" and out.message.tool_call_id == "c1"
    assert out.extra == [] and out.updates == [{"notes": ["n"]}]


def test_loop_owned_keys_in_a_tools_command_are_dropped() -> None:
    command = Command(update={"messages": [ToolMessage("ok", tool_call_id="c1")],
                              "usage": {"total_tokens": 0}, "stop_reason": None, "todos": []})
    out = outcome_of(CALL, [command], 0.0)
    assert out.message.content == "ok" and out.updates == [{"todos": []}]


def test_parent_commands_pass_through_untouched() -> None:
    handoff = Command(graph=Command.PARENT, goto="billing",
                      update={"messages": [ToolMessage("moved", tool_call_id="c1")]})
    assert outcome_of(CALL, [handoff], 0.0).commands == [handoff]


def test_default_error_text_names_the_exception() -> None:
    assert tool_error_text(RuntimeError("kaput")) == "Error: the tool raised RuntimeError: kaput"


@tool(return_direct=True)
def answer(q: str) -> str:
    """The answer itself."""
    return f"the answer to {q}"


@tool
def note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Write a note and try to reset the run's usage."""
    return Command(update={"messages": [ToolMessage(f"noted {text}", tool_call_id=tool_call_id)],
                           "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})


def test_return_direct_ends_the_run_on_the_tool_result_as_completed() -> None:
    model = ScriptedChatModel(script=[[("answer", {"q": "x"})], "never asked"])
    result = create_loop_agent(model, [answer]).invoke({"messages": [HumanMessage("x?")]})
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["messages"][-1].content == "the answer to x" and len(model.requests) == 1
    assert result["iterations"][-1]["tool_calls"][0]["name"] == "answer"


def test_a_tool_cannot_reset_the_usage_the_budget_counts() -> None:
    model = ScriptedChatModel(default=lambda _m: [("note", {"text": "a"})])
    result = create_loop_agent(model, [note], limits=Limits(token_budget=400)).invoke(
        {"messages": [HumanMessage("note things")]})
    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    billed = sum(m.usage_metadata["total_tokens"] for m in result["messages"]
                 if m.type == "ai" and m.usage_metadata)
    assert result["usage"]["total_tokens"] == billed > 0


@tool
def shout(n: int) -> str:
    """Say ``x`` n times."""
    return "x" * n


def test_each_answer_is_capped_and_timed_in_wrap_tool_call_and_keeps_no_stamp() -> None:
    """The per-run cap reaches ``wrap_tool_call``, in every way calls run (one inline, several
    in threads, several as saved tasks), and the duration stamp leaves no trace in the thread."""
    from langgraph.checkpoint.memory import InMemorySaver

    for calls, saver in [(1, None), (3, None), (3, InMemorySaver())]:
        model = ScriptedChatModel(script=[[("shout", {"n": 500})] * calls, "done"])
        agent = create_loop_agent(model, [shout], checkpointer=saver)
        result = agent.invoke({"messages": [HumanMessage("go")]},
                              {"configurable": {"thread_id": "t"}},
                              context={"limits": {"max_tool_output_chars": 100}})
        answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        assert [m.content[:100] for m in answers] == ["x" * 100] * calls
        assert all("500" in m.content[100:] and m.response_metadata == {} for m in answers)
        assert all(r["duration_s"] > 0 for r in result["iterations"][0]["tool_calls"])
