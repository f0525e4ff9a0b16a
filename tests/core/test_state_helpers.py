"""The state module's record helpers (``core/state.py``), once their doctests."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from langgraph_loop.core.state import (
    add_usage,
    build_record,
    emit,
    executed_calls,
    iteration_info,
    latest_answer,
    new_iteration,
    new_usage,
    show_messages,
    usage_of,
)


def test_usage_of_flattens_cached_tokens() -> None:
    message = AIMessage("hi", usage_metadata={"input_tokens": 4, "output_tokens": 1, "total_tokens": 5,
                                              "input_token_details": {"cache_read": 2}})
    assert usage_of(message)["cached_tokens"] == 2  # type: ignore[index]


def test_latest_answer_falls_back_to_the_structured_response() -> None:
    state = {"messages": [AIMessage("")], "structured_response": {"city": "Oslo"}}
    assert latest_answer(state) == '{"city": "Oslo"}'


def test_executed_calls_reads_the_newest_log_entry() -> None:
    assert executed_calls({"call_log": [{"executed": 3}]}) == 3
    assert executed_calls({}) == 0


def test_emit_and_show_messages_outside_a_run_do_nothing() -> None:
    assert emit(None, {"event": "iteration_start", "iteration": 1}) is None
    assert show_messages({}, []) is None


def test_iteration_info_reads_the_state_key() -> None:
    assert iteration_info({"iteration_info": {"model_calls": 1}}) == {"model_calls": 1}


def test_usage_iteration_and_record_helpers() -> None:
    assert add_usage(new_usage(), {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}) == \
        {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    info = new_iteration("m1", now=100.0)
    assert (info["model_calls"], info["start_id"]) == (0, "m1")
    assert build_record(iteration=1, info=info, calls=[], now=101.5)["duration_s"] == 1.5
