"""The graphs LangGraph Server serves: ``langgraph.json`` points at ``graph`` and
``chat_graph`` here, and at ``app`` for one check the server would otherwise skip.

The one module that builds graphs when imported: ``graph``, and ``chat_graph`` (the same
agent set up for people in a chat UI such as Agent Chat UI: it asks them about loops and
about the conversation's token budget; ``docs/deployment.md``). Both are compiled WITHOUT a
checkpointer: LangGraph Server persists threads itself (in memory under
``langgraph dev``, PostgreSQL in a deployment). The agent (model from the
environment, demo tools, ``send_email`` gated) is defined in ``graph/app/agent.py``.

Per-run limits come from the run's context, e.g. with ``langgraph-sdk``:
``client.runs.wait(thread_id, "langgraph-loop", input=..., context={"iterations": {"max": 2}})``.
LangGraph Server keeps only the context keys the graph's context schema declares and drops
the others silently, before the graph sees them; ``RunContextCheck`` (``app``'s middleware)
checks a run's ``context`` first with the check of the graph the run is for, so a misspelled
key is the in-process ``ValueError`` text, answered with HTTP 422, and nothing runs; so is a
resume that does not answer the question of ours the thread is paused at. It is
given the graphs to check by their ids in ``langgraph.json``; a run names its graph by that id
or by an assistant's UUID (as Studio does), which the server itself is asked to resolve. Runs
of the deployment's other graphs are left alone.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from starlette.middleware import Middleware

from langgraph_loop.app.agent import make_chat_graph, make_graph
from langgraph_loop.core.questions import answer_problem

try:  # Aegra takes FastAPI apps only; LangGraph Server any Starlette app (it ships no FastAPI)
    from fastapi import FastAPI as App
except ImportError:
    from starlette.applications import Starlette as App

__all__ = ["CHAT_GRAPH_ID", "GRAPH_ID", "RunContextCheck", "app", "chat_graph", "context_problem",
           "graph", "run_contexts"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Check = Callable[[Any], object]

graph = make_graph()
chat_graph = make_chat_graph()


GRAPH_ID = "langgraph-loop"
"""The graph's id in ``langgraph.json``."""
CHAT_GRAPH_ID = "langgraph-loop-chat"
"""The chat graph's id in ``langgraph.json`` (the graph to point Agent Chat UI at)."""


def run_contexts(body: bytes) -> list[tuple[str, Any]]:
    """``(assistant_id, context)`` of each run a request creates with a context (``body``: its
    JSON, one run or a list of runs for ``/runs/batch``; malformed JSON is the server's to answer).

    Example:
        >>> run_contexts(b'[{"assistant_id": "a", "context": {"x": 1}}, {"assistant_id": "b"}]')
        [('a', {'x': 1})]
    """
    try:
        payload = json.loads(body or b"null")
    except ValueError:
        return []
    runs = payload if isinstance(payload, list) else [payload]
    return [(run["assistant_id"], run["context"]) for run in runs
            if isinstance(run, dict) and isinstance(run.get("assistant_id"), str) and run.get("context")]


def is_uuid(assistant_id: str) -> bool:
    """Does a run name its assistant by UUID (not by graph id)?"""
    try:
        uuid.UUID(assistant_id)
    except ValueError:
        return False
    return True


def context_problem(runs: list[tuple[str, Any]], checks: Mapping[str, Check],
                    graph_ids: Mapping[str, str | None] | None = None) -> str | None:
    """Why a run request's context is refused (None: valid, or a run of a graph not in
    ``checks``), by the check of the graph each run names: by its id, or by an assistant's
    UUID that ``graph_ids`` maps to its graph id.

    Example:
        >>> checks = {GRAPH_ID: graph.check_context}
        >>> context_problem([(GRAPH_ID, {"iteratons": {"max": 2}})], checks)[:42]
        "invalid run context: unknown key 'iteraton"
        >>> context_problem([(GRAPH_ID, {"iterations": {"max": 2}})], checks) is None
        True
        >>> context_problem([("other", {"x": 1}), ("5e2b…", {"x": 1})], checks, {"5e2b…": "other"})
    """
    for assistant_id, context in runs:
        check = checks.get(assistant_id) or checks.get((graph_ids or {}).get(assistant_id) or "")
        if check is not None:
            try:
                check(context)
            except ValueError as exc:
                return str(exc)
    return None


