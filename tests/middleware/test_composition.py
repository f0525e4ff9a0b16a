"""Our middleware beside LangChain's own in one ``create_agent`` (issues 39, 41 and 43): the loop
question under another ``after_model`` hook, a stop under ``ModelCallLimitMiddleware``, the
messages stream in the order the model saw it, ``create_loop_agent`` refusing our middleware, a
message typed at the loop question, the budget and the detector across
``SummarizationMiddleware``; each beside ``create_loop_agent`` or plain ``create_agent`` where
they define the behaviour."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, PIIMiddleware, SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.messages import is_notice
from langgraph_loop.engine.limits import count_tokens
from langgraph_loop.middleware import LoopDetectionMiddleware, TokenBudgetMiddleware
from langgraph_loop.scripted import ScriptedChatModel

RUNS: Counter[str] = Counter()


@tool
def status(job: str) -> str:
    """The status of a build job."""
    RUNS["status"] += 1
    return f"{job}: pending"


def polling(messages: list[BaseMessage]) -> Any:
    return [("status", {"job": "build"})]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    RUNS.clear()


def kinds(messages: list[BaseMessage]) -> list[str]:
    return ["notice" if is_notice(m) else m.type for m in messages]


# --- 43.1: the loop question under another after_model hook ----------------------------------

@pytest.mark.parametrize("answer", ["reject", "approve"])
def test_the_loop_question_is_asked_under_another_after_model_hook(
        scripted: list[ScriptedChatModel], tmp_path: Path, answer: str) -> None:
    model = ScriptedChatModel(default=polling, no_tools_reply="Still pending; I stopped.")
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "q.db")) as saver:
        agent = create_agent(model, [status], checkpointer=saver, middleware=[
            PIIMiddleware("email", strategy="redact", apply_to_output=True),
            LoopDetectionMiddleware(LoopDetection(ask_human=True))])
        config = {"configurable": {"thread_id": "q"}, "recursion_limit": 40}
        paused = agent.invoke({"messages": [HumanMessage("done?")]}, config)
        assert [i.value["action_requests"][0]["name"] for i in paused["__interrupt__"]] == [
            "Loop detected: status"]
        assert RUNS["status"] == 3 and len(model.requests) == 4  # the 4th call has not run
        done = agent.invoke(Command(resume={"decisions": [{"type": answer}]}), config)
    if answer == "reject":
        assert done["stop_reason"] == StopReason.LOOP_DETECTED and RUNS["status"] == 3
        assert done["messages"][-1].content == "Still pending; I stopped."
        assert kinds(done["messages"])[-4:] == ["ai", "tool", "notice", "ai"]
        assert model.request_tools[-1] == []
    else:  # the stopped call ran after all; the loop goes on until it repeats as often again
        assert RUNS["status"] == 4 + 2 and "__interrupt__" in done
    tool_answers = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    calls = [c["id"] for m in done["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert sorted(m.tool_call_id for m in tool_answers) == sorted(calls[:len(tool_answers)])


# --- issue 39: a stop never pushes another middleware's model-call limit over ------------------

def test_a_loop_stop_keeps_within_model_call_limit_middleware(scripted: list[ScriptedChatModel]) -> None:
    alone = ScriptedChatModel(default=polling, no_tools_reply="pending")
    ours = ScriptedChatModel(default=polling, no_tools_reply="pending")
    scripted += [alone, ours]
    create_agent(alone, [status], middleware=[ModelCallLimitMiddleware(run_limit=4)]).invoke(
        {"messages": [HumanMessage("done?")]})
    result = create_agent(ours, [status], middleware=[
        ModelCallLimitMiddleware(run_limit=4), LoopDetectionMiddleware()]).invoke(
        {"messages": [HumanMessage("done?")]})
    assert len(alone.requests) == len(ours.requests) == 4
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["messages"][-1].content.startswith("Model call limits exceeded")
    # with room for it, the final answer is the step after the stop: 5 calls under a limit of 5
    roomy = ScriptedChatModel(default=polling, no_tools_reply="Still pending.")
    scripted.append(roomy)
    done = create_agent(roomy, [status], middleware=[
        ModelCallLimitMiddleware(run_limit=5), LoopDetectionMiddleware()]).invoke(
        {"messages": [HumanMessage("done?")]})
    assert len(roomy.requests) == 5 and done["messages"][-1].content == "Still pending."


# --- 43.7: the messages stream in the order the model saw it ----------------------------------

def streamed(agent: Any) -> list[tuple[str, bool]]:
    """What ``stream_mode="messages"`` hands out, one entry per message: its kind and whether
    it came from the final-answer call (tagged ``final_answer``)."""
    out: list[tuple[str, bool, str]] = []
    for message, meta in agent.stream({"messages": [HumanMessage("done?")]}, stream_mode="messages"):
        kind = "notice" if is_notice(message) else "ai" if message.type.startswith("AI") else message.type
        if not out or out[-1][2] != message.id:
            out.append((kind, "final_answer" in (meta.get("tags") or []), str(message.id)))
    return [(kind, final) for kind, final, _ in out]


def test_the_stream_reads_in_order_under_create_agent_as_in_the_graph(
        scripted: list[ScriptedChatModel]) -> None:
    models = [ScriptedChatModel(default=polling, no_tools_reply="Still pending.") for _ in range(2)]
    scripted += models
    graph = streamed(create_loop_agent(models[0], [status]))
    middleware = streamed(create_agent(models[1], [status], middleware=[LoopDetectionMiddleware()]))
    assert middleware == graph
    assert graph[-5:] == [("notice", False), ("ai", False), ("tool", False), ("notice", False),
                          ("ai", True)]


# --- 43.8: our middleware in create_loop_agent ---------------------------------------------------

@pytest.mark.parametrize(("middleware", "instead"), [
    (LoopDetectionMiddleware(), "loop_detection=LoopDetection"),
    (TokenBudgetMiddleware(token_budget=1000), "limits=Limits(token_budget=")])
def test_create_loop_agent_refuses_our_middleware_naming_its_own_setting(
        middleware: Any, instead: str) -> None:
    with pytest.raises(ValueError, match=rf"{type(middleware).__name__} is for create_agent; "
                                         rf"create_loop_agent has it built in: pass {re.escape(instead)}"):
        create_loop_agent(ScriptedChatModel(script=["hi"]), [status], middleware=[middleware])


# --- issue 41: a message typed at the loop question is no new run for the budget ---------------

BUDGET = 2800
PAGE = "result text " * 60
"""A search result of about 180 tokens."""


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"{query}: {PAGE}"


def stuck_then_searching(messages: list[BaseMessage]) -> Any:
    """Polls the same status until a person types, then searches on, a new query each time."""
    typed = any(isinstance(m, HumanMessage) and m.content == "try the search instead" for m in messages)
    if not typed:
        return [("search", {"query": "status"})]
    return [("search", {"query": f"q{sum(isinstance(m, ToolMessage) for m in messages)}"})]


def spent(messages: list[BaseMessage]) -> int:
    return sum(m.usage_metadata["total_tokens"] for m in messages
               if isinstance(m, AIMessage) and m.usage_metadata)


@pytest.mark.parametrize("order", ["budget first", "loop first"])
def test_a_message_typed_at_the_loop_question_keeps_the_runs_budget(
        scripted: list[ScriptedChatModel], tmp_path: Path, order: str) -> None:
    model = ScriptedChatModel(default=stuck_then_searching, no_tools_reply="Here is what I have.")
    scripted.append(model)
    ours = [TokenBudgetMiddleware(token_budget=BUDGET),
            LoopDetectionMiddleware(LoopDetection(ask_human=True))]
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = create_agent(model, [search], checkpointer=saver,
                             middleware=ours if order == "budget first" else ours[::-1])
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
        paused = agent.invoke({"messages": [HumanMessage("find the status")]}, config)
        assert "__interrupt__" in paused
        before = spent(paused["messages"])
        done = agent.invoke({"messages": [HumanMessage("try the search instead")]}, config)
    # one run, one budget: what the run spent before the question counts, so the next search
    # (about 1,900 tokens with an answer after it) does not fit; the run ends on an answer
    assert done["stop_reason"] == StopReason.TOKEN_BUDGET
    assert done["stop_guard"]["limit"] == BUDGET and done["stop_guard"]["value"] == before > 1_000
    assert done["messages"][-1].content == "Here is what I have." and len(model.requests) == 5
    assert spent(done["messages"]) <= BUDGET


# --- 43.2 / issue 39: summarization hides neither spend nor a loop --------------------------------

@tool
def deploy(target: str) -> str:
    """Deploy to a target."""
    RUNS["deploy"] += 1
    return "Error: the deploy service is unavailable"


def summarizing() -> SummarizationMiddleware:
    """A summary every few messages, keeping only the newest round."""
    return SummarizationMiddleware(ScriptedChatModel(default="The agent has been working."),
                                   trigger=("messages", 6), keep=("messages", 3))


@pytest.mark.parametrize("door", ["create_agent", "create_loop_agent"])
def test_summarization_does_not_hide_spend_from_the_budget(
        scripted: list[ScriptedChatModel], door: str) -> None:
    model = ScriptedChatModel(default=lambda messages: [("search", {"query": f"q{len(messages)}"})],
                              no_tools_reply="Here is what I found.")
    scripted.append(model)
    if door == "create_agent":
        agent = create_agent(model, [search],
                             middleware=[summarizing(), TokenBudgetMiddleware(token_budget=4000)])
    else:
        agent = create_loop_agent(model, [search], middleware=[summarizing()],
                                  limits=Limits(token_budget=4000), loop_detection=None)
    result = agent.invoke({"messages": [HumanMessage("research")]}, {"recursion_limit": 200})
    assert result["stop_reason"] == StopReason.TOKEN_BUDGET
    # what was actually sent, read from the model's side: input and output of every call
    total = sum(count_tokens(model, r) for r in model.requests)
    assert total <= 4000


@pytest.mark.parametrize("door", ["create_agent", "create_loop_agent"])
def test_summarization_does_not_reset_the_loop_detector(scripted: list[ScriptedChatModel], door: str) -> None:
    model = ScriptedChatModel(default=lambda messages: [("deploy", {"target": "prod"})],
                              no_tools_reply="The deploy service is down; I stopped.")
    scripted.append(model)
    if door == "create_agent":
        agent = create_agent(model, [deploy], middleware=[summarizing(), LoopDetectionMiddleware()])
    else:
        agent = create_loop_agent(model, [deploy], middleware=[summarizing()])
    result = agent.invoke({"messages": [HumanMessage("deploy it")]}, {"recursion_limit": 200})
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert RUNS["deploy"] <= 5
