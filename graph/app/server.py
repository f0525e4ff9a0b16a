"""The graph LangGraph Server serves: ``langgraph.json`` points at ``graph`` here.

The one module that builds a graph when imported. It is compiled WITHOUT a
checkpointer: LangGraph Server persists threads itself (in memory under
``langgraph dev``, PostgreSQL in a deployment). The agent (model from the
environment, demo tools, ``send_email`` gated) is defined in ``graph/app/agent.py``.

Per-run limits come from the run's context, e.g. with ``langgraph-sdk``:
``client.runs.wait(thread_id, "langgraph-loop", input=..., context={"iterations": {"max": 2}})``.
"""

from __future__ import annotations

from langgraph_loop.app.agent import make_graph

__all__ = ["graph"]

graph = make_graph()
