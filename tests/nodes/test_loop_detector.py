"""The loop_detector node end to end: what the model receives, what runs, how runs stop."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_loop import Calls, Limits, LoopDetection, StopReason, create_loop_agent
from langgraph_loop.core.messages import check_pairing, is_blocked
from langgraph_loop.scripted import ScriptedChatModel, repeat

X = [("search", {"q": "x"})]
_IDS = itertools.count(1)


def search_tool(results: Callable[[str], str] | None = None) -> tuple[BaseTool, list[str]]:
    """A search tool that records its executions."""
    ran: list[str] = []

    @tool
    def search(q: str) -> str:
        """Search the web."""
        ran.append(q)
        return results(q) if results is not None else f"results for {q}"

    return search, ran


def warnings_in(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if isinstance(m, HumanMessage) and m.name == "loop_notice"]


def types(request: list[BaseMessage]) -> list[str]:
    return [m.type for m in request]


def cfg(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def ask(text: str = "find x") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# --- warnings -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_three_identical_calls_warn_in_the_fourth_request_once(
    scripted: list[ScriptedChatModel], mode: str
) -> None:
    model = ScriptedChatModel(script=[X, X, X, "Here is x."])
    scripted.append(model)
    search, ran = search_tool()
    agent = create_loop_agent(model, [search], checkpointer=InMemorySaver())
    if mode == "sync":
        result = agent.invoke(ask(), cfg("t"))
    else:
        result = await agent.ainvoke(ask(), cfg("t"))
    fourth = model.requests[3]
    assert types(fourth)[-3:] == ["ai", "tool", "human"]
    assert fourth[-3].tool_calls and fourth[-2].tool_call_id == fourth[-3].tool_calls[0]["id"]
    warning = fourth[-1]
    assert warning.name == "loop_notice" and 'search({"q":"x"})' in warning.content
    assert all(not warnings_in(r) for r in model.requests[:3])
    stored = agent.get_state(cfg("t")).values["messages"]
    assert len(warnings_in(stored)) == 1 and len(warnings_in(result["messages"])) == 1
    assert result["stop_reason"] == StopReason.COMPLETED and len(ran) == 3
    assert result["loop_notices"] == []


def test_parallel_calls_in_another_order_count_as_the_same(
    scripted: list[ScriptedChatModel],
) -> None:
    a, b = ("search", {"q": "a"}), ("search", {"q": "b"})
    model = ScriptedChatModel(script=[[a, b], [b, a], [a, b], "done"])
    scripted.append(model)
    result = create_loop_agent(model, [search_tool()[0]]).invoke(ask())
    assert types(model.requests[3])[-4:] == ["ai", "tool", "tool", "human"]
    (warning,) = warnings_in(result["messages"])
    assert 'search({"q":"a"})' in warning.content and 'search({"q":"b"})' in warning.content


def test_twenty_distinct_calls_never_warn(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[("search", {"q": f"q{i}"})] for i in range(20)] + ["done"])
    scripted.append(model)
    search, ran = search_tool()
    result = create_loop_agent(model, [search]).invoke(ask())
    assert len(ran) == 20 and result["stop_reason"] == StopReason.COMPLETED
    assert not any(warnings_in(r) for r in model.requests)


def test_polling_that_makes_progress_is_stopped_at_eight_in_a_row_unless_declared(
        scripted: list[ScriptedChatModel]) -> None:
    """The same call back to back 8 times is a runaway whatever it returns (issue 37); a tool
    the model polls says so (``metadata={"loop_polls": True}``) and waits as long as it moves."""
    for polls, runs in ((False, 7), (True, 12)):
        progress = itertools.count(10, 10)
        search, ran = search_tool(lambda q, p=progress: f"job is {next(p)}% done")
        search.metadata = {"loop_polls": True} if polls else None
        model = ScriptedChatModel(script=[X] * 12 + ["The job finished."], no_tools_reply="Still running.")
        scripted.append(model)
        result = create_loop_agent(model, [search]).invoke(ask())
        assert len(ran) == runs and warnings_in(result["messages"]) == []
        assert result["stop_reason"] == (StopReason.COMPLETED if polls else StopReason.LOOP_DETECTED)
        if not polls:
            assert result["iterations"][-1]["guard"]["layer"] == "same_reply"


def test_repeated_malformed_calls_warn_and_stay_paired(scripted: list[ScriptedChatModel]) -> None:
    def broken(_messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("", invalid_tool_calls=[{
            "name": "search", "args": '{"q": x', "id": f"bad{next(_IDS)}",
            "error": "invalid JSON", "type": "invalid_tool_call"}])

    model = ScriptedChatModel(script=[broken, broken, broken, "sorry"])
    scripted.append(model)
    result = create_loop_agent(model, [search_tool()[0]]).invoke(ask())
    (warning,) = warnings_in(result["messages"])
    assert "invalid JSON" in warning.content
    assert check_pairing(result["messages"]) == []


# --- hard stop ----------------------------------------------------------------------


def test_ignored_warning_hard_stops_with_error_answers_and_a_summary(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(default=repeat(X), no_tools_reply="I found nothing new about x.")
    scripted.append(model)
    search, ran = search_tool()
    events: list[dict[str, Any]] = []
    agent = create_loop_agent(model, [search])
    result: dict[str, Any] = {}
    for mode, chunk in agent.stream(ask(), stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            result = chunk
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    assert len(ran) == 3  # the 4th call (same call, same result 3 times) was not executed
    *_, stopped_ai, refusal, notice, final = result["messages"]
    assert stopped_ai.tool_calls and isinstance(refusal, ToolMessage)
    assert notice.name == "stop_notice" and "repeating yourself" in notice.content
    assert refusal.status == "error" and "no-progress layer" in refusal.content
    assert final.content == "I found nothing new about x."
    assert model.request_tools[-1] == [] and "stopped" in model.requests[-1][-1].content
    assert "Loop warning" not in model.requests[-1][-1].content  # a stop queues no warning
    guard = result["iterations"][-1]["guard"]
    assert (guard["layer"], guard["tool"], guard["args"], guard["count"]) == (
        "no_progress", "search", '{"q":"x"}', 3)
    loop_events = [e for e in events if e["event"] in {"loop_warning", "stop"}]
    assert [(e["event"], e.get("layer") or e["guard"]["layer"]) for e in loop_events] == [
        ("loop_warning", "no_progress"), ("stop", "no_progress")]
    assert loop_events[0]["calls"] == ['search({"q":"x"})']
    assert loop_events[1]["guard"]["count"] == 3 and loop_events[1]["reason"] == "loop_detected"
    assert check_pairing(result["messages"]) == []


def test_every_call_of_the_stopped_reply_is_answered_and_none_runs(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(default=repeat([*X, ("search", {"q": "other"})]),
                              no_tools_reply="summary")
    scripted.append(model)
    search, ran = search_tool()
    result = create_loop_agent(model, [search]).invoke(ask())
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    *_, ai, t1, t2, _notice, final = result["messages"]
    assert [t.tool_call_id for t in (t1, t2)] == [c["id"] for c in ai.tool_calls]
    assert t1.status == t2.status == "error"
    assert len(ran) == 6 and final.content == "summary"


def test_runaway_model_without_tools_bound_is_stopped_with_a_valid_transcript(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(default=repeat(X))  # keeps calling even with no tools bound
    scripted.append(model)
    result = create_loop_agent(model, [search_tool()[0]]).invoke(ask())
    assert result["stop_reason"] == StopReason.LOOP_DETECTED
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"] == "search"
    assert check_pairing(result["messages"]) == []
    assert len(result["iterations"]) == 1


def test_undelivered_warnings_are_dropped_when_the_run_ends(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(default=repeat(X))
    scripted.append(model)
    agent = create_loop_agent(model, [search_tool()[0]], checkpointer=InMemorySaver(),
                              limits=Limits(max_tool_calls=3, final_answer=False))
    result = agent.invoke(ask(), cfg("s"))
    assert result["stop_reason"] == StopReason.MAX_TOOL_CALLS  # the warning was queued ...
    assert result["loop_notices"] == [] and warnings_in(result["messages"]) == []
    assert agent.get_state(cfg("s")).values["loop_notices"] == []  # ... and dropped
    assert check_pairing(result["messages"]) == []


MCP_READ_ONLY = {"title": "Flight status", "readOnlyHint": True, "destructiveHint": False,
                 "idempotentHint": True, "openWorldHint": True}  # as langchain-mcp-adapters sets it


@pytest.mark.parametrize("metadata", [MCP_READ_ONLY, None], ids=["read-only hint", "no hint"])
def test_a_lookup_between_identical_failing_calls_does_not_excuse_them(
    scripted: list[ScriptedChatModel], metadata: dict[str, Any] | None
) -> None:
    """The booking that keeps failing the same way between lookups: marked read-only (MCP's
    ``readOnlyHint``), the lookups change nothing and the 4th try stops; without the hint a
    lookup returning something new may have changed something, so the 4th try is refused and
    the run goes on (issue 37), and the try after the next lookup runs again."""
    ran: list[str] = []

    def book(flight: str) -> str:
        ran.append(flight)
        raise ToolException("payment amount does not add up")

    def flight_status(flight: str) -> str:
        return f"{flight}: on time"

    tools = [StructuredTool.from_function(book, description="Book.", handle_tool_error=True),
             StructuredTool.from_function(flight_status, description="Status.", metadata=metadata)]
    script: list[Any] = []
    for i in range(6):
        script += [[("book", {"flight": "HAT023"})], [("flight_status", {"flight": f"HAT{i}"})]]
    model = ScriptedChatModel(script=[*script, "I could not book it."], no_tools_reply="I could not book it.")
    scripted.append(model)
    result = create_loop_agent(model, tools).invoke(ask())
    if metadata is None:
        assert len(ran) == 4 and result["stop_reason"] == StopReason.COMPLETED  # tries 4 and 6 refused
        assert sum(isinstance(m, ToolMessage) and is_blocked(m) for m in result["messages"]) == 2
        return
    assert result["stop_reason"] == StopReason.LOOP_DETECTED and len(ran) == 3
    assert result["iterations"][-1]["guard"]["layer"] == "no_progress"
    warned = next(r for r in model.requests if warnings_in(r))
    assert sum(1 for m in warned if isinstance(m, ToolMessage) and m.name == "book") == 3
    assert warned[-1].name == "loop_notice"  # warned right after the third failure
    assert result["messages"][-1].content == "I could not book it."


# --- scoping: interrupts, retries, restarts, runs, threads ----------------------------


def test_warning_queued_before_an_interrupt_is_delivered_after_resume_in_a_new_process(
    scripted: list[ScriptedChatModel],
) -> None:
    saver = InMemorySaver()
    first = ScriptedChatModel(script=[X, X, X])
    scripted.append(first)
    agent = create_loop_agent(first, [search_tool()[0]], checkpointer=saver)
    agent.invoke(ask(), cfg("i"), interrupt_before=["tools"])
    agent.invoke(None, cfg("i"), interrupt_before=["tools"])
    agent.invoke(None, cfg("i"), interrupt_before=["tools"])
    paused = agent.get_state(cfg("i"))
    assert paused.next == ("tools",)
    assert [n["source"] for n in paused.values["loop_notices"]] == ["loop"]
    # a "restart": a new graph and model over the same checkpointer
    second = ScriptedChatModel(script=["Here is x."])
    scripted.append(second)
    again = create_loop_agent(second, [search_tool()[0]], checkpointer=saver)
    result = again.invoke(None, cfg("i"))
    assert types(second.requests[0])[-3:] == ["ai", "tool", "human"]
    assert second.requests[0][-1].name == "loop_notice"
    assert len(warnings_in(result["messages"])) == 1
    assert result["stop_reason"] == StopReason.COMPLETED


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_failed_and_retried_model_call_keeps_the_warning(
    scripted: list[ScriptedChatModel], mode: str
) -> None:
    model = ScriptedChatModel(script=[X, X, X, ConnectionError("503 from provider"), "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [search_tool()[0]], checkpointer=InMemorySaver())
    if mode == "sync":
        result = agent.invoke(ask(), cfg("r"))
    else:
        result = await agent.ainvoke(ask(), cfg("r"))
    failed, retried = model.requests[3], model.requests[4]
    assert failed[-1].name == retried[-1].name == "loop_notice"
    assert failed[-1].content == retried[-1].content
    assert len(warnings_in(result["messages"])) == 1
    assert result["messages"][-1].content == "done"


def test_warnings_of_an_earlier_run_are_dropped_and_counters_reset(
    scripted: list[ScriptedChatModel],
) -> None:
    model = ScriptedChatModel(script=[X, X, X, X, "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [search_tool()[0]], checkpointer=InMemorySaver())
    agent.invoke(ask(), cfg("n"), interrupt_before=["tools"])
    agent.invoke(None, cfg("n"), interrupt_before=["tools"])
    agent.invoke(None, cfg("n"), interrupt_before=["tools"])
    assert agent.get_state(cfg("n")).values["loop_notices"]  # queued, then abandoned
    result = agent.invoke(ask("something else"), cfg("n"))  # a new run on the thread
    second_run = model.requests[3:]
    assert not any(warnings_in(r) for r in second_run)  # and X once more does not warn
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["loop_notices"] == []


def test_two_threads_on_one_graph_never_share_counters(
    scripted: list[ScriptedChatModel],
) -> None:
    def per_thread(messages: list[BaseMessage]) -> Any:
        wanted = 3 if messages[0].content == "A" else 2
        made = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
        return X if made < wanted else "done"

    model = ScriptedChatModel(default=per_thread)
    scripted.append(model)
    agent = create_loop_agent(model, [search_tool()[0]], checkpointer=InMemorySaver())
    agent.invoke(ask("A"), cfg("A"), interrupt_before=["tools"])
    agent.invoke(ask("B"), cfg("B"), interrupt_before=["tools"])
    for _ in range(2):  # interleave the two threads step by step
        agent.invoke(None, cfg("A"), interrupt_before=["tools"])
        agent.invoke(None, cfg("B"), interrupt_before=["tools"])
    a = agent.invoke(None, cfg("A"))
    b = agent.invoke(None, cfg("B"))
    assert len(warnings_in(a["messages"])) == 1  # A repeated 3 times
    assert warnings_in(b["messages"]) == []  # B only twice, despite A's counters
    assert b["stop_reason"] == a["stop_reason"] == StopReason.COMPLETED


def test_loop_detection_off(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[X] * 6 + ["done"])
    scripted.append(model)
    result = create_loop_agent(model, [search_tool()[0]], loop_detection=None).invoke(ask())
    assert result["stop_reason"] == StopReason.COMPLETED and not warnings_in(result["messages"])


def test_per_run_override_of_thresholds(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[X, X, "done"])
    scripted.append(model)
    agent = create_loop_agent(model, [search_tool()[0]],
                              loop_detection=LoopDetection(calls=Calls(per_tool={"search": 10})))
    result = agent.invoke(ask(), context={"loop_detection": {"repeat": {"warn_after": 2, "stop_after": 4}}})
    assert len(warnings_in(result["messages"])) == 1


def test_demo_scenarios_warn_recover_stop_and_poll() -> None:
    import io

    from rich.console import Console

    from langgraph_loop.app.demos import all_scenarios

    scenarios = {s.key: s for s in all_scenarios()}
    console = Console(file=io.StringIO(), width=200)
    warned = scenarios["loop-warned"].run(console, InMemorySaver())
    stopped = scenarios["loop-stopped"].run(console, InMemorySaver())
    polled = scenarios["poll-progress"].run(console, InMemorySaver())
    assert warned["stop_reason"] == StopReason.COMPLETED
    assert len(warnings_in(warned["messages"])) == 1
    assert stopped["stop_reason"] == StopReason.LOOP_DETECTED
    assert stopped["messages"][-1].content.startswith("I kept getting the same reading")
    assert polled["stop_reason"] == StopReason.COMPLETED
    assert len([m for m in polled["messages"] if isinstance(m, ToolMessage)]) == 7
    for state in (warned, stopped, polled):
        assert check_pairing(state["messages"]) == []
    assert "no-progress layer fired" in console.file.getvalue()  # type: ignore[attr-defined]
