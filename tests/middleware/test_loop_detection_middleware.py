"""``LoopDetectionMiddleware`` in LangChain's ``create_agent``: the warn → block → stop ladder
as the model sees it, the stop record in the output state, the state from the thread (a
resume in a new agent object), no extra graph step, and the same decisions as the graph."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from langgraph_loop import LoopDetection, Repeat, StopReason, create_loop_agent
from langgraph_loop.core.messages import is_notice
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel

RUNS: Counter[str] = Counter()


@tool
def status(job: str) -> str:
    """The status of a build job."""
    RUNS["status"] += 1
    return f"{job}: pending"


@tool
def note(text: str) -> str:
    """Write a note (a different result every time)."""
    RUNS["note"] += 1
    return f"noted {text} #{RUNS['note']}"


def polling(messages: list[BaseMessage]) -> Any:
    """A model that asks for the same status forever (and answers when told to stop)."""
    return [("status", {"job": "build"})]


def shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    """A request as (type, text) pairs; tool calls as their names and arguments; a note's
    running number left out (it counts across agents)."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            out.append(("ai", repr([(c["name"], c["args"]) for c in m.tool_calls])))
        else:
            text = re.sub(r" #\d+$", "", str(m.content)) if isinstance(m, ToolMessage) else str(m.content)
            out.append((m.type if not is_notice(m) else "notice", text))
    return out


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    RUNS.clear()


def _middleware_agent(model: ScriptedChatModel, config: LoopDetection | None = None,
                      **kwargs: Any) -> Any:
    return create_agent(model, [status, note], middleware=[LoopDetectionMiddleware(config)],
                        **kwargs)


def test_a_repeated_call_is_warned_then_stopped_with_a_final_answer(
        scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=polling, no_tools_reply="The build is still pending.")
    scripted.append(model)
    result = _middleware_agent(model).invoke({"messages": [HumanMessage("is the build done?")]})

    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    guard = result["stop_guard"]
    assert guard["layer"] == "no_progress" and guard["calls"] == ['status({"job":"build"})']
    assert guard["began"]["message_id"] == result["messages"][1].id  # the first status call
    # three calls ran; the fourth was answered with the stop, then one tools-free answer
    assert RUNS["status"] == 3
    assert model.request_tools[-1] == [] and model.request_tools[0] == ["status", "note"]
    assert len(model.requests) == 5
    # the warning reached the model once, right after the third result, before the 4th call
    fourth = shape(model.requests[3])
    assert [t for t, _ in fourth] == ["human", "ai", "tool", "ai", "tool", "ai", "tool", "notice"]
    assert "returned the same result twice in a row before you asked for it again" in fourth[-1][1]
    # the thread: the notice kept where the model saw it, the stop answers, the final answer
    kinds = [("notice" if is_notice(m) else m.type) for m in result["messages"]]
    assert kinds == ["human", "ai", "tool", "ai", "tool", "ai", "tool", "notice", "ai", "tool",
                     "notice", "ai"]
    stopped = result["messages"][9]
    assert isinstance(stopped, ToolMessage) and stopped.status == "error"
    assert result["messages"][-1].content == "The build is still pending."
    assert result["messages"][-1].tool_calls == []


async def test_the_async_agent_decides_the_same(scripted: list[ScriptedChatModel]) -> None:
    sync_model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    async_model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    scripted += [sync_model, async_model]
    expected = _middleware_agent(sync_model).invoke({"messages": [HumanMessage("done?")]})
    got = await _middleware_agent(async_model).ainvoke({"messages": [HumanMessage("done?")]})
    assert [shape(r) for r in async_model.requests] == [shape(r) for r in sync_model.requests]
    assert got["stop_reason"] == expected["stop_reason"] == StopReason.LOOP_DETECTED


def test_an_interleaved_repeat_is_blocked_and_not_run(scripted: list[ScriptedChatModel]) -> None:
    # status, note, status, note, ...: the same status result each time, other work between
    turns = iter([[("status", {"job": "build"})], [("note", {"text": "a"})]] * 10)
    model = ScriptedChatModel(default=lambda messages: next(turns, "giving up"),
                              no_tools_reply="pending")
    scripted.append(model)
    result = _middleware_agent(model).invoke({"messages": [HumanMessage("watch the build")]})
    blocked = [m for m in result["messages"] if isinstance(m, ToolMessage)
               and m.status == "error" and "not run" in str(m.content)]
    assert blocked, "the third identical status result should block the next status call"
    assert str(blocked[0].content).startswith("Error: not run: status")
    # a blocked call is answered right after its reply, and never reaches the tool
    index = result["messages"].index(blocked[0])
    assert isinstance(result["messages"][index - 1], AIMessage)
    # the note's own result moved since each refusal (something changed): the status runs again
    # once, and is refused again after its next identical result (issue 37)
    assert RUNS["status"] == 6 and len(blocked) == 4
    assert "stop_reason" not in result and result["messages"][-1].content == "giving up"


