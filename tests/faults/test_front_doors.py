"""One validation for every front door (issue 31.6): the detector's per-tool settings name the
graph's tools, checked when the graph is built, in ``Approval``'s words, whether the settings
come as a ``LoopDetection`` or a dict; an unknown ``context`` key is the same ``ValueError``
in-process as the one LangGraph Server answers (``tests/ecosystem/test_langgraph_server.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langgraph_loop import Calls, LoopDetection, create_loop_agent
from langgraph_loop.app.server import GRAPH_ID, context_problem, run_contexts
from langgraph_loop.app.server import graph as served
from langgraph_loop.scripted import ScriptedChatModel
from tests.helpers import add, boom

TYPOS: list[tuple[dict[str, Any], str]] = [
    ({"calls": {"per_tool": {"ad": 3}}},
     "loop_detection.calls.per_tool: unknown tools ['ad']; known: ['add', 'boom']"),
    ({"calls": {"arg_policies": {"bom": {"stop_after": 4}}}},
     "loop_detection.calls.arg_policies: unknown tools ['bom']; known: ['add', 'boom']"),
    ({"calls": {"read_only_tools": ["add", "lookup"]}},
     "loop_detection.calls.read_only_tools: unknown tools ['lookup']; known: ['add', 'boom']"),
]


@pytest.mark.parametrize(("fields", "error"), TYPOS)
@pytest.mark.parametrize("given_as", ["model", "dict"])
def test_a_tool_name_the_graph_does_not_have_is_refused_at_build_time(
        fields: dict[str, Any], error: str, given_as: str) -> None:
    detection: Any = LoopDetection(**fields) if given_as == "model" else fields
    with pytest.raises(ValueError) as caught:
        create_loop_agent(ScriptedChatModel(), [add, boom], loop_detection=detection)
    assert str(caught.value) == error


def test_the_wildcard_policy_and_known_names_are_accepted() -> None:
    policies = {"*": {"stop_after": 4}, "boom": {"stop_after": 4}}
    create_loop_agent(ScriptedChatModel(), [add, boom], loop_detection=LoopDetection(
        calls=Calls(per_tool={"add": 3}, arg_policies=policies, read_only_tools=["add"])))


def test_approval_says_it_the_same_way() -> None:
    with pytest.raises(ValueError, match=r"^approval.tools: unknown tools \['ad'\]; known: "):
        create_loop_agent(ScriptedChatModel(), [add, boom], approval={"tools": ["ad"]})


@pytest.mark.parametrize("context", [{"iteratons": {"max": 2}}, {"limits": {"final_answr": False}},
                                     {"iterations": {"max": 0}}])
def test_the_servers_check_is_the_in_process_error(context: dict[str, Any]) -> None:
    """The server entry's check of a run request (``RunContextCheck``) says exactly what
    ``invoke`` says, before anything runs."""
    with pytest.raises(ValueError) as caught:
        served.invoke({"messages": [HumanMessage("hi")]}, context=context)
    body = json.dumps({"assistant_id": GRAPH_ID, "input": {}, "context": context}).encode()
    assert context_problem(run_contexts(body), {GRAPH_ID: served.check_context}) == str(caught.value)
