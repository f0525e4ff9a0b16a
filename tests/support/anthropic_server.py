"""A scripted Anthropic Messages API server for tests, which enforces Anthropic's request rules.

The server listens on loopback (port 0 picks a free port) in a daemon thread and answers
``POST /v1/messages`` (JSON, or server-sent events when the body says ``"stream": true``) from a
script of replies built with :func:`text`, :func:`tool_use` and :func:`error` (or callables
``request_body -> reply``). ``POST /v1/messages/count_tokens`` answers a deterministic count.

Every request body is recorded and checked with :func:`check_request` before the script is
consulted: a body that breaks one of Anthropic's rules is answered with HTTP 400 and Anthropic's
error shape (``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``),
the script is not consumed, and the problems are kept in ``rejected`` so a fixture can fail the
test afterwards. Use it through ``ChatAnthropic(base_url=server.base_url, api_key="test")``.

Example:
    >>> check_request({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    []
    >>> check_request({"model": "m", "max_tokens": 8, "messages": [
    ...     {"role": "assistant", "content": "hi"}]})
    ['messages: first message must use the "user" role']
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from tests.support.sse import LoopbackServer, StreamLog, send_events

JSON = dict[str, Any]
CallSpec = tuple[str, dict[str, Any]]

__all__ = [
    "AnthropicServer",
    "Reply",
    "StreamLog",
    "check_request",
    "error",
    "error_body",
    "text",
    "tool_use",
]

# ----------------------------------------------------------------------------- script replies


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text and/or tool_use blocks, or an HTTP error."""

    text: str | None = None
    calls: tuple[CallSpec, ...] = ()
    usage: tuple[int, int] | None = None
    stop_reason: str | None = None
    status: int = 200
    error_type: str = "api_error"
    error_message: str = ""
    chunk_chars: int | None = None
    """Stream the text in pieces of this many characters (default: 3 pieces)."""
    chunk_delay: float = 0.0
    """Seconds between two streamed events."""
    thinking: str | None = None
    """A thinking block before the text (signed ``sig_<request_no>``; streamed like the text)."""


ReplyLike = Reply | str | Callable[[JSON], "ReplyLike"]


def text(content: str, *, usage: tuple[int, int] | None = None, stop_reason: str = "end_turn",
         chunk_chars: int | None = None, chunk_delay: float = 0.0, thinking: str | None = None) -> Reply:
    """A text answer. ``usage`` is ``(input_tokens, output_tokens)``; ``chunk_chars`` and
    ``chunk_delay`` shape its stream, ``thinking`` comes first (see :class:`Reply`)."""
    return Reply(text=content, usage=usage, stop_reason=stop_reason, chunk_chars=chunk_chars,
                 chunk_delay=chunk_delay, thinking=thinking)


def tool_use(calls: Sequence[CallSpec], *, content: str | None = None,
             usage: tuple[int, int] | None = None) -> Reply:
    """An answer with ``tool_use`` blocks ``[(name, input), ...]`` (after an optional text block).

    Ids are ``toolu_<request_no>_<index>``.
    """
    return Reply(text=content, calls=tuple(calls), usage=usage, stop_reason="tool_use")


def error(status: int, message: str, *, kind: str | None = None) -> Reply:
    """An HTTP error reply with Anthropic's error body."""
    return Reply(status=status, error_message=message, error_type=kind or _error_type(status))


def _error_type(status: int) -> str:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
             404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
             529: "overloaded_error"}
    return kinds.get(status, "api_error")


def error_body(status: int, message: str, kind: str | None = None) -> JSON:
    """The JSON body Anthropic sends with an HTTP error."""
    return {"type": "error", "error": {"type": kind or _error_type(status), "message": message}}


# ----------------------------------------------------------------------------- the rules

TOOLS_REQUIRED = "Requests which include `tool_use` or `tool_result` blocks must define tools."
FIRST_USER = 'messages: first message must use the "user" role'

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_SERVER_TOOL = re.compile(r"^(web_search|web_fetch|code_execution|bash|text_editor|computer|memory"
                          r"|tool_search_tool_regex|tool_search_tool_bm25)_\d{8}$")