def test_a_clean_run_costs_no_extra_graph_step(scripted: list[ScriptedChatModel]) -> None:
    def work(messages: list[BaseMessage]) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return [("note", {"text": f"step {done}"})] if done < 5 else "done"

    plain_model, loop_model = ScriptedChatModel(default=work), ScriptedChatModel(default=work)
    scripted += [plain_model, loop_model]
    steps = []
    for agent in (create_agent(plain_model, [note]),
                  create_agent(loop_model, [note], middleware=[LoopDetectionMiddleware()])):
        RUNS.clear()  # the same tool results in both runs
        chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode="updates"))
        steps.append([next(iter(c)) for c in chunks])
    assert steps[0] == steps[1] == ["model", "tools"] * 5 + ["model"]
    assert [shape(r) for r in loop_model.requests] == [shape(r) for r in plain_model.requests]


def test_a_new_run_on_the_thread_clears_the_stop(scripted: list[ScriptedChatModel],
                                                 tmp_path: Path) -> None:
    answers = iter(["All done."])
    model = ScriptedChatModel(default=lambda m: next(answers) if "thanks" in str(m[-1].content)
                              else [("status", {"job": "build"})], no_tools_reply="pending")
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        agent = _middleware_agent(model, checkpointer=saver)
        config = {"configurable": {"thread_id": "t1"}}
        assert agent.invoke({"messages": [HumanMessage("done?")]}, config)["stop_reason"] == "loop_detected"
        again = agent.invoke({"messages": [HumanMessage("thanks")]}, config)
    assert again["stop_reason"] is None and again["stop_guard"] is None
    assert again["messages"][-1].content == "All done."


def _paused_run(model: ScriptedChatModel, saver: Any) -> Any:
    """An agent whose every ``note`` call waits for a human (HumanInTheLoopMiddleware)."""
    return create_agent(model, [status, note], checkpointer=saver, middleware=[
        LoopDetectionMiddleware(), HumanInTheLoopMiddleware(interrupt_on={"note": True})])


def _alternating(messages: list[BaseMessage]) -> Any:
    """status, status, note (paused for approval), status, status, ..."""
    calls = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in messages)
    return [("note", {"text": "checked"})] if calls == 2 else [("status", {"job": "build"})]


def test_a_run_resumed_by_a_new_agent_stops_after_the_same_calls(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    straight = ScriptedChatModel(default=_alternating, no_tools_reply="pending")
    first, second = (ScriptedChatModel(default=_alternating, no_tools_reply="pending")
                     for _ in range(2))
    scripted += [straight, first, second]
    with SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        paused = _paused_run(first, saver).invoke({"messages": [HumanMessage("done?")]}, config)
        assert "__interrupt__" in paused
        # another process: a new agent object, a new middleware, the same thread
        resumed = _paused_run(second, saver).invoke(
            Command(resume={"decisions": [{"type": "approve"}]}), config)
        config2 = {"configurable": {"thread_id": uuid.uuid4().hex}}
        agent = _paused_run(straight, saver)
        agent.invoke({"messages": [HumanMessage("done?")]}, config2)
        whole = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config2)
    assert resumed["stop_reason"] == whole["stop_reason"] == StopReason.LOOP_DETECTED
    assert len(first.requests) + len(second.requests) == len(straight.requests)
    assert [shape(r) for r in second.requests] == [shape(r) for r in straight.requests[3:]]
    assert resumed["stop_guard"]["count"] == whole["stop_guard"]["count"]


