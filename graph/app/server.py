"""The graph LangGraph Server serves: ``langgraph.json`` points at ``graph`` here, and at
``app`` for one check the server would otherwise skip.

The one module that builds graphs when imported: ``graph``, and ``chat_graph`` (the same
agent set up for people in a chat UI such as Agent Chat UI: it asks them about loops and
about the conversation's token budget; ``docs/deployment.md``). It is compiled WITHOUT a
checkpointer: LangGraph Server persists threads itself (in memory under
``langgraph dev``, PostgreSQL in a deployment). The agent (model from the
environment, demo tools, ``send_email`` gated) is defined in ``graph/app/agent.py``.

Per-run limits come from the run's context, e.g. with ``langgraph-sdk``:
``client.runs.wait(thread_id, "langgraph-loop", input=..., context={"iterations": {"max": 2}})``.
LangGraph Server keeps only the context keys the graph's context schema declares and drops
the others silently, before the graph sees them; ``RunContextCheck`` (``app``'s middleware)
checks a run's ``context`` first with the graph's own check, so a misspelled key is the
in-process ``ValueError`` text, answered with HTTP 422, and nothing runs. Runs of another
graph of the same deployment (named by its graph id) are left alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware import Middleware

from langgraph_loop.app.agent import make_chat_graph, make_graph

try:  # Aegra takes FastAPI apps only; LangGraph Server any Starlette app (it ships no FastAPI)
    from fastapi import FastAPI as App
except ImportError:
    from starlette.applications import Starlette as App

__all__ = ["CHAT_GRAPH_ID", "GRAPH_ID", "RunContextCheck", "app", "chat_graph", "context_problem",
           "graph"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

graph = make_graph()
chat_graph = make_chat_graph()


GRAPH_ID = "langgraph-loop"
"""The graph's id in ``langgraph.json``."""
CHAT_GRAPH_ID = "langgraph-loop-chat"
"""The chat graph's id in ``langgraph.json`` (the graph to point Agent Chat UI at)."""


def _ours(assistant: Any, graph_id: str) -> bool:
    """Does a run for ``assistant`` (a graph id or an assistant's UUID) maybe run our graph?
    A UUID may name an assistant of any graph: checked; another graph's id: not ours."""
    if not isinstance(assistant, str) or assistant == graph_id:
        return True
    try:
        uuid.UUID(assistant)
    except ValueError:
        return False
    return True


def context_problem(body: bytes, check: Callable[[Any], object],
                    graph_id: str = GRAPH_ID) -> str | None:
    """Why a run request's ``context`` is refused (None: no context, a valid one, or a run
    of another graph of the deployment, named by its id).

    ``body``: the request's JSON (one run, or a list of runs for ``/runs/batch``).

    Example:
        >>> context_problem(b'{"context": {"iteratons": {"max": 2}}}', graph.check_context)[:42]
        "invalid run context: unknown key 'iteraton"
        >>> context_problem(b'{"context": {"iterations": {"max": 2}}}', graph.check_context) is None
        True
        >>> context_problem(b'{"assistant_id": "other", "context": {"x": 1}}', graph.check_context)
    """
    try:
        payload = json.loads(body or b"null")
    except ValueError:
        return None  # not ours to judge: the server answers malformed JSON
    for run in payload if isinstance(payload, list) else [payload]:
        context = run.get("context") if isinstance(run, dict) else None
        if context and _ours(run.get("assistant_id"), graph_id):
            try:
                check(context)
            except ValueError as exc:
                return str(exc)
    return None


class RunContextCheck:
    """ASGI middleware: a ``POST`` that creates runs has its ``context`` checked by ``check``
    (the graph's own, ``LoopGraph.check_context``) before the server filters it."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]],
                 check: Callable[[Any], object]) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST"
                or "/runs" not in str(scope["path"])):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:  # the whole body, kept to hand on unchanged
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        problem = context_problem(b"".join(m.get("body", b"") for m in messages), self.check)
        if problem is not None:
            body = json.dumps({"detail": problem}).encode()
            await send({"type": "http.response.start", "status": 422,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        pending = iter(messages)

        async def replay() -> Message:
            return next(pending, None) or await receive()

        await self.app(scope, replay, send)


app = App(middleware=[Middleware(RunContextCheck, check=graph.check_context)],
          **({"docs_url": None, "redoc_url": None, "openapi_url": None}
             if App.__name__ == "FastAPI" else {}))
"""Routes none (no docs pages of its own either); the middleware the server puts in front of
its own routes."""
