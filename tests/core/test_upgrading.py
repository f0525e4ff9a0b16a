"""Upgrading from 0.2 (issue 43.10), as 0.4 leaves it: each old spelling is an error naming a
replacement that works when followed literally, never a warning that can be hidden or repeated,
and no old keyword is dropped without a word."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_loop import Iterations, StopReason, create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel


def replacement(error: BaseException) -> str:
    """What the error says to write instead (after ``: use ``)."""
    return str(error).split(": use ", 1)[1].split("; ", 1)[0]


def test_the_prompt_factory_error_names_a_continuation_that_runs_when_followed_literally() -> None:
    model = ScriptedChatModel(script=[AIMessage("Draft."), AIMessage("Checked.")])
    with pytest.raises(TypeError) as caught:
        create_loop_agent(model, prompt_factory=lambda state: "Check your answer once more.")
    keyword, expression = replacement(caught.value).split("=", 1)
    assert (keyword, expression) == ("iterations", "Iterations(continuation=lambda state, feedback: ...)")
    # the expression as written, with the old callback's text where it says "..."
    written = eval(expression.replace("...", repr("Check your answer once more.")),
                   {"Iterations": Iterations})
    again = written.model_copy(update={"should_continue": lambda state: state["iteration"] < 2})
    state = create_loop_agent(model, **{keyword: again}).invoke({"messages": [HumanMessage("Write.")]})
    sent = [m.content for m in state["messages"]]
    assert sent[:2] == ["Write.", "Draft."] and sent[3:] == ["Checked."]
    assert sent[2].endswith("\n\nCheck your answer once more.")  # after the progress (inject_progress)
    assert state["stop_reason"] == StopReason.COMPLETED and state["iteration"] == 2


def test_next_message_beside_prompt_factory_is_named_with_what_to_do_with_both() -> None:
    with pytest.raises(TypeError) as caught:
        create_loop_agent(ScriptedChatModel(script=[]), next_message=lambda state, feedback: None,
                          prompt_factory=lambda state: "Go on.")
    assert str(caught.value).split("; ") == [
        "create_loop_agent(next_message=...) was removed in 0.4: use iterations=Iterations(continuation=...)",
        "create_loop_agent(prompt_factory=...) was removed in 0.4: use "
        "iterations=Iterations(continuation=lambda state, feedback: ...)",
        "next_message and prompt_factory both become the one continuation: write one callback "
        "(state, feedback) -> str | None that does what both did"]


@pytest.mark.parametrize("action", ["ignore", "default"])
def test_an_old_flat_context_name_fails_once_whatever_the_warning_filters(action: Any) -> None:
    """0.3 warned (hidden under a plain ``python app.py``, shown twice per invoke); 0.4 raises,
    once, and the nested spelling it names runs when followed literally."""
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[
        {"name": "ping", "args": {}, "id": f"c{i}"}]) for i in range(3)] + [AIMessage("done")],
        no_tools_reply="Stopped.")

    def ping() -> str:
        """Ping."""
        return "pong"

    agent = create_loop_agent(model, [ping])
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter(action)
        with pytest.raises(ValueError) as caught:
            agent.invoke({"messages": [HumanMessage("go")]}, context={"max_tool_calls": 2})
    assert shown == [] and model.calls == 0
    nested = json.loads(replacement(caught.value).replace("...", "2"))
    state = agent.invoke({"messages": [HumanMessage("go")]}, context=nested)
    assert state["stop_reason"] == StopReason.MAX_TOOL_CALLS
