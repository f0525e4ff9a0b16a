"""The internal helpers of ``graph/core``, as their docstring examples showed them.

These were doctests; they moved here (same assertions) so that the modules' docstrings keep the
contract and one runnable example each (issue 38).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from langchain.agents import AgentState
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from pydantic import BaseModel

from langgraph_loop.core.config import ArgPolicy, Iterations, Limits, LoopDetection, tool_policy
from langgraph_loop.core.hosting import check_middleware, check_state_schema, overrides_hook
from langgraph_loop.core.messages import (
    REDIRECT_KIND,
    as_redirect,
    call_label,
    cap_output,
    clip,
    digest,
    drain,
    encodable,
    encodable_text,
    is_notice,
    is_redirect,
    notice_name,
    queue_notice,
    reply_text,
    run_request,
    shorten,
    with_unique_call_ids,
)
from langgraph_loop.core.overrides import checked_groups, context_type, run_overrides
from langgraph_loop.core.settings import LoopSettings, split_provider_tools
from langgraph_loop.core.shape import Shape
from langgraph_loop.core.stop import StopReason, guard, person_stop, stop_answer_text
from langgraph_loop.core.structured import ProviderStrategy, resolve_response_format
from langgraph_loop.scripted import ScriptedChatModel, _usable_tools
from langgraph_loop.todos import todos_remaining

# --- core/config.py --------------------------------------------------------------------------

def test_the_configuration_models_keep_what_they_are_given() -> None:
    assert Iterations(max=3, max_model_calls=5).max_model_calls == 5
    assert Limits(max_tool_calls=20).max_tool_calls == 20


def test_tool_hints_add_the_read_only_tools_and_the_policies_the_metadata_declares() -> None:
    lookup = StructuredTool.from_function(
        lambda key: key, name="lookup", description="Read a record.",
        metadata={"readOnlyHint": True, "loop_key": ["key"], "loop_stop_after": 5})
    cfg = LoopDetection().with_tool_hints([lookup])
    assert (cfg.calls.read_only_tools, cfg.calls.arg_policies["lookup"].stop_after) == (("lookup",), 5)


def test_a_tools_metadata_declares_its_policy_or_none() -> None:
    policy = tool_policy({"loop_key": ["path"], "loop_stop_after": 5})
    assert policy == ArgPolicy(keep=("path",), stop_after=5)
    assert repr(policy) == (
        "ArgPolicy(ignore=(), keep=('path',), key=None, warn_after=None, stop_after=5, polls=False)")
    assert tool_policy({"title": "Read"}) is None


# --- core/messages.py ------------------------------------------------------------------------

def test_text_helpers_shorten_clip_digest_and_label_calls() -> None:
    assert shorten("a   lot\n of   space", 10) == "a lot of …"
    assert (clip("abcdef", 4), len(digest("x"))) == ("abc…", 16)
    assert call_label("search", {"q": "café"}) == 'search({"q": "café"})'
    assert call_label("f", '{"a":1}') == 'f({"a":1})'


def test_repeated_call_ids_get_fresh_ones_and_a_reply_without_calls_is_kept() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "d"},
                                   {"name": "f", "args": {"x": 1}, "id": "d"}])
    ids = [c["id"] for c in with_unique_call_ids(ai).tool_calls]
    assert (ids[0], ids[1] != "d", with_unique_call_ids(AIMessage("hi")).content) == ("d", True, "hi")


def test_a_drained_notice_is_hidden_unless_asked_and_other_runs_notices_are_dropped() -> None:
    q = queue_notice([], run="r1", key="sig:abc", text="Stop repeating search.", source="loop")
    message = drain(q, run="r1")
    assert message is not None and message.id is not None
    assert message.id.startswith("do-not-render-")
    assert drain(q, run="r1", hidden=False).id is None  # type: ignore[union-attr]
    assert drain(queue_notice([], run="old", key="k", text="t", source="s"), run="r2") is None


def test_a_notice_is_found_by_its_name_and_a_continuation_is_no_notice() -> None:
    assert is_notice(HumanMessage("Stop repeating.", name="loop_notice"))
    assert not is_notice(HumanMessage("hi"))
    assert not is_notice(HumanMessage("go on", name="loop_continue"))


def test_a_merged_notice_is_named_by_its_highest_ranked_source() -> None:
    assert notice_name(["loop"]) == "loop_notice"
    assert notice_name(["human"]) == "loop_notice"
    assert notice_name(["loop", "budget_pressure"]) == "budget_notice"
    assert notice_name(["budget_pressure", "stop", "loop"]) == "stop_notice"


def test_a_redirect_keeps_its_id_and_is_no_runs_request() -> None:
    assert is_redirect(as_redirect(HumanMessage("go on", id="h")))
    assert as_redirect(HumanMessage("x", id="h")).id == "h"
    redirect = HumanMessage("wrap up", additional_kwargs={"langgraph_loop": {"kind": REDIRECT_KIND}})
    notice = HumanMessage("note", additional_kwargs={"lc_source": "langgraph_loop"})
    assert run_request([HumanMessage("go", id="h1"), notice, redirect]) == (0, "h1")
    assert run_request([]) == (0, None)


def test_digest_uses_one_prefix_for_every_length_and_a_long_text_hashes_to_40() -> None:
    assert digest("x") == digest("x", 40)[:16]
    assert len(digest("y" * 5000, 40)) == 40


def test_lone_surrogates_are_escaped_in_text_and_in_tool_call_arguments() -> None:
    assert encodable_text("report\udcff.txt") == "report\\udcff.txt"
    assert encodable_text("ok") == "ok"
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {"n": "caf\udce9"}, "id": "c"}])
    assert encodable(ai).tool_calls[0]["args"] == {"n": "caf\\udce9"}
    assert encodable(ai) is not ai


def test_a_replys_text_includes_its_reasoning_blocks() -> None:
    assert reply_text([{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}]) == "hm\nok"


def test_content_blocks_are_cut_to_the_limit_with_a_note() -> None:
    assert [len(b["text"]) for b in cap_output([{"type": "text", "text": "x" * 300}], 100)] == [100, 59]


# --- core/settings.py ------------------------------------------------------------------------

def test_a_misspelled_override_names_the_groups_fields() -> None:
    settings = LoopSettings.build(ScriptedChatModel(script=[]))
    with pytest.raises(ValueError) as caught:
        settings.for_run({"limits": {"final_answr": False}})
    expected = "invalid run context: limits.final_answr: unknown field (fields of Limits:"
    assert str(caught.value)[:73] == expected


def test_provider_side_tool_dicts_are_split_from_the_tools_the_graph_runs() -> None:
    assert split_provider_tools([len, {"type": "web_search"}]) == ([len], ({"type": "web_search"},))


# --- core/shape.py ---------------------------------------------------------------------------

def test_middleware_hooks_move_the_entry_and_the_reply_node_and_count_in_the_step_budget() -> None:
    hooked = Shape(before_model=("pii.before_model",), after_model=("pii.after_model",),
                   jumps=(("pii.after_model", ("end",)),))
    assert (hooked.entry, hooked.reply_node, hooked.model_steps, hooked.finish_steps) == (
        "pii.before_model", "pii.after_model", 3, 5)
    assert hooked.model_targets == ["loop_detector", "middleware_end", "router", "tools"]
    assert Shape(judge=True, approval=True).model_targets == [
        "approval", "judge", "loop_detector", "router", "tools"]


def test_respond_may_go_where_the_loop_detector_goes_but_to_itself() -> None:
    shape = Shape(respond=True, approval=True, judge=True)
    assert shape.respond_targets == ["approval", "judge", "model", "router", "tools"]
    assert Shape(respond=True).respond_targets == ["model", "router", "tools"]


# --- core/overrides.py -----------------------------------------------------------------------

@dataclass
class Ctx:
    user_id: str


def test_the_context_type_declares_the_groups_beside_the_users_fields() -> None:
    made = context_type(Ctx)(user_id="u", limits={"max_tool_calls": 2})
    assert isinstance(made, Ctx)
    assert made.limits == {"max_tool_calls": 2}  # type: ignore[attr-defined]


def test_a_flat_context_name_of_0_2_names_its_nested_spelling() -> None:
    with pytest.raises(ValueError) as caught:
        checked_groups({"max_tool_calls": 2})
    assert str(caught.value) == ("invalid run context: 'max_tool_calls' was removed in 0.4: use "
                                 '{"limits": {"max_tool_calls": ...}}')


def test_the_overrides_of_a_user_context_are_its_groups_only() -> None:
    assert run_overrides(Ctx("u"), Ctx) is None
    assert run_overrides({"user_id": "u", "limits": {}}, Ctx) == {"limits": {}}


# --- core/hosting.py -------------------------------------------------------------------------

class Mine(AgentState):
    usage: int


def test_a_schema_that_redeclares_a_key_the_loop_owns_is_refused_naming_it() -> None:
    with pytest.raises(ValueError) as caught:
        check_state_schema(Mine, "middleware M")
    expected = "middleware M: state_schema Mine declares ['usage'], keys the loop owns ("
    assert str(caught.value).startswith(expected)


def test_a_hook_is_implemented_when_the_class_overrides_it() -> None:
    m = ModelRetryMiddleware()
    assert (overrides_hook(m, "wrap_model_call"), overrides_hook(m, "before_model")) == (True, False)


def test_two_middleware_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError) as caught:
        check_middleware([ModelRetryMiddleware(), ModelRetryMiddleware()])
    assert str(caught.value) == ("middleware: please remove duplicate middleware instances "
                                 "(names: ['ModelRetryMiddleware'])")


# --- core/stop.py ----------------------------------------------------------------------------

def test_a_guard_holds_the_reasons_value_and_a_person_stop_their_reason() -> None:
    assert guard("hooks", StopReason.TERMINATED) == {"guard": "hooks", "reason": "terminated"}
    assert person_stop(None) == {"action": "stop"}
    assert person_stop("Enough.") == {"action": "stop", "message": "Enough."}


def test_the_answer_to_a_call_a_person_stopped_says_a_person_chose_it() -> None:
    text = stop_answer_text({"guard": "loop_detector", "reason": "loop_detected",
                             "human": {"action": "stop"}})
    assert text.removeprefix("Error: not executed: the run was stopped because ") == (
        "a person supervising this run chose to stop it (a runaway tool loop was detected).")


# --- core/structured.py ----------------------------------------------------------------------

class Weather(BaseModel):
    city: str


def test_a_provider_strategy_is_native() -> None:
    assert resolve_response_format(ProviderStrategy(Weather), ScriptedChatModel(), []).native  # type: ignore[union-attr]


# --- scripted.py -----------------------------------------------------------------------------

def test_tool_choice_decides_which_tools_a_request_lets_the_model_call() -> None:
    assert _usable_tools(["a", "b"], "none") == []
    assert _usable_tools(["a", "b"], "b") == ["b"]
    assert _usable_tools(["a"], "any") == ["a"]


# --- todos.py --------------------------------------------------------------------------------

def test_todos_remaining_says_stop_in_a_mode_it_was_not_given() -> None:
    keep_going = todos_remaining(modes=["execute"])
    assert keep_going({"mode": "plan", "todos": [{"content": "a", "status": "pending"}]}) is False
