"""A user's own deployment, set up as docs/deployment.md says: ``server.py``'s pattern with the
user's graph under their own id in ``langgraph.json``, a second graph of another kind with a
context of its own, and ``RunContextCheck`` given the user's graph by its id.
``tests/ecosystem/test_langgraph_server.py`` serves it with ``langgraph dev`` (``LANGGRAPH_JSON``).

The user's graph continues for a second pass and compacts its history (a small
``Compaction.max_tokens``), so a chat UI's view of continuation and summary messages is seen
over the server too.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from starlette.middleware import Middleware
from typing_extensions import TypedDict

from langgraph_loop import Compaction, Iterations, create_loop_agent
from langgraph_loop.app.agent import get_weather, model
from langgraph_loop.app.server import App, RunContextCheck

USER_GRAPH_ID = "my-agent"
OTHER_GRAPH_ID = "support-bot"


class Customer(TypedDict):
    """The second graph's runtime context."""

    customer: str


@tool
def greet(runtime: ToolRuntime[Customer]) -> str:
    """Greet the customer by name."""
    return f"Hello, {runtime.context['customer']}"


graph = create_loop_agent(model(), [get_weather], name=USER_GRAPH_ID,
                          iterations=Iterations(should_continue=lambda state: state["iteration"] < 2),
                          compaction=Compaction(max_tokens=120, keep_last=4))
other = create_agent(model(), [greet], context_schema=Customer, name=OTHER_GRAPH_ID)
app = App(middleware=[Middleware(RunContextCheck, graphs={USER_GRAPH_ID: graph})])

LANGGRAPH_JSON = {
    "dependencies": ["."],
    "graphs": {USER_GRAPH_ID: f"{__file__}:graph", OTHER_GRAPH_ID: f"{__file__}:other"},
    "http": {"app": f"{__file__}:app"},
}
"""The user's ``langgraph.json`` (written next to a scratch project by the test)."""