class RunContextCheck:
    """ASGI middleware: a ``POST`` that creates runs has each run's ``context`` checked by the
    check of the graph it runs (``LoopGraph.check_context``) before the server filters it.

    Args:
        app: the ASGI app it wraps (Starlette passes it).
        graphs: the graphs to check, by their ids in ``langgraph.json``
            (``{"my-agent": graph}``); runs of the deployment's other graphs are left alone.
        check: deprecated (0.3): one graph's check, for the graph id ``"langgraph-loop"``.

    Raises:
        ValueError: no graph to check, or a graph ``create_loop_agent`` did not build.
    """

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]],
                 graphs: Mapping[str, Any] | None = None, *, check: Check | None = None) -> None:
        self.app = app
        self.checks: dict[str, Check] = {}
        for graph_id, served in (graphs or {}).items():
            if not callable(getattr(served, "check_context", None)):
                raise ValueError(f"RunContextCheck: graphs[{graph_id!r}] is not a graph "
                                 f"create_loop_agent built (it has no check_context)")
            self.checks[graph_id] = served.check_context
        if check is not None:
            warnings.warn(f"RunContextCheck(check=...) checks only runs of the graph id {GRAPH_ID!r}; "
                          f"pass graphs={{<graph id in langgraph.json>: graph}}",
                          DeprecationWarning, stacklevel=2)
            self.checks.setdefault(GRAPH_ID, check)
        if not self.checks:
            raise ValueError("RunContextCheck: no graph to check; pass graphs={<graph id in "
                             "langgraph.json>: graph}")

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
        body = b"".join(m.get("body", b"") for m in messages)
        runs = run_contexts(body)
        graph_ids = {a: await self.graph_of(scope, a) for a, _ in runs
                     if a not in self.checks and is_uuid(a)}
        problem = context_problem(runs, self.checks, graph_ids) or await self.resume_problem(scope, body)
        if problem is not None:
            await _answer(send, 422, {"detail": problem})
            return
        pending = iter(messages)

        async def replay() -> Message:
            return next(pending, None) or await receive()

        await self.app(scope, replay, send)

    async def resume_problem(self, scope: Scope, body: bytes) -> str | None:
        """Why a run resuming a checked graph's thread does not answer the question of ours
        it is paused at (``core/questions.py: answer_problem``; None: it does, or not ours)."""
        thread = str(scope["path"]).partition("/threads/")[2].partition("/")[0]
        try:
            run = json.loads(body or b"null")
        except ValueError:
            return None
        command = run.get("command") if isinstance(run, dict) else None
        if not thread or not isinstance(command, dict) or command.get("resume") is None:
            return None
        assistant = str(run.get("assistant_id"))
        named = assistant if assistant in self.checks or not is_uuid(assistant) \
            else await self.graph_of(scope, assistant)
        if named not in self.checks:
            return None
        state = await self.get(scope, f"/threads/{thread}/state")
        tasks = state.get("tasks") if isinstance(state, dict) else None
        pending = [(str(t.get("name")), str(i.get("id")), i.get("value")) for t in tasks or []
                   for i in t.get("interrupts") or []]
        return answer_problem(pending, command["resume"])

    async def graph_of(self, scope: Scope, assistant_id: str) -> str | None:
        """The graph id of the assistant a UUID names, as the server answers
        ``GET /assistants/{id}`` with the run request's headers (None: not found, not allowed)."""
        found = await self.get(scope, f"/assistants/{assistant_id}")
        return found.get("graph_id") if isinstance(found, dict) else None

    async def get(self, scope: Scope, route: str) -> Any:
        """The server's JSON answer to ``GET route`` with the run request's headers (None:
        not 200)."""
        path = f"{scope.get('root_path', '')}{route}"
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length", b"content-type")]
        request = {**scope, "method": "GET", "path": path, "raw_path": path.encode(),
                   "query_string": b"", "headers": headers}
        answer: dict[str, Any] = {"status": 0, "body": b""}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def collect(message: Message) -> None:
            answer["status"] = message.get("status", answer["status"])
            answer["body"] += message.get("body", b"")

        await self.app(request, receive, collect)
        return json.loads(answer["body"]) if answer["status"] == 200 else None


async def _answer(send: Send, status: int, payload: Any) -> None:
    """Send a JSON response."""
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


app = App(middleware=[Middleware(RunContextCheck, graphs={GRAPH_ID: graph, CHAT_GRAPH_ID: chat_graph})],
          **({"docs_url": None, "redoc_url": None, "openapi_url": None}
             if App.__name__ == "FastAPI" else {}))
"""Routes none (no docs pages of its own either); the middleware the server puts in front of
its own routes."""
