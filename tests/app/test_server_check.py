"""``RunContextCheck``'s constructor: what it is given and what it says when given the wrong
thing (over HTTP: ``tests/ecosystem/test_langgraph_server.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent

from langgraph_loop.app.server import CHAT_GRAPH_ID, GRAPH_ID, RunContextCheck, app, chat_graph, graph
from langgraph_loop.scripted import ScriptedChatModel


async def routes(scope: Any, receive: Any, send: Any) -> None:
    """The app the middleware wraps (never called here)."""


def test_the_served_app_checks_both_graphs_by_their_ids() -> None:
    [middleware] = app.user_middleware
    assert set(middleware.kwargs["graphs"]) == {GRAPH_ID, CHAT_GRAPH_ID}
    checked = RunContextCheck(routes, **middleware.kwargs)
    assert checked.checks == {GRAPH_ID: graph.check_context, CHAT_GRAPH_ID: chat_graph.check_context}


def test_0_3s_check_still_guards_the_default_id_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"pass graphs=\{<graph id in langgraph.json>: graph\}"):
        checked = RunContextCheck(routes, check=graph.check_context)
    assert checked.checks == {GRAPH_ID: graph.check_context}


def test_a_graph_it_cannot_check_or_none_at_all_is_a_clear_error() -> None:
    other = create_agent(ScriptedChatModel(), [])
    with pytest.raises(ValueError, match=r"graphs\['other'\] is not a graph create_loop_agent built"):
        RunContextCheck(routes, graphs={"other": other})
    with pytest.raises(ValueError, match="no graph to check"):
        RunContextCheck(routes)
