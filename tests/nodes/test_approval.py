"""Human approval: the interrupt, the decisions, bounded auto-resolution, the escape hatch."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_loop import Approval, Iterations, StopReason, create_loop_agent
from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.nodes.approval import (
    apply_review,
    approval_request,
    auto_allowed,
    check_decisions,
    edit_note,
    reject_text,
)
from langgraph_loop.scripted import ScriptedChatModel

GATED = {"delete_file", "wipe_disk"}
KNOWN = {"delete_file", "wipe_disk", "list_files"}
RM = {"name": "delete_file", "args": {"path": "/a"}, "id": "c1"}


# ---------------------------------------------------------------- pure decisions


def test_request_has_langchain_hitl_shape() -> None:
    calls = [RM, {"name": "wipe_disk", "args": {}, "id": "c2"},
             {"name": "delete_file", "args": {"path": "/b"}, "id": "c3"}]
    request = approval_request(calls, "Needs approval")
    assert [(a["name"], a["args"]) for a in request["action_requests"]] == [
        ("delete_file", {"path": "/a"}), ("wipe_disk", {}), ("delete_file", {"path": "/b"})]
    assert request["action_requests"][0]["description"].startswith("Needs approval")
    assert "delete_file" in request["action_requests"][0]["description"]
    assert request["review_configs"] == [
        {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]},
        {"action_name": "wipe_disk", "allowed_decisions": ["approve", "edit", "reject"]},
    ]


def test_request_args_are_copies() -> None:
    request = approval_request([RM], "x")
    request["action_requests"][0]["args"]["path"] = "/etc"
    assert RM["args"] == {"path": "/a"}


@pytest.mark.parametrize(("decisions", "fragment"), [
    ([], "expected 1 decision"),
    ([{"type": "approve"}, {"type": "approve"}], "got 2"),
    ([{"type": "respond", "message": "hi"}], "unknown type 'respond'"),
    ([{"type": "edit", "edited_action": {"name": "format_c", "args": {}}}], "unknown tool 'format_c'"),
    ([{"type": "edit", "edited_action": {"name": "wipe_disk", "args": {}}}], "another gated tool"),
])
def test_malformed_decisions_are_errors(decisions: list[dict[str, Any]], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        check_decisions([RM], decisions, gated=GATED, known=KNOWN)


def test_edit_may_keep_the_tool_or_switch_to_an_ungated_one() -> None:
    same = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/b"}}}
    other = {"type": "edit", "edited_action": {"name": "list_files", "args": {"path": "/"}}}
    assert check_decisions([RM], [same], gated=GATED, known=KNOWN) == [same]
    assert check_decisions([RM], [other], gated=GATED, known=KNOWN) == [other]


def test_apply_review_runs_approved_edited_and_ungated_refuses_the_rest() -> None:
    calls = [RM, {"name": "list_files", "args": {}, "id": "c2"},
             {"name": "wipe_disk", "args": {}, "id": "c3"},
             {"name": "delete_file", "args": {"path": "/z"}, "id": "c4"}]
    review = {"message_id": "m1", "decisions": {
        "c1": {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/b"}}},
        "c3": {"type": "reject", "message": "never"},
    }}
    reviewed = apply_review(calls, review, message_id="m1", gated=GATED)
    assert reviewed.calls[0]["args"] == {"path": "/b"}
    assert reviewed.edited == {"c1": {"name": "delete_file", "args": {"path": "/a"}}}
    assert reviewed.refusals["c3"] == reject_text("wipe_disk", "never")
    assert "no decision was recorded" in reviewed.refusals["c4"]  # gated, undecided: never runs
    assert "c2" not in reviewed.refusals


def test_review_of_another_message_is_ignored() -> None:
    review = {"message_id": "old", "decisions": {"c1": {"type": "approve"}}}
    assert "c1" in apply_review([RM], review, message_id="new", gated=GATED).refusals


def test_auto_rounds_budget_and_texts() -> None:
    assert auto_allowed({}, 1) and not auto_allowed({"auto_rounds": 1}, 1)
    assert not auto_allowed({}, 0)
    assert "Do not retry" in reject_text("x", None)
    assert "/b" in edit_note(RM, {"name": "delete_file", "args": {"path": "/b"}})


# ---------------------------------------------------------------- end to end


class Disk:
    """Tools that record what really ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

        @tool
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.ran.append(("delete_file", {"path": path}))
            return f"deleted {path}"

        @tool
        def wipe_disk() -> str:
            """Wipe the disk."""
            self.ran.append(("wipe_disk", {}))
            return "wiped"

        @tool
        def list_files(path: str) -> str:
            """List files."""
            self.ran.append(("list_files", {"path": path}))
            return f"a.txt b.txt in {path}"

        self.tools: list[BaseTool] = [delete_file, wipe_disk, list_files]


