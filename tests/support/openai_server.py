"""A scripted OpenAI-compatible Chat Completions server for tests.

The server listens on loopback (port 0 picks a free port) in a daemon thread and
answers ``POST /v1/chat/completions`` from a script of replies built with
:func:`text`, :func:`tool_calls` and :func:`error` (or callables
``request_body -> reply``). Both the JSON and the SSE streaming wire formats are
served, including tool-call deltas with ``index`` and the OpenAI-style final usage
chunk when ``stream_options.include_usage`` is true. A reply may stream its text in
pieces of ``chunk_chars`` characters, ``chunk_delay`` seconds apart, as a live model does;
``streams`` records how many events of each stream were sent, and whether the client
closed it first.

Standalone: ``python -m tests.support.openai_server --port N`` serves
:func:`auto_reply` forever (used for LangGraph Server tests).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from tests.support.sse import LoopbackServer, StreamLog, send_events

JSON = dict[str, Any]
ToolCallSpec = tuple[str, "dict[str, Any] | str"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a message (content and/or tool calls) or an HTTP error."""

    content: str | None = None
    calls: tuple[ToolCallSpec, ...] = ()
    usage: tuple[int, int] | None = None
    finish_reason: str | None = None
    status: int = 200
    error_message: str = ""
    error_code: str | None = None
    delay: float = 0.0
    chunk_chars: int | None = None
    """Stream the content in pieces of this many characters (default: 3 pieces)."""
    chunk_delay: float = 0.0
    """Seconds between two streamed events."""
    call_first: bool = False
    """Stream the first tool call's head and first argument piece before the content, the
    rest after it (a client that stops early holds a half-streamed call)."""


ReplyLike = Reply | str | Callable[[JSON], "ReplyLike"]


def text(
    content: str, *, usage: tuple[int, int] | None = None, finish_reason: str = "stop", delay: float = 0.0,
    chunk_chars: int | None = None, chunk_delay: float = 0.0,
) -> Reply:
    """A plain assistant text answer. ``usage`` is ``(prompt, completion)`` tokens."""
    return Reply(content=content, usage=usage, finish_reason=finish_reason, delay=delay,
                 chunk_chars=chunk_chars, chunk_delay=chunk_delay)


def tool_calls(
    calls: Sequence[ToolCallSpec],
    *,
    content: str | None = None,
    usage: tuple[int, int] | None = None,
    delay: float = 0.0,
    **streaming: Any,
) -> Reply:
    """An assistant answer with (parallel) tool calls ``[(name, args), ...]``.

    ``args`` is a dict (JSON-encoded on the wire) or a raw string sent as-is, so a
    test can send malformed JSON. Ids are ``call_<request_no>_<index>``. ``streaming``:
    ``chunk_chars``, ``chunk_delay``, ``call_first`` (see :class:`Reply`).
    """
    return Reply(content=content, calls=tuple(calls), usage=usage, finish_reason="tool_calls", delay=delay,
                 **streaming)


def error(status: int, message: str, *, code: str | None = None) -> Reply:
    """An HTTP error reply with an OpenAI-style ``{"error": {...}}`` body."""
    return Reply(status=status, error_message=message, error_code=code)


