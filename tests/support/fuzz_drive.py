"""Drive a fuzzed thread to its end (streams cut short, interrupts, errors, resumes) and check it.

``drive`` runs one user turn: it streams the run (``updates`` + ``custom``), may stop
reading after a random number of updates (a caller that went away), answers approval
and ``ask`` interrupts with random decisions (invalid ones first, sometimes), resumes
after model and callback errors, until the run has a stop reason. ``check_run`` then
checks the invariants of that run against the world's records.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from langgraph_loop.core.callbacks import CallbackError
from langgraph_loop.core.messages import check_pairing, newest_reply
from langgraph_loop.core.state import executed_calls
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.fuzz import ModelDown, World

__all__ = ["MAX_RESUMES", "check_requests", "check_run", "drive"]

MAX_RESUMES = 60
STOP_TEXT = re.compile(r"The run has been stopped because .*? give your best final answer now\.",
                       re.S)
REFUSALS = ("was not run", "not executed", "Rejected by a reviewer", "unknown tool")


def _record_stream(world: World, mode: str, chunk: Any, pressure_text: str | None) -> None:
    if mode == "custom" and isinstance(chunk, dict):
        if chunk.get("event") == "loop_warning":
            world.queued[world.run][chunk["text"]] += 1
        elif chunk.get("event") == "budget_pressure" and pressure_text is not None:
            world.queued[world.run][pressure_text] += 1
    elif mode == "updates" and isinstance(chunk, dict):
        world.updates += "tool_call" not in chunk
        for update in chunk.values():
            if isinstance(update, dict) and update.get("stop_reason") is not None:
                world.log.append(("stop", world.run))


async def _stream_async(agent: Any, value: Any, config: RunnableConfig, world: World,
                        cut: int | None, pressure_text: str | None) -> bool:
    start = world.updates
    stream = agent.astream(value, config, stream_mode=["updates", "custom"])
    try:
        async for mode, chunk in stream:
            _record_stream(world, mode, chunk, pressure_text)
            if cut is not None and world.updates - start >= cut:
                world.log.append(("cut", world.run))
                return False
    finally:
        await stream.aclose()
    return True


def _stream_once(agent: Any, value: Any, config: RunnableConfig, world: World,
                 cut: int | None, pressure_text: str | None, use_async: bool) -> bool:
    """Stream a run; stop reading after ``cut`` node updates. True when it ran to its end.

    Sync streams are cut right after a node's update, between steps: nothing is lost.
    An async stream runs ahead of its reader, so a cut may cancel a step in the middle
    (the calls it was running run again on resume: the log records the cut).
    """
    if use_async:
        return asyncio.run(_stream_async(agent, value, config, world, cut, pressure_text))
    start = world.updates
    stream = agent.stream(value, config, stream_mode=["updates", "custom"])
    try:
        for mode, chunk in stream:
            _record_stream(world, mode, chunk, pressure_text)
            if cut is not None and world.updates - start >= cut:
                world.log.append(("cut", world.run))
                return False
    finally:
        stream.close()
    return True


EDITED_ARGS = {"danger": {"target": "staging"}, "wipe": {}}


def decisions_for(names: list[str], rnd: random.Random) -> list[dict[str, Any]]:
    """Random valid decisions, one per gated call (``names``: the gated calls' tools)."""
    out: list[dict[str, Any]] = []
    for name in names:
        kind = rnd.choice(["approve", "reject", "edit_same", "edit_ungated"])
        if kind == "approve":
            out.append({"type": "approve"})
        elif kind == "reject":
            out.append({"type": "reject", "message": "not now"})
        elif kind == "edit_same":
            out.append({"type": "edit", "edited_action": {"name": name,
                                                          "args": EDITED_ARGS[name]}})
        else:
            out.append({"type": "edit", "edited_action": {"name": "add", "args": {"a": 5, "b": 5}}})
    return out


def invalid_decisions(names: list[str], gated: set[str], rnd: random.Random
                      ) -> list[dict[str, Any]]:
    """Decisions the approval node must refuse: a wrong count, an unknown tool, or an
    edit that renames the call to *another* gated tool (which has no decision of its own)."""
    out = [{"type": "approve"} for _ in names]
    other = sorted(gated - {names[0]})
    bad = rnd.choice(["count", "unknown"] + (["gated"] if other else []))
    if bad == "count":
        return [*out, {"type": "approve"}]
    target = other[0] if bad == "gated" else "format_disk"
    out[0] = {"type": "edit", "edited_action": {"name": target, "args": {}}}
    return out


def resolver_for(world: World, rnd: random.Random, gated: set[str]) -> Any:
    """An ``Approval.resolver`` deciding at random (or handing over to a human)."""

    def resolver(request: dict[str, Any]) -> dict[str, Any] | None:
        if rnd.random() < 0.2:
            return None
        calls = [(i, n) for i, n in world.last_calls if n in gated]
        assert [n for _, n in calls] == [a["name"] for a in request["action_requests"]]
        decisions = decisions_for([n for _, n in calls], rnd)
        world.decisions.update(zip([i for i, _ in calls], decisions, strict=True))
        return {"decisions": decisions}

    return resolver


def _answer_interrupts(agent: Any, config: RunnableConfig, world: World, state: Any,
                       rnd: random.Random, gated: set[str]) -> Command:
    """Resume values for the pending interrupts (approval decisions, ``ask`` answers)."""
    answers: dict[str, Any] = {}
    for pending in state.interrupts:
        value = pending.value
        if isinstance(value, dict) and "action_requests" in value:
            ai = next(m for m in reversed(state.values["messages"]) if isinstance(m, AIMessage))
            calls = [c for c in ai.tool_calls if c["name"] in gated]
            decisions = decisions_for([c["name"] for c in calls], rnd)
            answers[pending.id] = ("approval", [str(c["id"]) for c in calls], decisions)
        else:
            answers[pending.id] = ("ask", None, "yes")
    resume = {k: {"decisions": v[2]} if v[0] == "approval" else v[2] for k, v in answers.items()}
    for kind, ids, decisions in answers.values():
        if kind == "approval":
            world.decisions.update(zip(ids, decisions, strict=True))
    return Command(resume=resume)


def _try_invalid(agent: Any, config: RunnableConfig, state: Any, rnd: random.Random,
                 gated: set[str], use_async: bool) -> None:
    """An invalid approval answer is a ValueError naming the problem; nothing changes."""
    approvals = [p for p in state.interrupts
                 if isinstance(p.value, dict) and "action_requests" in p.value]
    if len(state.interrupts) != 1 or not approvals:
        return
    names = [a["name"] for a in approvals[0].value["action_requests"]]
    bad = invalid_decisions(names, gated, rnd)
    before = agent.get_state(config)
    try:
        _stream_once(agent, Command(resume={"decisions": bad}), config, World(), None, None,
                     use_async)
    except ValueError as exc:
        assert "approval" in str(exc) or "decision" in str(exc), exc
    else:
        raise AssertionError("an invalid approval answer was accepted")
    after = agent.get_state(config)
    assert after.next == before.next and len(after.interrupts) == 1


def drive(agent: Any, world: World, text: str, config: RunnableConfig, rnd: random.Random, *,
          gated: set[str], pressure_text: str | None, use_async: bool) -> dict[str, Any]:
    """Run one user turn to its end; returns the final state values."""
    world.run += 1
    value: Any = {"messages": [HumanMessage(text)]}
    for _ in range(MAX_RESUMES):
        cut = rnd.choice([None, None, 1, 2, 3, 5, 8])
        finished = False
        try:
            finished = _stream_once(agent, value, config, world, cut, pressure_text, use_async)
        except (ModelDown, CallbackError) as exc:  # a clear error; the thread stays resumable
            assert str(exc), exc
        state = agent.get_state(config)
        assert_repairable(state.values["messages"])
        if state.interrupts:
            if rnd.random() < 0.3:
                _try_invalid(agent, config, state, rnd, gated, use_async)
            value = _answer_interrupts(agent, config, world, state, rnd, gated)
        elif not finished:
            # cut short or failed: ``invoke(None)`` goes on (``state.next`` may even be
            # empty when the cut came between a step's writes and its next checkpoint)
            value = None
        else:
            assert not check_pairing(state.values["messages"]), check_pairing(
                state.values["messages"])
            return dict(state.values)
    raise AssertionError(f"the run did not end after {MAX_RESUMES} resumes")


def assert_repairable(messages: list[Any]) -> None:
    """Mid-run the thread is provider-valid except that the newest AIMessage's calls may
    still wait for their ToolMessages (they are answered, or repaired by the next run)."""
    pending = newest_reply(messages).pending
    answers = [ToolMessage("pending", tool_call_id=i) for i in pending]
    assert not check_pairing([*messages, *answers]), check_pairing(messages)


def check_requests(models: list[ScriptedChatModel]) -> None:
    """Every request any model received is provider-valid."""
    for model in models:
        for i, request in enumerate(model.requests):
            assert not check_pairing(request), (model, i, check_pairing(request))


def _check_notices(world: World, run: int) -> None:
    delivered = [text for r, text in world.delivered if r == run]
    counts: Counter[str] = Counter()
    for text in delivered:
        rest = text
        for queued in sorted(world.queued[run], key=len, reverse=True):
            if queued in rest:
                counts[queued] += rest.count(queued)
                rest = rest.replace(queued, "")
        stops = STOP_TEXT.findall(rest)
        counts["<stop>"] += len(stops)
        rest = STOP_TEXT.sub("", rest)
        assert not rest.strip(), f"run {run} delivered a notice it never queued: {rest!r}"
    for queued, n in counts.items():
        limit = 1 if queued == "<stop>" else world.queued[run][queued]
        assert n <= limit, f"notice delivered {n} times, queued {limit}: {queued!r}"


def _check_once(world: World) -> None:
    """No call runs twice, unless a cut cancelled the step that ran it (async only)."""
    last: dict[str, int] = {}
    for position, entry in enumerate(world.log):
        if entry[0] != "tool":
            continue
        call_id = entry[2]
        if call_id in last:
            between = world.log[last[call_id]:position]
            assert world.use_async and ("cut", entry[1]) in between, (
                f"tool call {call_id} was executed twice")
        last[call_id] = position


def check_run(world: World, run: int, values: dict[str, Any], *, cap: int | None,
              gated: set[str]) -> None:
    """The invariants of one finished run."""
    assert values["stop_reason"] is not None
    assert values["loop_notices"] == []
    mine = [(name, call_id) for r, name, call_id in world.executions if r == run]
    stopped = False
    for entry in world.log:
        if entry[1] != run:
            continue
        stopped = stopped or entry[0] == "stop"
        assert not (stopped and entry[0] == "tool"), f"a tool ran after the stop: {entry}"
    _check_once(world)
    for name, call_id in mine:
        assert name in world.offered[call_id], (name, world.offered[call_id])
        if name in gated:
            decision = world.decisions[call_id]
            assert decision["type"] in ("approve", "edit"), decision
            if decision["type"] == "edit":
                assert decision["edited_action"]["name"] == name
    by_id = {m.tool_call_id: m for m in values["messages"] if isinstance(m, ToolMessage)}
    for _, call_id in mine:
        if call_id in by_id:
            content = str(by_id[call_id].content)
            assert not any(r in content for r in REFUSALS), content
    records = [c for r in values["iterations"] for c in r["tool_calls"]]
    ran = sum(c["status"] in ("success", "error") for c in records)  # invalid args count too
    assert cap is None or ran <= cap, (cap, records)
    assert executed_calls(values) == ran, (values.get("run"), records)
    assert len({i for _, i in mine}) <= ran, (records, mine)
    spent = sum(world.replies[run]) + sum(world.summaries[run])  # compaction counts too
    assert values["usage"]["total_tokens"] == spent, (values["usage"], world.replies[run],
                                                      world.summaries[run])
    model_calls = [r["model_calls"] for r in values["iterations"]]
    assert sum(model_calls) == len(world.replies[run]), (model_calls, world.replies[run])
    assert len(values["iterations"]) == values["iteration"], values["iterations"]
    _check_notices(world, run)
