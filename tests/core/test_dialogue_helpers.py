"""The internal helpers of ``graph/engine/dialogue.py``, as their docstring examples showed them.

These were doctests; they moved here (same assertions) so that the module's docstring keeps
the contract and one runnable example (issue 38).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langgraph_loop.core.messages import is_redirect
from langgraph_loop.engine.detection import Finding
from langgraph_loop.engine.dialogue import parse_answer, question, typed_instead


def test_the_loop_question_names_the_tools_and_says_what_was_repeated() -> None:
    finding = Finding(layer="no_progress", rung="stop", key="call:x", count=5, threshold=5,
                      tool="search", seen=5, calls=('search({"q": "x"})',))
    asked = question({"guard": "loop_detector", "reason": "loop_detected"}, finding, ["no hits"])
    action = asked["action_requests"][0]
    assert (action["name"], action["args"], action["description"].splitlines()[0][:52]) \
        == ("Loop detected: search", {"hint": ""}, 'The agent is repeating itself: it asked for search({')


def test_a_message_typed_at_the_question_replaces_the_placeholder_and_is_a_redirect() -> None:
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a")
    placeholder = ToolMessage("Successfully handled tool call.", tool_call_id="c1", id="do-not-render-1")
    writes = typed_instead([ai, placeholder, HumanMessage("go on", id="h")])
    assert writes is not None
    assert [(m.id, getattr(m, "status", None)) for m in writes[:1]] == [("do-not-render-1", "error")]
    assert is_redirect(writes[-1])


def test_an_answer_is_read_as_an_action_and_its_text() -> None:
    """The module's former doctest."""
    assert parse_answer({"decisions": [{"type": "edit", "edited_action": {
        "name": "Loop detected: search", "args": {"hint": "Use the cached copy."}}}]}) == (
        "hint", "Use the cached copy.")
    assert parse_answer({"decisions": [{"type": "reject", "message": "Enough."}]}) == ("stop", "Enough.")
