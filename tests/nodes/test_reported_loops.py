"""What users report about looping agents (issue threads in LangChain, Gemini CLI, OpenHands,
Cline, Codex), each through the public API and, where it applies, both front doors: calls to a
tool that does not exist, repeated malformed calls, a poll whose result keeps changing, and one
nudge per streak."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool

from langgraph_loop import (
    Calls,
    Drift,
    Iterations,
    LoopDetection,
    NoProgress,
    Repeat,
    SameReply,
    StopReason,
    create_loop_agent,
    is_notice,
)
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel


@tool
def search(query: str) -> str:
    """Search the docs."""
    return f"results for {query}"


def _graph(model: ScriptedChatModel, tools: list[Any], detection: LoopDetection | None) -> Any:
    return create_loop_agent(model, tools, loop_detection=detection,
                             iterations=Iterations(max_model_calls=40))


def _middleware(model: ScriptedChatModel, tools: list[Any], detection: LoopDetection | None) -> Any:
    return create_agent(model, tools, middleware=[LoopDetectionMiddleware(detection)] if detection else [])


FRONT_DOORS = [_graph, _middleware]


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_calls_to_a_tool_that_does_not_exist_are_stopped(front_door: Any,
                                                         scripted: list[ScriptedChatModel]) -> None:
    """langchain#37961: a model calls ``web_search`` (not a tool of this agent) forever."""
    def ghost(messages: list[BaseMessage]) -> Any:
        return [("web_search", {"query": "release date"})] if len(messages) < 60 else "gave up"

    looped = ScriptedChatModel(default=ghost, no_tools_reply="I could not search the web.")
    stopped = ScriptedChatModel(default=ghost, no_tools_reply="I could not search the web.")
    scripted += [looped, stopped]
    without = front_door(looped, [search], None).invoke({"messages": [HumanMessage("When?")]},
                                                        {"recursion_limit": 200})
    result = front_door(stopped, [search], LoopDetection()).invoke(
        {"messages": [HumanMessage("When?")]}, {"recursion_limit": 200})
    assert sum(isinstance(m, ToolMessage) for m in without["messages"]) >= 20  # it never ends alone
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert len(stopped.requests) == 5  # 3 refused calls, the 4th stopped, one final answer
    assert result["messages"][-1].content == "I could not search the web."


def test_repeated_malformed_calls_are_stopped(scripted: list[ScriptedChatModel]) -> None:
    bad = AIMessage("", invalid_tool_calls=[{"name": "search", "args": "{query: oops", "id": None,
                                             "error": "bad JSON", "type": "invalid_tool_call"}])
    model = ScriptedChatModel(default=lambda m: bad.model_copy(), no_tools_reply="Sorry.")
    scripted.append(model)
    result = _graph(model, [search], LoopDetection()).invoke({"messages": [HumanMessage("go")]})
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["iterations"][-1]["guard"]["calls"][0].startswith("search(<invalid JSON arguments")
    assert len(model.requests) == 5


def _poll_tool(polls: bool) -> StructuredTool:
    progress = iter(range(0, 10_000, 5))

    def job_status(job: str) -> str:
        return f"{job}: {next(progress)} % done"

    metadata = {"loop_polls": True} if polls else None
    return StructuredTool.from_function(job_status, name="job_status", description="A job's status.",
                                        metadata=metadata)


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_a_tool_that_declares_it_polls_may_poll_while_its_result_moves(
        front_door: Any, scripted: list[ScriptedChatModel]) -> None:
    def waiting(messages: list[BaseMessage]) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return [("job_status", {"job": "build"})] if done < 18 else "The build finished."

    outcomes = []
    for polls in (False, True):
        model = ScriptedChatModel(default=waiting, no_tools_reply="stopped")
        scripted.append(model)
        result = front_door(model, [_poll_tool(polls)], LoopDetection()).invoke(
            {"messages": [HumanMessage("wait for the build")]})
        outcomes.append((result.get("stop_reason"), result["messages"][-1].content))
    # undeclared, the repeat layer stops 18 polls (relaxed to 15 while the result moves);
    # declared, the poll runs to the end
    assert outcomes[0][0] == StopReason.LOOP_DETECTED
    assert outcomes[1][0] in (None, StopReason.COMPLETED) and outcomes[1][1] == "The build finished."


def test_a_poll_that_returns_the_same_result_still_counts(scripted: list[ScriptedChatModel]) -> None:
    frozen = StructuredTool.from_function(lambda job: f"{job}: 40 % done", name="job_status",
                                          description="A job's status.", metadata={"loop_polls": True})
    model = ScriptedChatModel(default=lambda m: [("job_status", {"job": "build"})], no_tools_reply="stuck")
    scripted.append(model)
    result = _graph(model, [frozen], LoopDetection()).invoke({"messages": [HumanMessage("wait")]})
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert result["iterations"][-1]["guard"]["layer"] == "no_progress"