def test_the_detector_state_it_keeps_reads_back_from_the_checkpoint_as_written(
        scripted: list[ScriptedChatModel], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The state the middleware keeps for a summarized thread (``loop_detector``) is plain
    values: LangGraph's serializer reads it back as written, with no unregistered type (it
    came back as a dict, so a repeated result no longer matched the one before it)."""
    model = ScriptedChatModel(default=_alternating, no_tools_reply="pending")
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "d.db")) as saver:
        config = {"configurable": {"thread_id": "d1"}}
        paused = _paused_run(model, saver).invoke({"messages": [HumanMessage("done?")]}, config)
        assert "__interrupt__" in paused
        with caplog.at_level("WARNING"):
            kept = _paused_run(model, saver).get_state(config).values["loop_detector"]
    records = kept["state"]["calls"].values()
    assert sorted(r.get("result") for r in records if r["tool"] == "status") == ["build: pending"]
    assert not [r for r in caplog.records if "langgraph_loop" in r.getMessage()]


async def test_a_queued_warning_survives_a_pause_and_an_async_resume(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    # the third status reply is warned about, and its note waits for a person
    def script(messages: list[BaseMessage]) -> Any:
        calls = sum(isinstance(m, AIMessage) and bool(m.tool_calls) for m in messages)
        if calls == 2:
            return [("status", {"job": "build"}), ("note", {"text": "checking"})]
        return "stopping here" if calls > 2 else [("status", {"job": "build"})]

    first, second = ScriptedChatModel(default=script), ScriptedChatModel(default=script)
    scripted += [first, second]
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "w.db")) as saver:
        config = {"configurable": {"thread_id": "w"}}
        await _paused_run(first, saver).ainvoke({"messages": [HumanMessage("done?")]}, config)
        result = await _paused_run(second, saver).ainvoke(
            Command(resume={"decisions": [{"type": "approve"}]}), config)
    notices = [m for m in result["messages"] if is_notice(m)]
    assert len(notices) == 1 and "status" in str(notices[0].content)
    # delivered once, after the note's result, to the first model call after the resume
    assert is_notice(second.requests[0][-1])
    assert result.get("stop_reason") is None


def test_a_reply_whose_text_loops_gets_a_notice(scripted: list[ScriptedChatModel]) -> None:
    chant = "I will check the status again now. " * 20
    replies = iter([AIMessage(chant, tool_calls=[{"name": "status", "args": {"job": "x"},
                                                  "id": "c1"}]), "ok, it is pending."])
    model = ScriptedChatModel(default=lambda m: next(replies))
    scripted.append(model)
    _middleware_agent(model).invoke({"messages": [HumanMessage("status?")]})
    assert is_notice(model.requests[1][-1])
    assert "repeats the same text" in str(model.requests[1][-1].content)


def _same_decisions(script: Any, config: LoopDetection) -> tuple[Any, Any, ScriptedChatModel,
                                                                     ScriptedChatModel]:
    graph_model = ScriptedChatModel(default=script(), no_tools_reply="pending")
    agent_model = ScriptedChatModel(default=script(), no_tools_reply="pending")
    graph = create_loop_agent(graph_model, [status, note], loop_detection=config)
    agent = _middleware_agent(agent_model, config)
    request = {"messages": [HumanMessage("watch the build")]}
    return graph.invoke(request), agent.invoke(request), graph_model, agent_model


@pytest.mark.parametrize("config", [LoopDetection(), LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)),
                                    LoopDetection(layers=("repeat", "cycle"))])
def test_the_middleware_decides_as_the_graph(scripted: list[ScriptedChatModel],
                                             config: LoopDetection) -> None:
    def script() -> Any:
        turns = iter([[("status", {"job": "build"})], [("note", {"text": "a"})],
                      [("status", {"job": "build"})], [("status", {"job": "test"})]] * 8)
        return lambda messages: next(turns, "done")

    graph_out, agent_out, graph_model, agent_model = _same_decisions(script, config)
    scripted += [graph_model, agent_model]
    assert [shape(r) for r in agent_model.requests] == [shape(r) for r in graph_model.requests]
    assert agent_out["stop_reason"] == graph_out["stop_reason"]
    # one stop record at both doors: the same keys, the same values (but where each thread's
    # loop began: its own message and checkpoint ids)
    graph_guard, agent_guard = graph_out["stop_guard"], agent_out["stop_guard"]
    assert graph_guard == graph_out["iterations"][-1]["guard"]
    assert set(agent_guard) == set(graph_guard)
    local = {"checkpoint_id", "began"}
    assert {k: v for k, v in agent_guard.items() if k not in local} == {
        k: v for k, v in graph_guard.items() if k not in local}
    assert agent_guard["began"]["response"] == graph_guard["began"]["response"]


def test_a_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a LoopDetection"):
        LoopDetectionMiddleware("strict")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stop_after"):
        LoopDetectionMiddleware({"warn_after": 5, "stop_after": 3})


def _asking(model: ScriptedChatModel, saver: Any) -> Any:
    return create_agent(model, [status, note], checkpointer=saver, middleware=[
        LoopDetectionMiddleware(LoopDetection(ask_human=True))])


def test_ask_human_pauses_before_the_calls_run_and_a_stop_ends_with_an_answer(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    model = ScriptedChatModel(default=polling, no_tools_reply="Still pending; I stopped.")
    scripted.append(model)
    with SqliteSaver.from_conn_string(str(tmp_path / "h.db")) as saver:
        config = {"configurable": {"thread_id": "h"}}
        paused = _asking(model, saver).invoke({"messages": [HumanMessage("done?")]}, config)
        (asked,) = paused["__interrupt__"]
        (action,) = asked.value["action_requests"]
        assert action["name"] == "Loop detected: status" and action["args"] == {"hint": ""}
        assert 'status({"job":"build"}) 3 times' in action["description"]
        assert "Last result: build: pending" in action["description"]
        assert asked.value["review_configs"] == [{"action_name": "Loop detected: status",
                                                  "allowed_decisions": ["approve", "edit", "reject"]}]
        assert RUNS["status"] == 3 and len(model.requests) == 4  # the 4th call has not run
        # resumed by a new agent object: the model is not asked again for the stopped reply
        done = _asking(model, saver).invoke(Command(resume={"decisions": [
            {"type": "reject", "message": "It will not finish today."}]}), config)
    assert done["stop_reason"] == StopReason.LOOP_DETECTED
    assert done["stop_guard"]["human"] == {"action": "stop", "message": "It will not finish today."}
    stop_notice = model.requests[-1][-1]
    assert stop_notice.content.endswith("They said: It will not finish today.")
    assert "a person supervising this run chose to stop it" in done["messages"][-3].content
    assert RUNS["status"] == 3 and len(model.requests) == 5 and model.request_tools[-1] == []
    assert done["messages"][-1].content == "Still pending; I stopped."
    kinds = [("notice" if is_notice(m) else m.type) for m in done["messages"]]
    assert kinds[-5:] == ["notice", "ai", "tool", "notice", "ai"]


async def test_ask_human_continue_runs_the_calls_and_a_hint_reaches_the_model(
        scripted: list[ScriptedChatModel], tmp_path: Path) -> None:
    model = ScriptedChatModel(default=polling, no_tools_reply="pending")
    scripted.append(model)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        config = {"configurable": {"thread_id": "c"}}
        agent = _asking(model, saver)
        await agent.ainvoke({"messages": [HumanMessage("done?")]}, config)
        again = await agent.ainvoke(Command(resume={"decisions": [{"type": "edit", "edited_action": {
            "name": "Loop detected: status", "args": {"hint": "Check the logs."}}}]}), config)
        # the stopped call ran after all; the loop was let go on until it repeated as often
        # again, then the person is asked once more
        assert RUNS["status"] == 4 + 2
        assert "__interrupt__" in again
        hinted = [r for r in model.requests if is_notice(r[-1]) and "Check the logs." in str(r[-1].content)]
        assert len(hinted) == 1
        with pytest.raises(ValueError, match=r"0\.3's answer shapes were removed"):  # 0.3's answer
            await agent.ainvoke(Command(resume="stop"), config)
        assert (await agent.aget_state(config)).interrupts  # still paused at the question
        done = await agent.ainvoke(Command(resume={"decisions": [{"type": "reject"}]}), config)
    assert done["stop_reason"] == StopReason.LOOP_DETECTED


def test_a_tool_s_own_loop_key_is_read_as_the_graph_reads_it(scripted: list[ScriptedChatModel]) -> None:
    """A tool declaring ``metadata={"loop_key": ["job"]}`` is judged by its job alone: calls that
    differ only in a nonce are the same call (the no-progress layer stops them); without the key
    they are different calls, one per nonce, and run (the opt-in drift layer would stop them as
    near-repeats a result later)."""
    from langchain_core.tools import StructuredTool

    def poll(job: str, nonce: int) -> str:
        return f"{job}: pending"

    keyed = StructuredTool.from_function(poll, name="poll", description="Poll a job.",
                                         metadata={"loop_key": ["job"]})
    plain = StructuredTool.from_function(poll, name="poll", description="Poll a job.")
    outcomes = []
    for tool_ in (keyed, plain):
        nonces = iter(range(1000))
        model = ScriptedChatModel(default=lambda m, n=nonces: [("poll", {"job": "b", "nonce": next(n)})]
                                  if sum(isinstance(x, ToolMessage) for x in m) < 8 else "gave up",
                                  no_tools_reply="pending")
        scripted.append(model)
        agent = create_agent(model, [tool_], middleware=[LoopDetectionMiddleware()])
        result = agent.invoke({"messages": [HumanMessage("poll")]})
        guard = result.get("stop_guard") or {}
        outcomes.append((guard.get("layer"), guard.get("count"),
                         sum(isinstance(m, ToolMessage) and m.status == "success"
                             for m in result["messages"])))
    assert outcomes == [("no_progress", 3, 3), (None, None, 8)]
