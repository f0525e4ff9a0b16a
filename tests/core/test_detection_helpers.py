"""The engine's internal helpers (``graph/engine/``: detection, decision, final, text_loop,
normalize; and ``nodes/stall.py``), case by case."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from langgraph_loop.core.config import Limits, LoopDetection
from langgraph_loop.engine.decision import (
    Decision,
    Policy,
    RunView,
    block_answers,
    limit_stop,
    results_before,
    stop_answers,
)
from langgraph_loop.engine.detection import (
    CallRecord,
    Finding,
    LoopWarning,
    _done_something,
    _drifted,
    args_text,
    block_text,
    canonical_args,
    cycle_of,
    is_empty,
    path_keys,
    response_signature,
    result_text,
    same_result,
    scaled,
    sign_calls,
    stop_guard,
)
from langgraph_loop.engine.final import final_answer, without_tool_calls
from langgraph_loop.engine.normalize import normalize
from langgraph_loop.engine.text_loop import TextLoop, line_kind
from langgraph_loop.nodes.stall import new_work_by_iteration


def test_result_text_is_a_string_as_it_is_and_blocks_as_json_without_ids() -> None:
    assert result_text("ok") == "ok"
    assert result_text([{"type": "text", "text": "ok", "id": "b1"}]) == '[{"text": "ok", "type": "text"}]'


def test_results_are_the_same_once_their_volatile_parts_are_normalized() -> None:
    assert same_result("Ran 4 tests in 0.012s", "Ran 4 tests in 0.398s")
    assert not same_result("Ran 4 tests in 0.012s", "Ran 4 tests in 0.398s", normalized=False)
    assert not same_result("1 passed\nok", "1 passed")
    assert same_result("a", "a", normalized=False)


def test_is_empty_sees_only_markup_whitespace_and_a_zero_exit_status() -> None:
    assert is_empty("<returncode>0</returncode>\n<output>\n</output>") and is_empty("  ")
    assert is_empty([])
    assert not is_empty("<returncode>1</returncode>") and not is_empty("ok")


def test_path_keys_hash_the_paths_and_their_folders() -> None:
    paths, dirs = path_keys({"command": "cat build/text/index.txt"})
    assert (len(paths), len(dirs)) == (1, 2)
    assert path_keys({"command": "rm -rf build/text"})[0][0] in dirs
    assert path_keys({"command": "ls -la"}) == ((), ())


def test_canonical_args_parse_a_json_string_and_keep_anything_else() -> None:
    assert canonical_args('{"b": 1, "a": 2}') == {"b": 1, "a": 2}
    assert canonical_args("not json") == "not json"


def test_args_text_is_short_compact_json_or_says_the_json_is_invalid() -> None:
    assert args_text('{"b": 1, "a": 2}') == '{"a":2,"b":1}'
    assert args_text("{oops", malformed=True) == "<invalid JSON arguments: {oops>"


def test_response_signature_ignores_the_order_of_parallel_calls() -> None:
    assert response_signature(["b", "a"]) == response_signature(["a", "b"])


def test_sign_calls_signs_valid_then_malformed_calls() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "1"}],
                   invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "2",
                                        "error": "bad json", "type": "invalid_tool_call"}])
    assert [(c.name, c.malformed) for c in sign_calls(ai)] == [("f", False), ("f", True)]


def test_done_something_is_the_first_new_or_empty_result_of_a_new_call() -> None:
    cfg = LoopDetection()
    seen = {"s": CallRecord(tool="t", result="done")}
    assert [_done_something({"tool": "t"}, text, text, seen, cfg)
            for text in ("", "new", "done")] == [True, True, False]
    assert not _done_something({"tool": "t", "result": "x"}, "", "", seen, cfg)


def test_drift_grows_while_the_same_result_comes_back_to_changed_arguments() -> None:
    none, cfg = "no matches", LoopDetection()
    entry = _drifted(None, none, "s1", "grep -n foo a.py", 3, cfg)
    entry = _drifted(entry, none, "s2", "grep -n foo a.py b.py", 4, cfg)
    assert _drifted(entry, none, "s3", "grep -rn foo .", 5, cfg)[2] == 3
    assert _drifted(entry, "1 match", "s3", "grep x", 5, cfg)[2] == 1


def test_scaled_thresholds_are_factor_times_higher_and_capped() -> None:
    assert (scaled(3, 5, 3, 20), scaled(3, 5, 3, 10), scaled(3, 5, 1, 20)) == ((9, 15), (9, 10), (3, 5))


def test_cycle_of_finds_the_repeating_block_a_sequence_ends_in() -> None:
    assert [cycle_of(s) for s in ("ABABA", "XABCABC", "AAAA", "ABCD")] == [(2, 3), (3, 2), (0, 0), (0, 0)]


def test_a_no_progress_stop_guard_and_block_text() -> None:
    f = Finding(layer="no_progress", rung="stop", key="call:ab", count=3, threshold=3,
                sigs=("ab",), tool="test", args="{}", calls=("test({})",), seen=4, since=2)
    g = stop_guard(f)
    assert (g["layer"], g["rung"], g["began"]) == ("no_progress", "stop", {"response": 2})
    assert "returning the same result 3 times" in g["detail"]
    assert block_text(f).startswith("Error: not run: test({}) returned the same result the last 3")


# --- engine/decision.py, engine/final.py, engine/text_loop.py, engine/normalize.py, nodes/stall.py


def test_limit_stop_names_the_budget_it_went_over() -> None:
    stop = limit_stop(AIMessage("hi"), [], RunView(spent=120, budget=100),
                      Policy(limits=Limits(token_budget=100)))
    assert stop is not None and (stop["reason"], stop["limit"], stop["value"]) == ("token_budget", 100, 120)


def test_results_before_are_the_tool_messages_after_the_last_reply() -> None:
    msgs = [AIMessage("a"), ToolMessage("r", tool_call_id="c"), AIMessage("b")]
    assert [m.content for m in results_before(msgs, 2)] == ["r"]


def test_block_and_stop_answers_are_error_tool_messages_per_call() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert [(m.status, m.name) for m in block_answers(ai, {"c1": "Error: not run"})] == [("error", "f")]
    assert [m.status for m in stop_answers(ai, {"guard": "limits", "reason": "loop_detected"})] == ["error"]


def test_a_decision_round_trips_through_its_record() -> None:
    d = Decision(AIMessage("x"), warnings=(LoopWarning("k", "text", "t", (), 1),))
    assert Decision.of(AIMessage("x"), d.record()) == d


def test_without_tool_calls_drops_the_providers_own_record_of_them() -> None:
    ai = AIMessage("done", additional_kwargs={"function_call": {"name": "f"}},
                   response_metadata={"finish_reason": "function_call"})
    final = without_tool_calls(ai)
    assert (final.additional_kwargs, final.response_metadata["finish_reason"]) == ({}, "stop")


def test_a_final_answer_of_only_calls_says_why_there_is_no_answer() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    assert final_answer(ai, "timeout").content[:42] == "(No answer: the run stopped (timeout) and "


def test_line_kind_tells_rules_rows_items_heads_and_prose_apart() -> None:
    lines = ("|---|:--:|", "| AA1 | $99 |", "JFK,LAX,99,no", "12. Go", "## Fares", "Wait, I see.", "")
    assert [line_kind(x) for x in lines] == ["rule", "row", "row", "item", "head", "prose", "prose"]


def test_text_loop_catches_repeated_prose_but_not_a_list_of_different_items() -> None:
    loop, items = TextLoop(), TextLoop()
    assert any(loop.add("I will fix the typo now. ") for _ in range(30))
    assert not any(items.add(f"- item {i} of the list, each one different\n") for i in range(30))


def test_normalize_replaces_the_shells_line_counter() -> None:
    assert normalize("/bin/bash: line 36191: javac: command not found") == \
        "/bin/sh: line <n>: javac: command not found"


def test_new_work_is_a_call_with_a_result_no_earlier_iteration_had() -> None:
    log: Any = [{"name": "s", "args": {"q": 1}, "status": "success", "iteration": i, "result_hash": h}
                for i, h in ((1, "a"), (2, "a"), (3, "b"))]
    assert new_work_by_iteration(log) == {1: True, 2: False, 3: True}
