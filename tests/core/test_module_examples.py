"""The examples that opened the internal ``core`` modules' docstrings, as tests (the public
modules, ``engine``'s pure decisions and the middleware keep theirs as doctests)."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.prebuilt import ToolCallTransformer
from pydantic import BaseModel

from langgraph_loop import Limits, LoopDetection, Repeat, StopReason
from langgraph_loop.core.callbacks import call_sync
from langgraph_loop.core.compat import checkpointer, durable, resuming
from langgraph_loop.core.drive import Io, Steps, adrive, aperform, drive, perform
from langgraph_loop.core.hosting import NODE_HOOKS
from langgraph_loop.core.messages import check_pairing, drain, is_notice, queue_notice
from langgraph_loop.core.models import chat_models, map_chat_models, resolve_model
from langgraph_loop.core.overrides import merged
from langgraph_loop.core.prompts import CONTINUE, UNKNOWN_TOOL
from langgraph_loop.core.removed import removed_context, removed_keyword
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.shape import Shape
from langgraph_loop.core.state import LoopContext
from langgraph_loop.core.stop import limit_guard, stop_answer_text, stop_update
from langgraph_loop.core.streams import stream_transformers
from langgraph_loop.core.structured import resolve_response_format
from langgraph_loop.core.upgrade import translated
from langgraph_loop.scripted import ScriptedChatModel


def test_a_callback_runs_the_same_whether_it_is_sync_or_async() -> None:
    async def later(x: int) -> int:
        return x + 1

    assert call_sync(later, 1) == 2
    assert call_sync(lambda x: x * 2, 4) == 8


def test_a_config_without_a_checkpointer_is_neither_durable_nor_resuming() -> None:
    assert (durable({"configurable": {}}), resuming({"configurable": {}}), durable(None)) == (
        False, False, False)
    assert checkpointer({"configurable": {}}) is None


def test_configuration_models_switch_on_what_is_given_and_name_the_field_they_refuse() -> None:
    given = LoopDetection(repeat=Repeat(warn_after=2, stop_after=4))
    assert given.layers == ("no_progress", "repeat", "same_reply", "per_tool", "text")
    limits = Limits(token_budget=10_000, budget_pressure={"threshold": 0.7})
    assert limits.budget_pressure is not None and limits.budget_pressure.threshold == 0.7
    with pytest.raises(ValueError, match="stop_after"):
        LoopDetection(repeat=Repeat(warn_after=5, stop_after=3))


def test_one_generator_is_driven_sync_and_async_with_the_same_result() -> None:
    def double(x: int) -> int:
        return 2 * x

    async def adouble(x: int) -> int:
        return 2 * x

    def work() -> Steps[int]:
        a = yield Io(double, adouble, (3,))
        return a + 1

    assert (drive(work(), perform), asyncio.run(adrive(work(), aperform))) == (7, 7)


def test_the_node_hooks_are_create_agents_in_its_order() -> None:
    assert NODE_HOOKS == ("before_agent", "before_model", "after_model", "after_agent")


def test_pairing_is_checked_and_a_notice_queued_twice_is_sent_once() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert check_pairing([HumanMessage("hi"), ai, ToolMessage("ok", tool_call_id="c1")]) == []
    assert check_pairing([HumanMessage("hi"), ai, HumanMessage("warn")])[0] == (
        "message 1: tool calls ['c1'] not answered before message 2 (human)")
    q = queue_notice([], run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    q = queue_notice(q, run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    message = drain(q, run="r1")
    assert (len(q), message.name, message.content, is_notice(message)) == (
        1, "loop_notice", "Stop repeating search.", True)


def test_the_chat_models_inside_a_retry_and_fallbacks_are_found_and_mapped_in_place() -> None:
    primary, backup = ScriptedChatModel(script=["a"]), ScriptedChatModel(script=["b"])
    model = resolve_model(primary.with_retry().with_fallbacks([backup]))
    assert chat_models(model) == [primary, backup]
    bound = map_chat_models(model, lambda chat: chat.bind(max_tokens=5))
    assert type(bound.runnable).__name__ == "RunnableRetry"  # the retry is kept
    assert bound.runnable.bound.kwargs == {"max_tokens": 5}


def test_a_run_override_is_merged_into_its_group() -> None:
    assert merged("limits", Limits(max_tool_calls=3), {"token_budget": 900}).token_budget == 900


def test_fixed_texts_read_as_the_model_sees_them() -> None:
    assert CONTINUE == "Continue working on the task. If it is complete, say so."
    assert UNKNOWN_TOOL.format(name="'zz'", available="a") == "Error: unknown tool 'zz'. Available tools: a."


def test_a_removed_name_says_what_to_write_instead() -> None:
    assert str(removed_keyword(["max_iterations"])) == (
        "create_loop_agent(max_iterations=...) was removed in 0.4: use iterations=Iterations(max=...)")
    assert str(removed_context("max_tool_calls")) == (
        "invalid run context: 'max_tool_calls' was removed in 0.4: use "
        '{"limits": {"max_tool_calls": ...}}')


def test_a_runs_overrides_reach_the_groups_of_its_settings() -> None:
    run = LoopSettings.build(ScriptedChatModel(script=[])).for_run(
        {"iterations": {"max": 3}, "limits": {"max_tool_calls": 7}})
    assert (run.iterations.max, run.limits.max_tool_calls) == (3, 7)


def test_the_graphs_shape_gives_its_entry_and_its_step_budget() -> None:
    shape = Shape()
    assert (shape.entry, shape.iteration_end, shape.finish_steps) == ("model", "router", 3)
    assert (shape.can_continue_round(7, gated=False), shape.can_continue_round(6, gated=False)) == (
        True, False)
    assert shape.recursion_limit(max_model_calls=25, max_iterations=10) == 793


def test_a_run_context_takes_the_three_groups() -> None:
    context: LoopContext = {"iterations": {"max": 3}, "limits": {"budget_pressure": {"threshold": 0.5}}}
    assert context["iterations"] == {"max": 3}
    assert sorted(LoopContext.__annotations__) == ["iterations", "limits", "loop_detection"]


def test_a_limit_stop_writes_its_record_and_the_answer_to_an_unrun_call() -> None:
    guard = limit_guard(StopReason.MAX_TOOL_CALLS, 2, 2)
    update = stop_update({"id": "r1"}, guard)
    assert (update["stop_reason"], update["stop_guard"]["limit"]) == ("max_tool_calls", 2)
    assert stop_answer_text(guard) == (
        "Error: not executed: the run was stopped because the tool-call limit of this run was reached.")


def test_the_tool_call_stream_transformer_is_langgraphs() -> None:
    assert stream_transformers([], None)[0] is ToolCallTransformer


class Weather(BaseModel):
    city: str


def test_a_pydantic_response_format_becomes_a_forced_tool_strategy() -> None:
    out = resolve_response_format(Weather, ScriptedChatModel(), [])
    assert (type(out.strategy).__name__, sorted(out.tool_names), out.forced_choice) == (
        "ToolStrategy", ["Weather"], "Weather")


def test_a_notice_stored_by_an_older_version_is_read_in_the_current_shape() -> None:
    old = HumanMessage("Stop repeating search.", name="loop_warning", id="n1")
    (new,) = translated([HumanMessage("hi", id="h"), old])
    assert (new.id, new.name, new.content, new.additional_kwargs["lc_source"]) == (
        "n1", "loop_notice", "Stop repeating search.", "langgraph_loop")
