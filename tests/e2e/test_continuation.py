"""Continuation end to end: predicate, the continuation callback, progress, fresh context,
todos, runs on a thread (``response_format``: ``tests/nodes/test_respond.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import (
    Iterations,
    StopReason,
    create_loop_agent,
    set_mode,
    todos_remaining,
    todos_remaining_message,
    write_todos,
)
from langgraph_loop.core.messages import CONTINUE_NAME
from langgraph_loop.core.prompts import CONTINUE as DEFAULT_CONTINUE
from langgraph_loop.scripted import ScriptedChatModel


def _agent(scripted: list, script: list, tools: Any = (), **kw: Any):
    model = ScriptedChatModel(script=script)
    scripted.append(model)
    return create_loop_agent(model, tools, **kw), model


async def _run(agent: Any, inp: dict, mode: str, config: Any = None) -> dict:
    return agent.invoke(inp, config) if mode == "sync" else await agent.ainvoke(inp, config)


# --- predicate --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_predicate_until_done_sync_and_async_callbacks(scripted: list, mode: str) -> None:
    seen: list[int] = []

    async def async_pred(state: dict) -> bool:
        seen.append(state["iteration"])
        return "DONE" not in state["messages"][-1].content

    def sync_pred(state: dict) -> bool:
        seen.append(state["iteration"])
        return "DONE" not in state["messages"][-1].content

    pred = async_pred if mode == "async" else sync_pred
    agent, model = _agent(scripted, ["step 1", "step 2", "DONE"],
                          iterations=Iterations(should_continue=pred, inject_progress=False))
    out = await _run(agent, {"messages": [HumanMessage("go")]}, mode)
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 3
    assert seen == [1, 2, 3]
    assert [m.type for m in model.requests[2]] == ["human", "ai", "human", "ai", "human"]
    assert [m.content for m in model.requests[2] if m.type == "human"] == [
        "go", DEFAULT_CONTINUE, DEFAULT_CONTINUE]
    assert all(m.name == CONTINUE_NAME for m in model.requests[2][2::2])
    assert [m.name for m in out["messages"] if m.type == "human"] == [None, CONTINUE_NAME,
                                                                      CONTINUE_NAME]


def test_cap_short_circuits_the_predicate(scripted: list) -> None:
    calls: list[int] = []

    def always(state: dict) -> bool:
        calls.append(state["iteration"])
        return True

    agent, model = _agent(scripted, ["a", "b"], iterations=Iterations(should_continue=always, max=2))
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS and out["iteration"] == 2
    assert calls == [1] and model.calls == 2


def test_predicate_feedback_reaches_the_next_pass(scripted: list) -> None:
    agent, model = _agent(scripted, ["draft", "final"], iterations=Iterations(
        should_continue=lambda s: (s["iteration"] < 2, "add a title")))
    out = agent.invoke({"messages": [HumanMessage("write")]})
    assert out["stop_reason"] == StopReason.COMPLETED
    assert model.requests[1][-1].content == (
        "Progress so far:\n1. draft\n\nFeedback on your last answer: add a title\n\n"
        + DEFAULT_CONTINUE)


def test_max_iterations_validation() -> None:
    with pytest.raises(ValueError, match="max"):
        Iterations(max=0)
    with pytest.raises(ValueError, match="iterations: max: Input should be greater than or equal to 1"):
        create_loop_agent(ScriptedChatModel(), iterations={"max": 0})
    with pytest.raises(ValueError, match="iterations: max: Input should be a valid integer"):
        create_loop_agent(ScriptedChatModel(), iterations={"max": True})


# --- the continuation, progress ------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_continuation_and_record_feedback(scripted: list, mode: str) -> None:
    async def nxt(state: dict, feedback: str | None) -> str:
        return f"Now part {state['iteration'] + 1} ({feedback})"

    def rec(state: dict, feedback: str | None) -> str:
        return f"pass {state['iteration']}: {state['messages'][-1].content}"

    agent, model = _agent(scripted, ["p1", "p2"], iterations=Iterations(
        max=2, should_continue=lambda s: (True, "more"), continuation=nxt, record_feedback=rec))
    out = await _run(agent, {"messages": [HumanMessage("go")]}, mode)
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS
    assert out["progress"] == ["pass 1: p1", "pass 2: p2"]  # also on the stopping pass
    assert [r["feedback"] for r in out["iterations"]] == ["pass 1: p1", "pass 2: p2"]
    assert model.requests[1][-1].content == "Progress so far:\n1. pass 1: p1\n\nNow part 2 (more)"
    assert model.requests[1][-1].name == CONTINUE_NAME


def test_default_progress_entry_is_the_shortened_answer(scripted: list) -> None:
    long = "word " * 200
    agent, _ = _agent(scripted, [long, "ok"],
                      iterations=Iterations(should_continue=lambda s: s["iteration"] < 2))
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert out["progress"][1] == "ok"
    assert len(out["progress"][0]) == 300 and out["progress"][0].endswith("…")


def test_continuation_none_resends_the_previous_input(scripted: list) -> None:
    content = [{"type": "text", "text": "Describe"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    agent, model = _agent(scripted, ["a", "b", "c"], iterations=Iterations(
        max=3, should_continue=lambda s: True, continuation=lambda s, f: None))
    agent.invoke({"messages": [HumanMessage(content)]})  # type: ignore[arg-type]
    assert model.requests[1][-1].content == content and model.requests[1][-1].name == CONTINUE_NAME
    assert model.requests[2][-1].content == content


def test_inject_progress_off(scripted: list) -> None:
    agent, model = _agent(scripted, ["a", "b"], iterations=Iterations(
        max=2, should_continue=lambda s: True, inject_progress=False))
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert model.requests[1][-1].content == DEFAULT_CONTINUE
    assert out["progress"] == ["a", "b"]


# --- fresh context, a continuation that ignores the feedback -------------------------

def _echo(x: str) -> str:
    """Echo x."""
    return f"echo {x}"


def test_fresh_context_exact_requests(scripted: list) -> None:
    agent, model = _agent(scripted, ["one", [("_echo", {"x": "y"})], "two", "three"], [_echo],
                          system_prompt="SYS", iterations=Iterations(
                              fresh_context=True, max=3, should_continue=lambda s: True))
    out = agent.invoke({"messages": [HumanMessage("task", id="req")]})
    assert out["stop_reason"] == StopReason.MAX_ITERATIONS
    second, third, fourth = model.requests[1], model.requests[2], model.requests[3]
    assert [m.type for m in second] == ["system", "human", "human", "human"]
    assert second[1].id == "req"
    assert (second[2].name, second[2].content) == ("loop_progress", "Progress so far:\n1. one")
    assert (second[3].name, second[3].content) == (CONTINUE_NAME, DEFAULT_CONTINUE)
    assert [m.type for m in third] == ["system", "human", "human", "human", "ai", "tool"]
    assert [m.type for m in fourth] == ["system", "human", "human", "human"]
    assert fourth[2].content == "Progress so far:\n1. one\n2. two"
    # state keeps the full transcript
    assert [m.type for m in out["messages"]] == [
        "human", "ai", "human", "ai", "tool", "ai", "human", "ai"]


def test_a_continuation_builds_each_later_pass(scripted: list) -> None:
    def prompt(state: dict, feedback: str | None) -> str:
        todo = next(t["content"] for t in state["todos"] if t["status"] != "completed")
        return f"Next item: {todo}"

    agent, model = _agent(scripted, [[("write_todos", {"todos": [
        {"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]})],
        "did a", [("write_todos", {"todos": [{"content": "a", "status": "completed"},
                                            {"content": "b", "status": "completed"}]})],
        "did b"], [write_todos], iterations=Iterations(
            fresh_context=True, continuation=prompt, should_continue=todos_remaining(),
            inject_progress=False))
    out = agent.invoke({"messages": [HumanMessage("Do the list.", id="req")]})
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 2
    third = model.requests[2]
    assert [(m.type, m.content) for m in third] == [("human", "Do the list."),
                                                   ("human", "Next item: b")]
    assert out["todos"][-1] == {"content": "b", "status": "completed"}


# --- todos -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_todo_loop(scripted: list, mode: str) -> None:
    plan = [{"content": "research", "status": "in_progress"},
            {"content": "write", "status": "pending"}]
    agent, model = _agent(scripted, [
        [("write_todos", {"todos": plan})], "Planned; researching.",
        [("write_todos", {"todos": [{"content": "research", "status": "completed"},
                                    {"content": "write", "status": "in_progress"}]})],
        "Research done.",
        [("write_todos", {"todos": [{"content": "research", "status": "completed"},
                                    {"content": "write", "status": "completed"}]})],
        "All written."], [write_todos], iterations=Iterations(
            should_continue=todos_remaining(), continuation=todos_remaining_message,
            inject_progress=False))
    out = await _run(agent, {"messages": [HumanMessage("Report")]}, mode)
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 3
    assert out["todos"] == [{"content": "research", "status": "completed"},
                            {"content": "write", "status": "completed"}]
    assert model.requests[2][-1].content == (
        "You still have 2 open todo item(s) that must be addressed before you can finish:\n"
        "- [in_progress] research\n- [pending] write\nKeep working on them, mark each one "
        "completed with write_todos as soon as it is done, and stop only when all are completed.")
    assert model.requests[4][-1].content.startswith("You still have 1 open todo item(s)")
    assert model.request_tools[0] == ["write_todos"]


def test_write_todos_rejects_a_bad_status(scripted: list) -> None:
    agent, _model = _agent(scripted, [
        [("write_todos", {"todos": [{"content": "a", "status": "done"}]})], "ok"], [write_todos])
    out = agent.invoke({"messages": [HumanMessage("go")], "todos": [
        {"content": "x", "status": "pending"}]})
    tool_msg = out["messages"][2]
    assert tool_msg.status == "error"
    assert tool_msg.content == ("Error: write_todos was not applied: todos.0.status: 'done' is not "
                                "a valid status; use one of pending, in_progress, completed.")
    assert out["todos"] == [{"content": "x", "status": "pending"}]


def test_todos_remaining_modes() -> None:
    pending = [{"content": "a", "status": "pending"}]
    pred = todos_remaining(modes=["Execute", " review "])
    assert pred({"mode": "EXECUTE", "todos": pending}) is True
    assert pred({"mode": "review", "todos": pending}) is True
    assert pred({"mode": "plan", "todos": pending}) is False
    assert pred({"todos": pending}) is False
    assert pred({"mode": "execute", "todos": [{"content": "a", "status": "completed"}]}) is False
    assert todos_remaining()({"todos": []}) is False
    assert todos_remaining()({"todos": pending}) is True
    for bad in ([], "execute", [""]):
        with pytest.raises(ValueError, match="modes"):
            todos_remaining(modes=bad)  # type: ignore[arg-type]


def test_todos_remaining_message_without_open_items_is_the_default() -> None:
    assert todos_remaining_message({"todos": []}, None) == DEFAULT_CONTINUE
    assert todos_remaining_message({"todos": [{"content": "a", "status": "pending"}]}, "fb").startswith(
        "Feedback on your last answer: fb\n\nYou still have 1 open")


def test_mode_from_input_and_set_mode_tool(scripted: list) -> None:
    agent, _model = _agent(scripted, [
        [("write_todos", {"todos": [{"content": "a", "status": "pending"}]})], "planned",
        [("set_mode", {"mode": "execute"})], "executing",
        [("write_todos", {"todos": [{"content": "a", "status": "completed"}]})], "done"],
        [write_todos, set_mode],
        iterations=Iterations(should_continue=todos_remaining(modes=["plan", "execute"])))
    out = agent.invoke({"messages": [HumanMessage("go")], "mode": "plan"})
    assert out["stop_reason"] == StopReason.COMPLETED and out["iteration"] == 3
    assert out["mode"] == "execute"
    # in a mode that does not loop, a pending todo does not keep the run going
    agent2, _ = _agent(scripted, ["hi"], [write_todos],
                       iterations=Iterations(should_continue=todos_remaining(["execute"])))
    out2 = agent2.invoke({"messages": [HumanMessage("go")], "mode": "plan",
                          "todos": [{"content": "a", "status": "pending"}]})
    assert out2["stop_reason"] == StopReason.COMPLETED and out2["iteration"] == 1


# --- runs on a thread ---------------------------------------------------------------------

def test_second_run_on_a_thread_starts_fresh(scripted: list) -> None:
    agent, model = _agent(scripted, ["r1 p1", "r1 p2", "r2 p1", "r2 p2"], iterations=Iterations(
        fresh_context=True, max=2, should_continue=lambda s: True), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("first task", id="q1")]}, config)
    out = agent.invoke({"messages": [HumanMessage("second task", id="q2")]}, config)
    assert out["iteration"] == 2 and [r["iteration"] for r in out["iterations"]] == [1, 2]
    assert out["progress"] == ["r2 p1", "r2 p2"]
    # run 2, pass 1 sees the thread; pass 2 is fresh from run 2's request
    assert [m.content for m in model.requests[2]][-1] == "second task"
    assert len(model.requests[2]) == 5
    assert [m.content for m in model.requests[3]] == [
        "second task", "Progress so far:\n1. r2 p1", DEFAULT_CONTINUE]
    assert len(out["messages"]) == 8


# --- demo scenarios ----------------------------------------------------------------------

def test_demo_scenarios_run_offline() -> None:
    import io

    from rich.console import Console

    from langgraph_loop.app.demos import all_scenarios

    scenarios = {s.key: s for s in all_scenarios()}
    console = Console(file=io.StringIO(), width=120)
    judge = scenarios["judge"].run(console, InMemorySaver())
    todos = scenarios["todos"].run(console, InMemorySaver())
    assert (judge["stop_reason"], judge["iteration"]) == (StopReason.COMPLETED, 2)
    assert (todos["stop_reason"], todos["iteration"]) == (StopReason.COMPLETED, 3)
    assert all(t["status"] == "completed" for t in todos["todos"])