def error_body(status: int, message: str, code: str | None = None) -> JSON:
    """The JSON body OpenAI sends with an HTTP error."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    kind = {401: "authentication_error", 429: "rate_limit_exceeded"}.get(status, kind)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


_TYPE_DEFAULTS: dict[str, Any] = {"string": "x", "integer": 0, "number": 0, "boolean": False}


def _placeholder(schema: JSON) -> Any:
    """A default value for a JSON schema (its ``default``, else a type-based value)."""
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    fresh: dict[str, Any] = {"array": [], "object": {}}  # new containers on every call
    return fresh.get(str(kind), _TYPE_DEFAULTS.get(str(kind), "x"))


def _user_text(messages: Sequence[JSON]) -> str:
    """The text of the user messages of a request body, joined."""
    parts = [m.get("content") for m in messages if m.get("role") == "user"]
    return " ".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def pick_tool(tools: Sequence[JSON], messages: Sequence[JSON]) -> JSON:
    """The offered tool whose name the user mentions, else the first offered tool."""
    said = _user_text(messages)
    named = [t for t in tools if t.get("function", {}).get("name", "\0") in said]
    return (named or list(tools))[0].get("function", {})


def auto_reply(body: JSON) -> Reply:
    """Call a tool unless the last message is a tool result, then answer ``"Done."``.

    The tool is the offered tool the user's messages name (e.g. "please send_email"),
    else the first offered tool; its arguments are the schema defaults of its required
    parameters. Without tools, under ``tool_choice: "none"``, or once a tool result came back,
    the answer is text; when the user's messages say "keep checking", it calls the tool again
    and again (a loop), until tools are taken away.
    """
    messages = body.get("messages") or []
    last_role = messages[-1].get("role") if messages else None
    tools = body.get("tools") or []
    looping = "keep checking" in _user_text(messages)  # a model stuck on one call
    if tools and (last_role != "tool" or looping) and body.get("tool_choice") != "none":
        fn = pick_tool(tools, messages)
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        args = {name: _placeholder(props.get(name, {})) for name in params.get("required", [])}
        return tool_calls([(fn.get("name", "tool"), args)])
    return text("Done.")


def _default_usage(body: JSON) -> tuple[int, int]:
    """Deterministic usage: 10 prompt tokens per message, 5 completion tokens."""
    return (len(body.get("messages") or []) * 10, 5)


def _usage_json(usage: tuple[int, int]) -> JSON:
    """The OpenAI ``usage`` object for ``(prompt, completion)``."""
    prompt, completion = usage
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _split(value: str, parts: int = 3) -> list[str]:
    """Split a string into up to ``parts`` non-empty pieces (at least one piece)."""
    if not value:
        return [value]
    size = max(1, -(-len(value) // parts))
    return [value[i : i + size] for i in range(0, len(value), size)]


@dataclass
class _Answer:
    """A reply resolved against one request: concrete ids, usage and model."""

    reply: Reply
    request_no: int
    model: str
    usage: tuple[int, int]
    created: int = field(default_factory=lambda: int(time.time()))

    def _envelope(self, obj: str, **rest: Any) -> JSON:
        """The common ``id/object/created/model`` fields plus ``rest``."""
        head = {"id": f"chatcmpl-{self.request_no}", "object": obj}
        return {**head, "created": self.created, "model": self.model, **rest}

    def wire_calls(self) -> list[JSON]:
        """Tool calls in wire form: ids ``call_<n>_<i>``, JSON-string arguments."""
        return [
            {
                "id": f"call_{self.request_no}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for i, (name, args) in enumerate(self.reply.calls)
        ]

    def completion(self) -> JSON:
        """The non-streaming ``chat.completion`` object."""
        message: JSON = {"role": "assistant", "content": self.reply.content}
        if self.reply.calls:
            message["tool_calls"] = self.wire_calls()
        choice = {"index": 0, "message": message, "finish_reason": self.reply.finish_reason}
        return self._envelope("chat.completion", choices=[choice], usage=_usage_json(self.usage))

    def _call_deltas(self) -> Iterator[JSON]:
        """Per tool call a head delta and argument fragments."""
        for index, call in enumerate(self.wire_calls()):
            fn = call["function"]
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": ""},
            }
            yield {"tool_calls": [head]}
            for piece in _split(fn["arguments"]):
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}

    def _deltas(self) -> Iterator[JSON]:
        """Role, content pieces, then the tool calls (with ``call_first``, the first call's
        head and first argument piece before the content)."""
        yield {"role": "assistant", "content": ""}
        calls = self._call_deltas()
        if self.reply.call_first and self.reply.calls:
            yield from itertools.islice(calls, 2)
        content, size = self.reply.content or "", self.reply.chunk_chars
        for piece in _split(content) if size is None else [content[i:i + size]
                                                           for i in range(0, len(content), size)]:
            if piece:
                yield {"content": piece}
        yield from calls

    def chunks(self, include_usage: bool) -> Iterator[JSON]:
        """The streamed ``chat.completion.chunk`` objects, usage chunk last if asked."""
        extra: JSON = {"usage": None} if include_usage else {}
        steps: list[tuple[JSON, str | None]] = [(d, None) for d in self._deltas()]
        steps.append(({}, self.reply.finish_reason))
        for delta, finish in steps:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            yield self._envelope("chat.completion.chunk", choices=[choice], **extra)
        if include_usage:
            usage = _usage_json(self.usage)
            yield self._envelope("chat.completion.chunk", choices=[], usage=usage)


class _Handler(BaseHTTPRequestHandler):
    """HTTP handler delegating to the owning :class:`OpenAIServer`."""

    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def _send_json(self, status: int, payload: JSON) -> None:
        """Send a complete JSON response."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        """Serve ``/v1/models``."""
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": "m", "object": "model", "created": 0, "owned_by": "langgraph-loop-tests"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, error_body(404, f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        """Serve ``/v1/chat/completions`` (JSON or SSE)."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, error_body(400, f"invalid JSON body: {exc}"))
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, error_body(404, f"no route for POST {self.path}"))
            return
        owner = self.server.owner
        with owner._lock:
            owner.headers.append(dict(self.headers.items()))
        request_no, reply = owner._next(body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            payload = error_body(reply.status, reply.error_message, reply.error_code)
            self._send_json(reply.status, payload)
            return
        answer = _Answer(
            reply=reply,
            request_no=request_no,
            model=str(body.get("model") or "m"),
            usage=reply.usage or _default_usage(body),
        )
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [f"data: {json.dumps(c)}\n\n" for c in answer.chunks(include_usage)]
            self._stream([*events, "data: [DONE]\n\n"], request_no, reply.chunk_delay)
        else:
            self._send_json(200, answer.completion())

    def _stream(self, events: Sequence[str], request_no: int, delay: float) -> None:
        """Send the SSE events (``delay`` seconds apart) and close the connection; recorded in
        the owner's ``streams``, with whether the client closed it first."""
        log = StreamLog(request_no, total=len(events))
        with self.server.owner._lock:
            self.server.owner.streams.append(log)
        send_events(self, [e.encode() for e in events], log, delay)


class OpenAIServer:
    """A scripted OpenAI Chat Completions server on loopback.

    ``script`` is consumed in order (one reply per request); ``default`` (a callable
    ``request_body -> reply``) answers once the script is empty, otherwise HTTP 500.
    ``requests`` records every JSON body received, in arrival order; ``errors`` holds
    exceptions raised by script callables (each answered with HTTP 500).
    """

    def __init__(
        self,
        script: Sequence[ReplyLike] | None = None,
        *,
        default: Callable[[JSON], ReplyLike] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.script: list[ReplyLike] = list(script or [])
        self.default = default
        self.requests: list[JSON] = []
        self.headers: list[dict[str, str]] = []  # request headers, in arrival order
        self.streams: list[StreamLog] = []  # streamed answers, in the order they started
        self.errors: list[Exception] = []  # exceptions raised by script callables
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._address = (host, port)
        self._httpd: LoopbackServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound TCP port (only valid once started)."""
        if self._httpd is None:
            raise RuntimeError("OpenAIServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url``, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._address[0]}:{self.port}/v1"

    def start(self) -> Self:
        """Bind and serve in a daemon thread. Returns ``self``."""
        if self._httpd is None:
            self._httpd = LoopbackServer(self._address, self, _Handler)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )  # a short poll interval makes shutdown() fast
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is not None and self._thread is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
        self._httpd, self._thread = None, None

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve in the calling thread (standalone mode); ``on_ready(base_url)`` once bound."""
        self._httpd = LoopbackServer(self._address, self, _Handler)
        try:
            if on_ready is not None:
                on_ready(self.base_url)
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _next(self, body: JSON) -> tuple[int, Reply]:
        """Record ``body`` and resolve the reply for it; returns ``(request_no, reply)``."""
        with self._lock:
            self.requests.append(body)
            request_no = next(self._counter)
            item: ReplyLike | None = self.script.pop(0) if self.script else None
        if item is None:
            if self.default is None:
                exhausted = "OpenAIServer script exhausted and no default set"
                return request_no, error(500, exhausted, code="script_exhausted")
            item = self.default
        try:
            return request_no, _resolve(item, body)
        except Exception as exc:  # noqa: BLE001 - surface a failing test callable as HTTP 500
            self.errors.append(exc)
            return request_no, error(500, f"script callable raised {exc!r}", code="script_error")


def _resolve(item: ReplyLike, body: JSON) -> Reply:
    """Turn a script item into a :class:`Reply` (strings are text, callables are called)."""
    for _ in range(10):
        if isinstance(item, Reply):
            return item
        if isinstance(item, str):
            return text(item)
        item = item(body)
    raise TypeError("script callable did not produce a Reply")


def check_pairing(body: JSON | Sequence[JSON]) -> list[str]:
    """Check the OpenAI tool-call pairing rule on a request body (or its ``messages``).

    Every assistant message with ``tool_calls`` must be followed immediately by
    exactly one ``role: tool`` message per call id, with nothing in between; tool
    messages that do not answer the preceding assistant message are orphans.
    Returns the problems found (empty list = valid).
    """
    messages = list(body.get("messages") or []) if isinstance(body, dict) else list(body)
    problems: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.get("role") == "tool":
            problems.append(f"message {i}: orphan tool message {msg.get('tool_call_id')!r}")
            i += 1
            continue
        calls = (msg.get("tool_calls") or []) if msg.get("role") == "assistant" else []
        i += 1
        if not calls:
            continue
        expected = [c.get("id") for c in calls]
        if len(set(expected)) != len(expected):
            problems.append(f"message {i - 1}: duplicate tool_call ids {expected}")
        owner, seen = i - 1, []
        while i < len(messages) and messages[i].get("role") == "tool":
            tid = messages[i].get("tool_call_id")
            if tid not in expected:
                problems.append(f"message {i}: tool result {tid!r} matches no call of {owner}")
            elif tid in seen:
                problems.append(f"message {i}: second tool result for {tid!r}")
            seen.append(tid)
            i += 1
        missing = [t for t in expected if t not in seen]
        if missing:
            problems.append(f"message {owner}: calls without an immediate tool result: {missing}")
    return problems


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: serve :func:`auto_reply` until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = OpenAIServer(default=auto_reply, host=args.host, port=args.port)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(lambda url: print(f"OpenAI test server on {url}", flush=True))


if __name__ == "__main__":
    main()
