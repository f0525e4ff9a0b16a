"""The engine's decision, made once in the ``model`` node: which nodes run, what is stored,
and that the state derived from the transcript is the state the detector built reply by reply."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import Calls, LoopDetection, Repeat, StopReason, create_loop_agent
from langgraph_loop.engine.decision import DetectorMemo, RunView, results_before
from langgraph_loop.engine.detection import observe
from langgraph_loop.scripted import ScriptedChatModel


@tool
def echo(x: str) -> str:
    """Echo the text back."""
    return f"echo {x}"


def rounds(n: int, repeat_at: tuple[int, ...] = ()) -> Any:
    """A model that calls ``echo`` n times (the same call in rounds ``repeat_at``), then answers."""

    def reply(messages: list[BaseMessage]) -> Any:
        done = sum(1 for m in messages if isinstance(m, ToolMessage))
        if done >= n:
            return "done"
        return [("echo", {"x": "same" if done in repeat_at else f"round {done}"})]

    return reply


def node_runs(agent: Any, config: dict[str, Any]) -> Counter[str]:
    """Node executions of one run, counted from ``stream_mode="updates"``."""
    runs: Counter[str] = Counter()
    for chunk in agent.stream({"messages": [HumanMessage("go")]}, config, stream_mode="updates"):
        runs.update(list(chunk))
    return runs


def test_a_clean_ten_round_run_is_two_steps_per_round_without_the_detector_node(
        scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=rounds(10))
    scripted.append(model)
    saver = InMemorySaver()
    agent = create_loop_agent(model, [echo], checkpointer=saver)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    runs = node_runs(agent, config)
    # 10 x (model, tools), then the answering model call; prepare and router once per run
    assert runs == {"prepare": 1, "model": 11, "tools": 10, "router": 1}
    state = agent.get_state(config)
    assert state.values["stop_reason"] == StopReason.COMPLETED
    assert "detector" not in state.values  # a clean round stores no detector state
    # LangGraph's empty and input checkpoints, then one per step: prepare, 21 x model/tools,
    # router (create_agent: 2 + 21)
    assert len(list(saver.list(config))) == 2 + 1 + 21 + 1


def test_a_warning_runs_the_detector_node_exactly_once(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=rounds(8, repeat_at=(2, 3, 4)))
    scripted.append(model)
    agent = create_loop_agent(model, [echo], checkpointer=InMemorySaver())
    runs = node_runs(agent, {"configurable": {"thread_id": uuid.uuid4().hex}})
    assert runs == {"prepare": 1, "model": 9, "tools": 8, "router": 1, "loop_detector": 1}
    # the warning (third identical call) reaches the model right before its next call
    warned = [i for i, request in enumerate(model.requests)
              if isinstance(request[-1], HumanMessage) and request[-1].name == "loop_notice"]
    assert warned == [5]
    assert [m.type for m in model.requests[5][-3:]] == ["ai", "tool", "human"]


def test_a_stop_runs_the_detector_node_once_and_ends_with_a_final_answer(
        scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(default=rounds(20, repeat_at=tuple(range(20))))
    scripted.append(model)
    agent = create_loop_agent(model, [echo], loop_detection=LoopDetection(repeat=Repeat(warn_after=2,
                                                                                        stop_after=3)))
    runs = node_runs(agent, {})
    # the repeat warns at the 2nd call and stops at the 3rd; the final answer has no tools
    assert runs == {"prepare": 1, "model": 4, "tools": 2, "router": 1, "loop_detector": 2}
    assert model.request_tools[-1] == []


def _thread(replies: int) -> list[BaseMessage]:
    """A run with repeats, a cycle and errors, ending on a new reply."""
    messages: list[BaseMessage] = [HumanMessage("old run", id="h0"), AIMessage("old", id="a0"),
                                   HumanMessage("go", id="h1")]
    pattern = ["a", "b", "a", "b", "c", "c", "c", "d"]
    for i in range(replies):
        name = pattern[i % len(pattern)]
        call = {"name": "f", "args": {"k": name}, "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i + 1}"))
        status = "error" if name == "c" else "success"
        messages.append(ToolMessage(f"result {name}", tool_call_id=f"c{i}", id=f"t{i}",
                                    status=status))
    messages.append(AIMessage("", tool_calls=[{"name": "f", "args": {"k": "a"}, "id": "cn",
                                               "type": "tool_call"}], id="an"))
    return messages


def test_the_state_derived_from_the_transcript_is_the_state_built_reply_by_reply() -> None:
    config = LoopDetection(calls=Calls(window=6))
    messages = _thread(30)
    expected: dict[str, Any] = {}
    for i, message in enumerate(messages[:-1]):
        if isinstance(message, AIMessage) and i > 2:  # replies of the current run only
            expected = observe(expected, message, results_before(messages, i), config).state
    state_before = DetectorMemo().state_before
    fresh = RunView(id=uuid.uuid4().hex, request_id="h1")  # not seen: replayed from h1
    before = messages[:-1]  # the newest reply comes after these
    assert state_before(before, fresh, config) == expected
    assert state_before(before, fresh, config) is state_before(before, fresh, config)
    first = RunView(id=uuid.uuid4().hex, request_id="h1")
    assert state_before(messages[:3], first, config) == {}  # the run's first reply