def _cfg(thread: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _agent(model: ScriptedChatModel, disk: Disk, **approval: Any) -> Any:
    return create_loop_agent(model, disk.tools, checkpointer=InMemorySaver(),
                             approval=Approval(tools=["delete_file", "wipe_disk"], **approval))


MIXED = [("list_files", {"path": "/"}), ("delete_file", {"path": "/a"}), ("wipe_disk", {})]


def _paused(scripted: list[ScriptedChatModel], script: list[Any] | None = None,
            **approval: Any) -> tuple[Any, ScriptedChatModel, Disk, dict[str, Any]]:
    model = ScriptedChatModel(script=script or [MIXED, "All done."])
    scripted.append(model)
    disk = Disk()
    agent = _agent(model, disk, **approval)
    result = agent.invoke({"messages": [HumanMessage("Clean up /")]}, _cfg())
    return agent, model, disk, result


def test_pause_before_any_call_of_the_message_runs(scripted: list[ScriptedChatModel]) -> None:
    agent, model, disk, result = _paused(scripted)
    assert disk.ran == []  # not even the ungated list_files
    assert result["stop_reason"] is None
    (pending,) = result["__interrupt__"]
    assert [a["name"] for a in pending.value["action_requests"]] == ["delete_file", "wipe_disk"]
    assert [c["action_name"] for c in pending.value["review_configs"]] == ["delete_file", "wipe_disk"]
    state = agent.get_state(_cfg())
    assert state.next == ("approval",)
    assert state.values["iterations"] == []  # the pass did not end: the router never ran
    assert model.calls == 1


def test_approve_runs_gated_then_ungated_calls(scripted: list[ScriptedChatModel]) -> None:
    agent, model, disk, _ = _paused(scripted)
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}),
                          _cfg())
    assert sorted(disk.ran, key=str) == sorted([("list_files", {"path": "/"}),
                                                ("delete_file", {"path": "/a"}),
                                                ("wipe_disk", {})], key=str)
    assert result["stop_reason"] == StopReason.COMPLETED
    assert [m.type for m in model.requests[1]] == ["human", "ai", "tool", "tool", "tool"]
    assert [m.content for m in model.requests[1][2:]] == ["a.txt b.txt in /", "deleted /a", "wiped"]


def test_edit_runs_the_reviewers_call_and_says_so(scripted: list[ScriptedChatModel]) -> None:
    agent, model, disk, _ = _paused(scripted)
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/tmp/a"}}}
    result = agent.invoke(Command(resume={"decisions": [edit, {"type": "approve"}]}), _cfg())
    assert ("delete_file", {"path": "/tmp/a"}) in disk.ran
    assert ("delete_file", {"path": "/a"}) not in disk.ran
    answer = model.requests[1][3]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == model.requests[1][1].tool_calls[1]["id"]
    assert answer.content.startswith("Note: a reviewer changed this call before it ran.")
    assert answer.content.endswith("deleted /tmp/a")
    record = result["iterations"][0]["tool_calls"][1]
    assert (record["name"], record["args"], record["status"]) == (
        "delete_file", {"path": "/tmp/a"}, "success")


def test_edit_to_an_ungated_tool_runs_that_tool(scripted: list[ScriptedChatModel]) -> None:
    agent, _, disk, _ = _paused(scripted)
    edit = {"type": "edit", "edited_action": {"name": "list_files", "args": {"path": "/a"}}}
    agent.invoke(Command(resume={"decisions": [edit, {"type": "reject"}]}), _cfg())
    assert sorted(disk.ran, key=str) == [("list_files", {"path": "/"}), ("list_files", {"path": "/a"})]


