"""The loop detector's ladder through the compiled graph: a block answers the repeated call
(the tool never runs, the run goes on, a resume sees it), asking again stops; a human decides
instead of a stop (continue, stop, hint); the checkpoint from just before the loop began, and
forking there; consecutive tool errors; text loops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph_loop import Approval, Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.messages import check_pairing, is_blocked
from langgraph_loop.scripted import ScriptedChatModel

TEST = ("bash", {"command": "python test.py"})


def tools() -> tuple[list[BaseTool], list[str]]:
    """``bash`` (the test always fails alike; anything else is new output) and ``edit``."""
    ran: list[str] = []

    @tool
    def bash(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "1 failed in 0.31s" if command == "python test.py" else f"ran {len(ran)}"

    @tool
    def edit(line: int) -> str:
        """Edit the source."""
        ran.append(f"edit {line}")
        return f"edited line {line}"

    return [bash, edit], ran


LOOK = ("bash", {"command": "cat parse.py"})


def edit_and_rerun(n: int) -> list[Any]:
    """The test, then an edit it never sees and a look at the source that shows the edit (its
    result moves: something changed, so the 4th identical test run is blocked, not stopped),
    ``n`` times."""
    script: list[Any] = []
    for i in range(n):
        script += [[TEST], [("edit", {"line": i})], [LOOK]]
    return script


def cfg(thread: str, checkpoint: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def ask(text: str = "fix the bug") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def blocked(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and is_blocked(m)]


# --- the ladder ---------------------------------------------------------------------------


def test_warn_then_block_then_stop_when_asked_again(scripted: list[ScriptedChatModel]) -> None:
    """The 4th identical test run, after new edits, is refused and the run goes on; after the
    next new edit it runs again (the model did what the refusal asked); asked for again at once,
    with nothing done since, the run stops (issue 37)."""
    script = [*edit_and_rerun(3), [TEST], [("edit", {"line": 3})], [LOOK], [TEST], [TEST]]
    model = ScriptedChatModel(script=script, no_tools_reply="It still fails.")
    scripted.append(model)
    agent_tools, ran = tools()
    result = create_loop_agent(model, agent_tools).invoke(ask())
    assert ran.count("python test.py") == 4  # the 4th request refused, the 5th run, the 6th stopped
    (block,) = blocked(result["messages"])
    assert block.status == "error" and block.name == "bash"
    assert "returned the same result the last 3 times" in str(block.content)
    after = model.requests[next(i for i, r in enumerate(model.requests) if blocked(r))]
    assert after[-1] is not None and blocked(after)  # the model saw the block and went on
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    guard = result["iterations"][-1]["guard"]
    assert (guard["layer"], guard["rung"], guard["count"]) == ("no_progress", "stop", 4)
    assert "the same result 4 times" in guard["detail"] and ran[-1] == "python test.py"
    assert result["messages"][-1].content == "It still fails." and not check_pairing(
        result["messages"])


def test_a_repeat_back_to_back_is_stopped_without_a_block(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[TEST]] * 5, no_tools_reply="Stuck.")
    scripted.append(model)
    agent_tools, ran = tools()
    result = create_loop_agent(model, agent_tools).invoke(ask())
    assert ran == ["python test.py"] * 3 and not blocked(result["messages"])
    assert result["stop_reason"] == StopReason.LOOP_DETECTED


def test_a_reply_whose_every_call_is_blocked_goes_back_to_the_model(
    scripted: list[ScriptedChatModel],
) -> None:
    script = [*edit_and_rerun(3), [TEST, ("edit", {"line": 9})], [TEST], "Giving up."]
    partial = ScriptedChatModel(script=script)
    scripted.append(partial)
    agent_tools, ran = tools()
    result = create_loop_agent(partial, agent_tools).invoke(ask())
    assert ran[-1] == "edit 9" and len(blocked(result["messages"])) == 1  # the edit still ran
    only = ScriptedChatModel(script=[*edit_and_rerun(3), [TEST], "Giving up."])
    scripted.append(only)
    agent_tools, ran = tools()
    result = create_loop_agent(only, agent_tools).invoke(ask())
    assert result["stop_reason"] == StopReason.COMPLETED  # the model answered after the block
    assert result["messages"][-1].content == "Giving up." and len(blocked(result["messages"])) == 1


def test_a_block_is_in_the_transcript_and_a_resume_elsewhere_still_stops_the_repeat(
    scripted: list[ScriptedChatModel],
) -> None:
    """The block's state is the tagged ToolMessage: a new graph (another process, no memo)
    resuming the thread after an interrupt derives it and stops the next identical request."""
    saver = InMemorySaver()

    def make(script: list[Any]) -> tuple[Any, list[str]]:
        model = ScriptedChatModel(script=script, no_tools_reply="Stopped.")
        scripted.append(model)
        agent_tools, ran = tools()
        deploy = StructuredTool.from_function(lambda: "deployed", name="deploy", description="d")
        return create_loop_agent(model, [*agent_tools, deploy], checkpointer=saver,
                                 approval=Approval(tools=["deploy"])), ran

    first, _ = make([*edit_and_rerun(3), [TEST, ("deploy", {})]])
    paused = first.invoke(ask(), cfg("t"))
    assert "__interrupt__" in paused and len(blocked(paused["messages"])) == 1
    second, ran = make([[TEST]])
    result = second.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg("t"))
    assert result["stop_reason"] == StopReason.LOOP_DETECTED and "python test.py" not in ran
    assert result["iterations"][-1]["guard"]["layer"] == "no_progress"


def test_approval_is_asked_for_the_gated_call_of_a_reply_with_a_blocked_call(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[*edit_and_rerun(3), [TEST, ("deploy", {})], "Done."])
    scripted.append(model)
    agent_tools, ran = tools()
    deploy = StructuredTool.from_function(lambda: "deployed", name="deploy", description="d")
    agent = create_loop_agent(model, [*agent_tools, deploy], checkpointer=InMemorySaver(),
                              approval=Approval(tools=["deploy"]))
    paused = agent.invoke(ask(), cfg("a"))
    (request,) = paused["__interrupt__"]
    assert [a["name"] for a in request.value["action_requests"]] == ["deploy"]
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg("a"))
    assert result["stop_reason"] == StopReason.COMPLETED and ran.count("python test.py") == 3


# --- where the loop began, and a human deciding --------------------------------------------


def test_a_loop_stop_records_the_checkpoint_before_the_loop_began_and_forking_there_works(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[[("edit", {"line": 0})], *[[TEST]] * 4],
                              no_tools_reply="Stuck.")
    scripted.append(model)
    agent_tools, _ = tools()
    saver = InMemorySaver()
    agent = create_loop_agent(model, agent_tools, checkpointer=saver)
    result = agent.invoke(ask(), cfg("f"))
    guard = result["iterations"][-1]["guard"]
    first_test = result["messages"][3]
    assert isinstance(first_test, AIMessage) and first_test.tool_calls[0]["args"] == TEST[1]
    assert guard["began"] == {"response": 2, "message_id": first_test.id}
    fork = agent.get_state(cfg("f", guard["checkpoint_id"]))
    assert fork.next == ("model",) and first_test.id not in {m.id for m in fork.values["messages"]}
    again = ScriptedChatModel(script=["I will read the test first."])
    scripted.append(again)
    forked = create_loop_agent(again, agent_tools, checkpointer=saver).invoke(None, fork.config)
    assert forked["stop_reason"] == StopReason.COMPLETED
    assert forked["messages"][-1].content == "I will read the test first."
    without = create_loop_agent(ScriptedChatModel(script=[[TEST]] * 4, no_tools_reply="x"),
                                tools()[0]).invoke(ask())
    assert without["iterations"][-1]["guard"]["checkpoint_id"] is None  # no checkpointer


@pytest.mark.parametrize("answer", ["continue", "stop", "hint"])
def test_a_human_decides_instead_of_a_stop(scripted: list[ScriptedChatModel], answer: str) -> None:
    model = ScriptedChatModel(script=[*[[TEST]] * 4, "Done."], no_tools_reply="Stopped.")
    scripted.append(model)
    agent_tools, ran = tools()
    agent = create_loop_agent(model, agent_tools, checkpointer=InMemorySaver(),
                              loop_detection=LoopDetection(ask_human=True))
    paused = agent.invoke(ask(), cfg(answer))
    (question,) = paused["__interrupt__"]
    (action,) = question.value["action_requests"]
    assert action["name"] == "Loop detected: bash" and action["args"] == {"hint": ""}
    assert action["description"].startswith(
        'The agent is repeating itself: it asked for bash({"command":"python test.py"}) 3 times')
    assert "Last result: 1 failed in 0.31s" in action["description"]
    assert ran == ["python test.py"] * 3
    decision: dict[str, Any] = {"continue": {"type": "approve"}, "stop": {"type": "reject", "message": "x"},
                                "hint": {"type": "edit", "edited_action": {"name": action["name"], "args": {
                                    "hint": "The test reads a cached build: run make first."}}}}[answer]
    resume = {"decisions": [decision]}
    result = agent.invoke(Command(resume=resume), cfg(answer))
    if answer == "stop":
        assert result["stop_reason"] == StopReason.LOOP_DETECTED
        assert result["iterations"][-1]["guard"]["human"] == {"action": "stop", "message": "x"}
        assert result["iterations"][-1]["guard"]["checkpoint_id"] is not None
        return
    assert result["stop_reason"] == StopReason.COMPLETED and len(ran) == 4
    notices = [m.content for m in result["messages"]
               if isinstance(m, HumanMessage) and m.name == "loop_notice"]
    assert any("run make first" in str(n) for n in notices) == (answer == "hint")


async def test_a_human_decides_in_an_async_run(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[*[[TEST]] * 4, "Done."])
    scripted.append(model)
    agent = create_loop_agent(model, tools()[0], checkpointer=InMemorySaver(),
                              loop_detection=LoopDetection(ask_human=True))
    paused = await agent.ainvoke(ask(), cfg("async"))
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "Loop detected: bash"
    with pytest.raises(ValueError, match=r"'continue' is not an answer 0.4 takes .* \{'decisions'"):
        await agent.ainvoke(Command(resume="continue"), cfg("async"))  # 0.3's answer
    (still,) = (await agent.aget_state(cfg("async"))).interrupts
    assert still.value == paused["__interrupt__"][0].value
    result = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg("async"))
    assert result["stop_reason"] == StopReason.COMPLETED


def test_a_bad_answer_is_a_clear_error_and_the_next_answer_works(tmp_path: Path) -> None:
    def agent(saver: SqliteSaver) -> Any:  # a new agent object for every answer, as a server has
        model = ScriptedChatModel(script=[[TEST]] * 4, no_tools_reply="Stopped.")
        return create_loop_agent(model, tools()[0], checkpointer=saver,
                                 loop_detection=LoopDetection(ask_human=True))

    with SqliteSaver.from_conn_string(str(tmp_path / "loop.db")) as saver:
        asked = agent(saver).invoke(ask(), cfg("bad"))["__interrupt__"][0]
        bad: list[Any] = [{"action": "maybe"}, "later", 42, {"action": "hint"}, {"decisions": []},
                          {"decisions": [{"type": "respond", "message": "x"}]},
                          {"decisions": [{"type": "edit", "edited_action": {"name": "x", "args": {
                              "hint": 3}}}]}]
        for answer in bad:
            with pytest.raises(ValueError, match=r"not an answer 0.4 takes|needs a non-empty|"
                                                 r"must be one of|carries its hint|one decision"):
                agent(saver).invoke(Command(resume=answer), cfg("bad"))
            (still,) = agent(saver).get_state(cfg("bad")).interrupts
            assert (still.id, still.value) == (asked.id, asked.value)  # paused at the same question
        result = agent(saver).invoke(Command(resume={"decisions": [{"type": "reject"}]}), cfg("bad"))
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["iterations"][-1]["guard"]["human"] == {"action": "stop"}
    assert result["messages"][-1].content == "Stopped."


# --- consecutive tool errors and text loops -----------------------------------------------


def test_consecutive_tool_errors_stop_when_the_limit_is_set(scripted: list[ScriptedChatModel]) -> None:
    def book(flight: str) -> str:
        raise ToolException(f"flight {flight} is full")

    booking = StructuredTool.from_function(book, description="Book.", handle_tool_error=True)
    script = [[("book", {"flight": f"HAT{i}"})] for i in range(6)]
    off = ScriptedChatModel(script=[*script, "None left."])
    scripted.append(off)
    assert create_loop_agent(off, [booking]).invoke(ask())["stop_reason"] == StopReason.COMPLETED
    on = ScriptedChatModel(script=script, no_tools_reply="Every flight is full.")
    scripted.append(on)
    result = create_loop_agent(on, [booking], limits=Limits(max_tool_errors=3)).invoke(ask())
    assert result["stop_reason"] == StopReason.TOOL_ERRORS
    guard = result["iterations"][-1]["guard"]
    assert (guard["limit"], guard["value"]) == (3, 3)
    assert result["messages"][-1].content == "Every flight is full."
    failed = [m for m in result["messages"] if isinstance(m, ToolMessage) and "is full" in str(
        m.content)]
    assert len(failed) == 3


def test_a_reply_repeating_its_own_text_is_warned_about(scripted: list[ScriptedChatModel]) -> None:
    looping = AIMessage("Wait, `msubsup` vs `msubsup`. I replaced it with itself. " * 12,
                        tool_calls=[{"name": "edit", "args": {"line": 1}, "id": "t1"}])
    model = ScriptedChatModel(script=[looping, "Fixed."])
    scripted.append(model)
    result = create_loop_agent(model, tools()[0]).invoke(ask())
    notice = model.requests[1][-1]
    assert notice.name == "loop_notice" and "repeats the same text" in str(notice.content)
    assert result["stop_reason"] == StopReason.COMPLETED