# The keys each content block type accepts (the API rejects extra inputs).
_BLOCK_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "cache_control", "citations", "context", "title"}),
    "search_result": frozenset({"type", "source", "title", "content", "cache_control", "citations"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "server_tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "web_search_tool_result": frozenset({"type", "tool_use_id", "content", "cache_control"}),
}
_ROLE_BLOCKS = {
    "user": frozenset({"text", "image", "document", "search_result", "tool_result"}),
    "assistant": frozenset({"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
                            "web_search_tool_result"}),
}
_RESULT_CONTENT = frozenset({"text", "image", "document", "search_result"})
_TOOL_CHOICE_KEYS = {
    "auto": frozenset({"type", "disable_parallel_tool_use"}),
    "any": frozenset({"type", "disable_parallel_tool_use"}),
    "tool": frozenset({"type", "name", "disable_parallel_tool_use"}),
    "none": frozenset({"type"}),
}


def _blocks(content: Any) -> list[Any]:
    """A message's content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _check_text(where: str, block: JSON) -> list[str]:
    value = block.get("text")
    if not isinstance(value, str):
        return [f"{where}.text: Field required (a string)"]
    if not value:
        return [f"{where}: text content blocks must be non-empty"]
    if not value.strip():
        return [f"{where}: text content blocks must contain non-whitespace text"]
    return []


def _check_block(where: str, block: Any, allowed: frozenset[str]) -> list[str]:
    """One content block: a known type allowed here, only the keys that type accepts."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return [f"{where}: each content block must be an object with a `type`"]
    kind = block["type"]
    if kind not in allowed:
        return [f"{where}.type: Input tag '{kind}' is not allowed here (expected one of "
                f"{sorted(allowed)})"]
    extra = sorted(set(block) - _BLOCK_KEYS[kind])
    if extra:
        return [f"{where}.{extra[0]}: Extra inputs are not permitted"]
    if kind == "text":
        return _check_text(where, block)
    if kind in ("tool_use", "server_tool_use"):
        problems = [] if isinstance(block.get("id"), str) and block["id"] else [f"{where}.id: Field required"]
        if not isinstance(block.get("name"), str):
            problems.append(f"{where}.name: Field required")
        if not isinstance(block.get("input"), dict):
            problems.append(f"{where}.input: Input should be a valid dictionary")
        return problems
    if kind == "tool_result":
        return _check_result(where, block)
    if kind == "thinking" and not (isinstance(block.get("signature"), str) and block["signature"]):
        return [f"{where}.signature: Field required"]
    return []


def _check_result(where: str, block: JSON) -> list[str]:
    problems = [] if isinstance(block.get("tool_use_id"), str) else [f"{where}.tool_use_id: Field required"]
    if "is_error" in block and not isinstance(block["is_error"], bool):
        problems.append(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content", "")
    if isinstance(content, list):
        for k, inner in enumerate(content):
            problems += _check_block(f"{where}.content.{k}", inner, _RESULT_CONTENT)
    elif not isinstance(content, str):
        problems.append(f"{where}.content: Input should be a valid string or list of blocks")
    return problems


def _check_messages(messages: list[Any]) -> list[str]:
    """Per message: a user/assistant role, non-empty content, valid blocks."""
    problems: list[str] = []
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in _ROLE_BLOCKS:
            problems.append(f'messages.{i}.role: Input should be "user" or "assistant" (got {role!r})')
            continue
        content = msg.get("content")
        if not isinstance(content, str | list):
            problems.append(f"messages.{i}.content: Input should be a valid string or list")
            continue
        last_assistant = i == len(messages) - 1 and role == "assistant"
        if not content and not last_assistant:
            problems.append(f"messages.{i}: all messages must have non-empty content except for "
                            "the optional final assistant message")
            continue
        if isinstance(content, str):
            if content and not last_assistant:
                problems += _check_text(f"messages.{i}.content", {"text": content})
            continue
        for j, block in enumerate(content):
            problems += _check_block(f"messages.{i}.content.{j}", block, _ROLE_BLOCKS[role])
    return problems


def _turns(messages: list[JSON]) -> list[tuple[str, list[int], list[JSON]]]:
    """Consecutive messages of one role merged into one turn, as the API does:
    ``(role, original indices, blocks)``."""
    turns: list[tuple[str, list[int], list[JSON]]] = []
    for i, msg in enumerate(messages):
        blocks = [b for b in _blocks(msg["content"]) if isinstance(b, dict)]
        if turns and turns[-1][0] == msg["role"]:
            turns[-1][1].append(i)
            turns[-1][2].extend(blocks)
        else:
            turns.append((msg["role"], [i], blocks))
    return turns


def _check_pairing(messages: list[JSON]) -> list[str]:
    """tool_use/tool_result pairing over the merged turns."""
    problems: list[str] = []
    turns = _turns(messages)
    if turns and turns[0][0] != "user":
        problems.append(FIRST_USER)
    seen_ids: set[str] = set()
    previous_uses: list[str] = []
    for role, indices, blocks in turns:
        where = f"messages.{indices[0]}"
        if role == "user":
            problems += _check_results(where, blocks, previous_uses)
            previous_uses = []
            continue
        uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        problems += [f"{where}: `tool_use` ids must be unique: {u}" for u in uses if u in seen_ids]
        seen_ids.update(uses)
        if previous_uses:
            problems.append(_unanswered(previous_uses, where))
        previous_uses = uses
    if previous_uses:
        problems.append(_unanswered(previous_uses, f"messages.{len(messages)}"))
    return problems


def _check_results(where: str, blocks: list[JSON], previous_uses: list[str]) -> list[str]:
    """A user turn: its tool_result blocks come first and answer each previous call once."""
    problems: list[str] = []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    leading = 0
    while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
        leading += 1
    if len(results) > leading:
        problems.append(f"{where}: `tool_result` blocks must come first in the user message "
                        "content, before any other block")
    answered: list[str] = []
    for block in results:
        rid = block.get("tool_use_id")
        if rid not in previous_uses:
            problems.append(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{rid}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message.")
        elif rid in answered:
            problems.append(f"{where}: more than one `tool_result` block for `tool_use_id` {rid}")
        answered.append(str(rid))
    missing = [u for u in previous_uses if u not in answered]
    if missing:
        problems.append(_unanswered(missing, where))
    return problems


def _unanswered(ids: list[str], where: str) -> str:
    return (f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block "
            "in the next message.")


def _check_tools(body: JSON) -> tuple[list[str], list[str]]:
    """The ``tools`` list: custom tools with a name and an object input schema, or server tools.
    Returns ``(problems, names)``."""
    tools = body.get("tools")
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        return ["tools: Input should be a valid list"], []
    problems: list[str] = []
    names: list[str] = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            problems.append(f"tools.{k}: Input should be an object")
            continue
        name = tool.get("name")
        kind = tool.get("type", "custom")
        if kind != "custom" and not _SERVER_TOOL.match(str(kind)):
            problems.append(f"tools.{k}.type: unknown tool type {kind!r}")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"tools.{k}.name: String should match pattern '{_TOOL_NAME.pattern}'")
        elif name in names:
            problems.append(f"tools: Tool names must be unique (duplicate {name!r})")
        names.append(str(name))
        if kind == "custom":
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                problems.append(f"tools.{k}.input_schema: a JSON schema with type 'object' is required")
    return problems, names


def _check_tool_choice(body: JSON, names: list[str]) -> list[str]:
    """``tool_choice``: one of auto/any/tool/none, tools defined, a forced tool that exists."""
    if "tool_choice" not in body:
        return []
    choice = body["tool_choice"]
    if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICE_KEYS:
        return [f"tool_choice: Input tag should be one of 'auto', 'any', 'tool', 'none' (got {choice!r})"]
    kind = choice["type"]
    extra = sorted(set(choice) - _TOOL_CHOICE_KEYS[kind])
    if extra:
        return [f"tool_choice.{kind}.{extra[0]}: Extra inputs are not permitted"]
    if not body.get("tools"):
        return ["tool_choice may only be specified while providing tools."]
    if kind == "tool" and choice.get("name") not in names:
        return [f"tool_choice.tool.name: Tool '{choice.get('name')}' not found in provided tools"]
    return []


def check_request(body: JSON, *, count_tokens: bool = False) -> list[str]:
    """Anthropic's rules on a Messages API request body; returns the problems (empty = valid).

    Checked: ``model`` and ``max_tokens`` are present; ``system`` is a string or text blocks;
    messages have role user/assistant, non-empty content (except a final assistant message)
    and well-formed blocks (known types for the role, no extra keys, non-blank text, a signed
    ``thinking`` block); after
    merging consecutive messages of one role (as the API does) the first turn is the user's;
    every ``tool_use`` is answered by exactly one ``tool_result`` in the next (user) turn,
    whose ``tool_result`` blocks come first and answer only the previous turn's calls;
    ``tool_use`` ids are unique; any ``tool_use``/``tool_result`` block requires ``tools``;
    tools are well-formed with unique names; ``tool_choice`` is valid when present.
    ``count_tokens`` checks a ``/v1/messages/count_tokens`` body (no ``max_tokens``).
    """
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: Field required")
    max_tokens = body.get("max_tokens", 1 if count_tokens else None)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        problems.append("max_tokens: Field required (an integer >= 1)")
    system = body.get("system")
    if system is not None:
        if isinstance(system, list):
            for k, block in enumerate(system):
                problems += _check_block(f"system.{k}", block, frozenset({"text"}))
        elif not isinstance(system, str):
            problems.append("system: Input should be a valid string or list of text blocks")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: at least one message is required"]
    shape = _check_messages(messages)
    problems += shape
    tool_problems, names = _check_tools(body)
    problems += tool_problems + _check_tool_choice(body, names)
    if shape:  # pairing is only meaningful over well-formed messages
        return problems
    problems += _check_pairing(messages)
    uses_tools = any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
        for m in messages for b in _blocks(m["content"])
    )
    if uses_tools and not body.get("tools"):
        problems.append(TOOLS_REQUIRED)
    return problems


# ----------------------------------------------------------------------------- responses


def _default_usage(body: JSON) -> tuple[int, int]:
    """Deterministic usage: 10 input tokens per message, 5 output tokens."""
    return (len(body.get("messages") or []) * 10, 5)


@dataclass
class _Answer:
    """A reply resolved against one request: concrete ids, usage and model."""

    reply: Reply
    request_no: int
    model: str
    usage: tuple[int, int]

    def content(self) -> list[JSON]:
        blocks: list[JSON] = []
        if self.reply.thinking:
            blocks.append({"type": "thinking", "thinking": self.reply.thinking,
                           "signature": f"sig_{self.request_no}"})
        if self.reply.text:
            blocks.append({"type": "text", "text": self.reply.text})
        for i, (name, args) in enumerate(self.reply.calls):
            blocks.append({"type": "tool_use", "id": f"toolu_{self.request_no}_{i}", "name": name,
                           "input": args})
        return blocks

    def stop_reason(self) -> str:
        return self.reply.stop_reason or ("tool_use" if self.reply.calls else "end_turn")

    def _usage(self, output: int | None = None) -> JSON:
        inp, out = self.usage
        return {"input_tokens": inp, "output_tokens": out if output is None else output,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

    def message(self) -> JSON:
        """The non-streaming ``message`` object."""
        return {"id": f"msg_{self.request_no}", "type": "message", "role": "assistant",
                "model": self.model, "content": self.content(), "stop_reason": self.stop_reason(),
                "stop_sequence": None, "usage": self._usage()}

    def events(self) -> Iterator[JSON]:
        """The streamed events: message_start, per block start/deltas/stop, message_delta, stop."""
        head = {**self.message(), "content": [], "stop_reason": None, "usage": self._usage(output=1)}
        yield {"type": "message_start", "message": head}
        yield {"type": "ping"}
        for index, block in enumerate(self.content()):
            kind = block["type"]
            if kind in ("text", "thinking"):  # the block's text streamed in deltas of its kind
                yield {"type": "content_block_start", "index": index,
                       "content_block": {"type": kind, kind: ""}}
                for piece in _split(block[kind], size=self.reply.chunk_chars):
                    yield {"type": "content_block_delta", "index": index,
                           "delta": {"type": f"{kind}_delta", kind: piece}}
                if kind == "thinking":
                    yield {"type": "content_block_delta", "index": index,
                           "delta": {"type": "signature_delta", "signature": block["signature"]}}
            else:
                start = {**block, "input": {}}
                yield {"type": "content_block_start", "index": index, "content_block": start}
                for piece in _split(json.dumps(block["input"])):
                    yield {"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}
            yield {"type": "content_block_stop", "index": index}
        yield {"type": "message_delta", "delta": {"stop_reason": self.stop_reason(), "stop_sequence": None},
               "usage": self._usage()}  # the final counts, input tokens included
        yield {"type": "message_stop"}


def _split(value: str, parts: int = 3, size: int | None = None) -> list[str]:
    """Split a string into up to ``parts`` non-empty pieces (pieces of ``size`` characters)."""
    size = size or max(1, -(-len(value) // parts))
    return [value[i : i + size] for i in range(0, len(value), size)] or [value]


# ----------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    """HTTP handler delegating to the owning :class:`AnthropicServer`."""

    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def _send_json(self, status: int, payload: JSON) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_test")
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        """Serve ``/v1/messages`` (JSON or SSE) and ``/v1/messages/count_tokens``."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, error_body(400, f"invalid JSON body: {exc}"))
            return
        path = self.path.split("?")[0].rstrip("/")
        owner = self.server.owner
        if path.endswith("/v1/messages/count_tokens"):
            problems = owner._check(body, counted=False)
            if problems:
                self._send_json(400, error_body(400, "; ".join(problems)))
            else:
                self._send_json(200, {"input_tokens": _default_usage(body)[0]})
            return
        if not path.endswith("/v1/messages"):
            self._send_json(404, error_body(404, f"no route for POST {self.path}"))
            return
        problems = owner._check(body, counted=True)
        if problems:
            self._send_json(400, error_body(400, "; ".join(problems)))
            return
        request_no, reply = owner._next(body)
        if reply.status != 200:
            self._send_json(reply.status, error_body(reply.status, reply.error_message, reply.error_type))
            return
        answer = _Answer(reply=reply, request_no=request_no, model=str(body.get("model")),
                         usage=reply.usage or _default_usage(body))
        if body.get("stream"):
            self._stream(list(answer.events()), request_no, reply.chunk_delay)
        else:
            self._send_json(200, answer.message())

    def _stream(self, events: list[JSON], request_no: int, delay: float) -> None:
        """Send ``event:``/``data:`` pairs (``delay`` seconds apart) and close the connection;
        recorded in the owner's ``streams``, with whether the client closed it first."""
        log = StreamLog(request_no, total=len(events))
        with self.server.owner._lock:
            self.server.owner.streams.append(log)
        encoded = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
        send_events(self, encoded, log, delay, headers=[("request-id", "req_test")])


class AnthropicServer:
    """A scripted Anthropic Messages API server on loopback that enforces the API's rules.

    ``script`` is consumed in order, one reply per *valid* request; ``default`` (a callable
    ``request_body -> reply``) answers once the script is empty, otherwise HTTP 500.
    ``requests`` records every message-request body received (valid or not), in arrival order;
    ``rejected`` holds ``(index into requests, problems)`` for each body answered with 400;
    ``errors`` holds exceptions raised by script callables (answered with HTTP 500).
    """

    def __init__(self, script: Sequence[ReplyLike] | None = None, *,
                 default: Callable[[JSON], ReplyLike] | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.script: list[ReplyLike] = list(script or [])
        self.default = default
        self.requests: list[JSON] = []
        self.rejected: list[tuple[int, list[str]]] = []
        self.count_requests: list[JSON] = []
        self.errors: list[Exception] = []
        self.streams: list[StreamLog] = []  # streamed answers, in the order they started
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._address = (host, port)
        self._httpd: LoopbackServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The ``base_url`` for ``ChatAnthropic`` (the SDK appends ``/v1/messages``)."""
        if self._httpd is None:
            raise RuntimeError("AnthropicServer is not started")
        return f"http://{self._address[0]}:{self._httpd.server_address[1]}"

    @property
    def accepted(self) -> list[JSON]:
        """The request bodies that passed the rules, in arrival order."""
        bad = {index for index, _ in self.rejected}
        return [body for i, body in enumerate(self.requests) if i not in bad]

    def start(self) -> Self:
        """Bind and serve in a daemon thread. Returns ``self``."""
        if self._httpd is None:
            self._httpd = LoopbackServer(self._address, self, _Handler)
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            kwargs={"poll_interval": 0.05}, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is not None and self._thread is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
        self._httpd, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _check(self, body: JSON, *, counted: bool) -> list[str]:
        """Record ``body`` and check it; a broken body is remembered in ``rejected``."""
        problems = check_request(body, count_tokens=not counted)
        with self._lock:
            if not counted:
                self.count_requests.append(body)
                return problems
            self.requests.append(body)
            if problems:
                self.rejected.append((len(self.requests) - 1, problems))
        return problems

    def _next(self, body: JSON) -> tuple[int, Reply]:
        """Resolve the reply for a valid ``body``; returns ``(request_no, reply)``."""
        with self._lock:
            request_no = next(self._counter)
            item: ReplyLike | None = self.script.pop(0) if self.script else None
        if item is None:
            if self.default is None:
                return request_no, error(500, "AnthropicServer script exhausted and no default set")
            item = self.default
        try:
            for _ in range(10):
                if isinstance(item, Reply):
                    return request_no, item
                item = text(item) if isinstance(item, str) else item(body)
            raise TypeError("script callable did not produce a Reply")
        except Exception as exc:  # noqa: BLE001 - surface a failing test callable as HTTP 500
            self.errors.append(exc)
            return request_no, error(500, f"script callable raised {exc!r}")