def test_reject_sends_the_reviewers_message_and_the_model_goes_on(
    scripted: list[ScriptedChatModel],
) -> None:
    agent, model, disk, _ = _paused(scripted)
    decisions = [{"type": "reject", "message": "Keep /a, it is the archive."},
                 {"type": "reject", "message": "Never."}]
    result = agent.invoke(Command(resume={"decisions": decisions}), _cfg())
    assert disk.ran == [("list_files", {"path": "/"})]
    rejected = [m for m in model.requests[1] if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.content for m in rejected] == [
        "Rejected by a reviewer: the call to 'delete_file' was not run. "
        "Reviewer's message: Keep /a, it is the archive.",
        "Rejected by a reviewer: the call to 'wipe_disk' was not run. Reviewer's message: Never.",
    ]
    assert result["stop_reason"] == StopReason.COMPLETED
    assert result["messages"][-1].content == "All done."
    assert [c["status"] for c in result["iterations"][0]["tool_calls"]] == ["success", "rejected",
                                                                           "rejected"]
    assert result["usage"]["total_tokens"] > 0 and result["iterations"][0]["model_calls"] == 2


@pytest.mark.parametrize("decisions", [
    [{"type": "approve"}],
    [{"type": "approve"}, {"type": "approve"}, {"type": "approve"}],
    [{"type": "approve"}, {"type": "maybe"}],
    [{"type": "edit", "edited_action": {"name": "format_disk", "args": {}}}, {"type": "approve"}],
    [{"type": "edit", "edited_action": {"name": "wipe_disk", "args": {}}}, {"type": "approve"}],
    [{"type": "edit"}, {"type": "approve"}],
])
def test_malformed_resume_is_an_error_and_the_thread_stays_paused(
    scripted: list[ScriptedChatModel], decisions: list[dict[str, Any]],
) -> None:
    agent, _, disk, first = _paused(scripted)
    before = agent.get_state(_cfg())
    with pytest.raises(ValueError, match=r"^resume: approval: |ApprovalResponse"):  # issue 43: plain
        agent.invoke(Command(resume={"decisions": decisions}), _cfg())
    after = agent.get_state(_cfg())
    assert disk.ran == []
    assert after.next == ("approval",)
    assert [i.id for i in after.interrupts] == [first["__interrupt__"][0].id]
    assert after.values["messages"] == before.values["messages"]
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}),
                          _cfg())
    assert sorted(disk.ran, key=str) == [("delete_file", {"path": "/a"}), ("list_files", {"path": "/"})]
    assert result["stop_reason"] == StopReason.COMPLETED


@pytest.mark.parametrize("answer", ["approve", {"action": "approve"}, [{"type": "approve"}]])
def test_an_answer_not_in_decisions_names_the_shape_and_the_thread_stays_paused(
    scripted: list[ScriptedChatModel], answer: Any,
) -> None:
    agent, _, disk, first = _paused(scripted)
    with pytest.raises(ValueError, match=r"approval: .* is not an answer 0\.4 takes .* answer with "
                                         r"LangChain's human-in-the-loop decisions, \{'decisions'"):
        agent.invoke(Command(resume=answer), _cfg())
    after = agent.get_state(_cfg())
    assert disk.ran == [] and [i.id for i in after.interrupts] == [first["__interrupt__"][0].id]
    result = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}),
                          _cfg())
    assert sorted(disk.ran, key=str) == [("delete_file", {"path": "/a"}), ("list_files", {"path": "/"})]
    assert result["stop_reason"] == StopReason.COMPLETED


async def test_async_pause_and_resume(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[MIXED, "All done."])
    scripted.append(model)
    disk = Disk()
    agent = _agent(model, disk)
    paused = await agent.ainvoke({"messages": [HumanMessage("Clean up /")]}, _cfg())
    assert paused["__interrupt__"] and disk.ran == []
    with pytest.raises(ValueError, match="expected 2 decisions"):
        await agent.ainvoke(Command(resume={"decisions": []}), _cfg())
    result = await agent.ainvoke(
        Command(resume={"decisions": [{"type": "reject", "message": "no"}, {"type": "approve"}]}),
        _cfg())
    assert sorted(disk.ran, key=str) == [("list_files", {"path": "/"}), ("wipe_disk", {})]
    assert result["stop_reason"] == StopReason.COMPLETED


def _gated_script(rounds: int) -> list[Any]:
    return [[("delete_file", {"path": f"/f{i}"})] for i in range(rounds)] + ["Deleted."]