def test_one_nudge_per_streak(scripted: list[ScriptedChatModel]) -> None:
    """A frozen streak (the same call, the same result) is warned about once, not every turn."""
    model = ScriptedChatModel(default=lambda m: [("search", {"query": "x"})] if len(m) < 24 else "ok")
    scripted.append(model)
    patient = LoopDetection(no_progress=NoProgress(stop_after=9), repeat=Repeat(stop_after=12),
                            same_reply=SameReply(stop_after=None), calls=Calls(window=20))
    result = _graph(model, [search], patient).invoke({"messages": [HumanMessage("go")]})
    texts = [str(m.content) for m in result["messages"] if is_notice(m)]
    # 9 identical results: one warning (after the second; the repeat layer does not warn about
    # the same call again), then the stop's notice
    assert len(texts) == 2
    assert "returned the same result twice in a row before you asked for it again" in texts[0]
    assert texts[1].startswith("The run has been stopped")
    assert result["iterations"][-1]["guard"]["count"] == 9


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    if command.startswith("grep"):
        return "grep: src/app.py: No such file or directory"
    return f"ran {command}"


@pytest.mark.parametrize("front_door", FRONT_DOORS)
def test_a_command_that_grows_a_little_each_time_with_the_same_result_is_stopped(
        front_door: Any, scripted: list[ScriptedChatModel]) -> None:
    """Near-repeats: ``grep foo src/app.py``, then with one more flag, and one more: the same
    error each time. The opt-in drift layer warns at the third identical result, stops at the
    fourth; the defaults leave it running (issue 37: the layer stopped batch work)."""
    flags = iter(["-n", "-n -i", "-n -i -w", "-n -i -w -F", "-n -i -w -F -H", "-n -i -w -F -H -s"])

    def grows(messages: list[BaseMessage]) -> Any:
        flag = next(flags, None)
        return [("bash", {"command": f"grep {flag} foo src/app.py"})] if flag else "gave up"

    model = ScriptedChatModel(default=grows, no_tools_reply="The file is not there.")
    scripted.append(model)
    drift = LoopDetection(drift=Drift(stop_after=4))  # its own threshold given: the layer is on
    result = front_door(model, [bash], drift).invoke({"messages": [HumanMessage("find foo")]})
    guard = result.get("stop_guard") or result["iterations"][-1]["guard"]
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert (guard["layer"], guard["count"]) == ("drift", 4)
    assert guard["calls"] == ['bash({"command":"grep -n -i -w -F -H foo src/app.py"})']
    notices = [str(m.content) for m in result["messages"] if is_notice(m)]
    assert "although its arguments changed each time" in notices[0]
    # without the layer the same script runs to its end
    again = iter(["-n", "-n -i", "-n -i -w", "-n -i -w -F", "-n -i -w -F -H", "-n -i -w -F -H -s"])
    model = ScriptedChatModel(default=lambda m: [("bash", {"command": f"grep {f} foo src/app.py"})]
                              if (f := next(again, None)) else "gave up")
    scripted.append(model)
    without = front_door(model, [bash], LoopDetection())
    assert without.invoke({"messages": [HumanMessage("find foo")]}).get("stop_reason") != "loop_detected"


def test_different_commands_with_different_results_are_not_drift(scripted: list[ScriptedChatModel]) -> None:
    steps = iter([f"pytest tests/test_{i}.py" for i in range(8)])
    model = ScriptedChatModel(default=lambda m: [("bash", {"command": c})] if (c := next(steps, None))
                              else "all ran")
    scripted.append(model)
    result = _graph(model, [bash], LoopDetection()).invoke({"messages": [HumanMessage("run them")]})
    assert result["stop_reason"] == StopReason.COMPLETED
    assert not any(is_notice(m) for m in result["messages"])


def _edit_and_rerun_tools() -> list[Any]:
    edits: list[str] = []

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if command.startswith("pytest"):
            return "FAILED test_parse (1 failed)"
        if command.startswith("echo"):
            edits.append(command)
            return ""  # a silent write
        return f"parse.py | {len(edits)} +"  # git diff --stat: it shows every edit

    return [shell]


@pytest.mark.parametrize("front_door", FRONT_DOORS)
@pytest.mark.parametrize("look", [False, True])
def test_the_same_failing_test_between_new_edits_is_refused_once_not_stopped(
        front_door: Any, look: bool, scripted: list[ScriptedChatModel]) -> None:
    """Issue 37: an agent reruns a failing test between silent edits (``echo fix >> parse.py``),
    each a new action: that is work (solved runs do it). The 4th identical run is refused and the
    run goes on; after the next edit the test runs again; the run ends on the model's answer.
    The same holds when a result shows the edits (``git diff`` grows)."""
    script: list[Any] = []
    for i in range(5):
        script += [[("shell", {"command": "pytest tests/test_parse.py"})],
                   [("shell", {"command": f"echo fix{i} >> parse.py"})]]
        script += [[("shell", {"command": "git diff --stat"})]] if look else []
    model = ScriptedChatModel(script=[*script, "The test still fails."])
    scripted.append(model)
    result = front_door(model, _edit_and_rerun_tools(), LoopDetection()).invoke(
        {"messages": [HumanMessage("Fix the parser.")]})
    results = [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]
    assert result.get("stop_reason") in (StopReason.COMPLETED, None)
    assert sum(r.startswith("FAILED") for r in results) == 4  # the 4th refused, the 5th run
    (block,) = [r for r in results if r.startswith("Error: not run")]
    assert "returned the same result the last 3 times" in block
    assert result["messages"][-1].content == "The test still fails."