def test_resolver_decides_at_most_max_auto_rounds_then_a_human_is_asked(
    scripted: list[ScriptedChatModel],
) -> None:
    seen: list[dict[str, Any]] = []

    def resolver(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"decisions": [{"type": "approve"}]}

    agent, model, disk, result = _paused(scripted, _gated_script(3), resolver=resolver,
                                         max_auto_rounds=2)
    assert [a["action_requests"][0]["args"] for a in seen] == [{"path": "/f0"}, {"path": "/f1"}]
    assert disk.ran == [("delete_file", {"path": "/f0"}), ("delete_file", {"path": "/f1"})]
    assert result["__interrupt__"][0].value["action_requests"][0]["args"] == {"path": "/f2"}
    assert result["stop_reason"] is None
    assert agent.get_state(_cfg()).values["run"]["auto_rounds"] == 2
    done = agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "enough"}]}),
                        _cfg())
    assert len(seen) == 2  # the resolver was not asked again after its budget
    assert done["stop_reason"] == StopReason.COMPLETED and model.calls == 4


def test_resolver_budget_is_per_run(scripted: list[ScriptedChatModel]) -> None:
    seen: list[Any] = []

    async def resolver(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"decisions": [{"type": "approve"}]}

    script = [*_gated_script(1), *_gated_script(1)]
    agent, _, disk, first = _paused(scripted, script, resolver=resolver, max_auto_rounds=1)
    assert first["stop_reason"] == StopReason.COMPLETED
    second = agent.invoke({"messages": [HumanMessage("Again")]}, _cfg())
    assert second["stop_reason"] == StopReason.COMPLETED and "__interrupt__" not in second
    assert len(seen) == 2 and len(disk.ran) == 2


def test_resolver_may_hand_over_to_a_human(scripted: list[ScriptedChatModel]) -> None:
    agent, _, disk, result = _paused(scripted, _gated_script(1), resolver=lambda _r: None)
    assert result["__interrupt__"] and disk.ran == []
    assert agent.get_state(_cfg()).values["run"]["auto_rounds"] == 0


def test_resolver_with_an_invalid_answer_is_a_clear_error(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=_gated_script(1))
    scripted.append(model)
    disk = Disk()
    agent = _agent(model, disk, resolver=lambda _r: {"decisions": []})
    with pytest.raises(ValueError, match=r"approval\.resolver returned an invalid answer"):
        agent.invoke({"messages": [HumanMessage("go")]}, _cfg())
    assert disk.ran == []


def test_resolver_errors_name_the_resolver(scripted: list[ScriptedChatModel]) -> None:
    def broken(_request: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("policy")

    model = ScriptedChatModel(script=_gated_script(1))
    scripted.append(model)
    agent = _agent(model, Disk(), resolver=broken)
    with pytest.raises(CallbackError, match=r"approval\.resolver raised KeyError"):
        agent.invoke({"messages": [HumanMessage("go")]}, _cfg())


def test_outer_loop_never_continues_past_a_pending_approval(
    scripted: list[ScriptedChatModel],
) -> None:
    asked: list[int] = []

    def should_continue(state: Any) -> bool:
        asked.append(state["iteration"])
        return True

    model = ScriptedChatModel(script=["Pass one.", [("wipe_disk", {})], "Pass two."])
    scripted.append(model)
    disk = Disk()
    agent = create_loop_agent(model, disk.tools, checkpointer=InMemorySaver(),
                              iterations=Iterations(max=5, should_continue=should_continue),
                              approval=Approval(tools=["wipe_disk"]))
    paused = agent.invoke({"messages": [HumanMessage("work")]}, _cfg())
    assert paused["stop_reason"] is None and paused["iteration"] == 2
    assert paused["__interrupt__"][0].value["action_requests"][0]["name"] == "wipe_disk"
    assert asked == [1] and len(paused["iterations"]) == 1 and model.calls == 2
    for _ in range(2):  # invoking with no input does not step past the pause either
        again = agent.invoke(None, _cfg())
        assert again["__interrupt__"] and again["stop_reason"] is None
    assert disk.ran == [] and model.calls == 2


def test_new_message_instead_of_resume_repairs_the_thread(scripted: list[ScriptedChatModel]) -> None:
    agent, model, disk, _ = _paused(scripted, [MIXED, "Fine, nothing deleted."])
    result = agent.invoke({"messages": [HumanMessage("Forget it, do nothing.")]}, _cfg())
    assert disk.ran == []
    assert result["stop_reason"] == StopReason.COMPLETED
    request = model.requests[1]
    assert [m.type for m in request] == ["human", "ai", "tool", "tool", "tool", "human"]
    assert all(m.status == "error" for m in request[2:5])
    assert request[-1].content == "Forget it, do nothing."
    assert agent.get_state(_cfg()).next == ()


def test_stream_shows_the_pending_request(scripted: list[ScriptedChatModel]) -> None:
    model = ScriptedChatModel(script=[[("wipe_disk", {})]])
    scripted.append(model)
    agent = _agent(model, Disk())
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, _cfg(), stream_mode="updates"))
    interrupts = [c["__interrupt__"] for c in chunks if "__interrupt__" in c]
    assert interrupts[0][0].value["action_requests"] == [
        {"name": "wipe_disk", "args": {},
         "description": "Tool execution requires approval\n\nTool: wipe_disk\nArgs: {}"}]



def test_demo_shows_an_auto_resolved_round_then_a_pause() -> None:
    import io

    from rich.console import Console

    from langgraph_loop.app.demos import all_scenarios
    from langgraph_loop.app.demos.approval import approval

    out = io.StringIO()
    state = approval(Console(file=out, width=200), InMemorySaver())
    text = out.getvalue()
    assert "resolver: approving ['old/spike-2019']" in text
    assert "stop_reason=None  next=('approval',)" in text
    assert "needs a decision: delete_branch" in text
    assert state["stop_reason"] == StopReason.COMPLETED
    assert [c["status"] for c in state["iterations"][0]["tool_calls"]] == [
        "success", "success", "rejected", "success"]
    assert {"approval", "compaction"} <= {s.key for s in all_scenarios()}


@pytest.mark.parametrize("with_compaction", [False, True])
def test_auto_approved_runaway_stops_cleanly_at_the_step_limit(
    scripted: list[ScriptedChatModel], with_compaction: bool,
) -> None:
    from langgraph_loop import Compaction

    counter = iter(range(1, 1000))
    model = ScriptedChatModel(default=lambda _m: [("delete_file", {"path": f"/f{next(counter)}"})],
                              no_tools_reply="Stopped.")
    scripted.append(model)
    disk = Disk()
    extra = {"compaction": Compaction(max_tokens=100_000)} if with_compaction else {}
    agent = create_loop_agent(model, disk.tools, loop_detection=None,
                              iterations=Iterations(max_model_calls=None),
                              approval=Approval(tools=["delete_file"], max_auto_rounds=1000,
                                                resolver=lambda r: {"decisions": [{"type": "approve"}]}),
                              **extra)
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 40})
    assert result["stop_reason"] == StopReason.STEP_LIMIT
    assert result["messages"][-1].content == "Stopped."
    records = result["iterations"][0]["tool_calls"]
    assert len(disk.ran) == len(records) >= 5 and {r["status"] for r in records} == {"success"}


def test_the_resume_schema_is_langchains_decisions_without_respond() -> None:
    from langchain.agents.middleware.human_in_the_loop import (
        ApproveDecision,
        EditDecision,
        RejectDecision,
        RespondDecision,
    )
    from pydantic import TypeAdapter

    from langgraph_loop.nodes.approval import response_schema

    calls = [RM, {"name": "wipe_disk", "args": {}, "id": "c2"}]
    adapter = TypeAdapter(response_schema(calls, gated=GATED, known=KNOWN))
    decisions = [EditDecision(type="edit", edited_action={"name": "delete_file", "args": {}}),
                 RejectDecision(type="reject", message="no")]
    assert adapter.validate_python({"decisions": decisions}) == {"decisions": decisions}
    assert adapter.validate_python({"decisions": [ApproveDecision(type="approve")] * 2})
    with pytest.raises(ValueError, match="does not match any of the expected tags"):
        adapter.validate_python({"decisions": [RespondDecision(type="respond", message="hi"),
                                               ApproveDecision(type="approve")]})
    shown = adapter.json_schema()["$defs"]
    assert {"ApproveDecision", "EditDecision", "RejectDecision"} <= set(shown)


def test_the_request_and_a_valid_decision() -> None:
    """The module's former doctest."""
    calls = [{"name": "rm", "args": {"path": "/tmp/x"}, "id": "c1"}]
    request = approval_request(calls, "Needs approval")
    assert request["review_configs"] == [{"action_name": "rm",
                                          "allowed_decisions": ["approve", "edit", "reject"]}]
    assert check_decisions(calls, [{"type": "approve"}], gated={"rm"}, known={"rm", "ls"}) == [
        {"type": "approve"}]
