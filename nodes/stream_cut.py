"""Cut a runaway reply while it streams: the ``text`` loop layer, live.

When LangChain would stream the model call anyway (a streaming callback handler is attached,
as ``stream_mode="messages"`` and ``astream_events`` attach one, or the chat model has
``streaming=True``) and the ``text`` layer is on, the ``model`` node consumes ``stream()``
instead of ``invoke()``. The same chunks reach the same callback handlers, so a user's stream
sees what it saw before. Each chunk's text and reasoning (``reply_text``) are fed to Gemini
CLI's rule (``TextLoop``) a line at a time, as the check of a finished reply feeds it (a line
longer than ``LINE`` characters in parts, so a runaway without newlines is caught too). When
the rule fires the stream is closed, and with it the provider's HTTP response: generation
stops. The reply is built from the chunks so far and tagged
``response_metadata["langgraph_loop_cut"] = "text"``, without its reasoning blocks (one cut
before its signature is rejected when sent back; an earlier turn's reasoning is optional) and
with ``prompts.CUT_REPLY`` as its text when no text is left; the ``model`` node drops its tool
calls (a half-streamed call has invalid arguments), and the loop detector sends the run back to
the model with a notice, or stops it at the second cut (``nodes/loop_detection.py``).

``invoke`` stays for a model inside ``with_retry`` (``stream()`` does not retry), with an LLM
cache (``stream()`` does not read it), or chosen per run (a configurable model).

Example:
    >>> text = StreamText()
    >>> any(text.add(piece) for piece in ["I will fix ", "the typo now. "] * 20)
    True
    >>> from langgraph_loop.core.messages import is_cut
    >>> reply = build_reply([AIMessageChunk("I will "), AIMessageChunk("fix")], cut=True)
    >>> reply.content, is_cut(reply)
    ('I will fix', True)
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import aclosing, closing
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessageChunk,
    message_chunk_to_message,
)
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_loop.core import prompts
from langgraph_loop.core.messages import CUT_KEY
from langgraph_loop.nodes.loop_detection import LINE, TextLoop, reply_text

__all__ = ["LINE", "REASONING", "StreamText", "astream_reply", "build_reply", "stream_reply"]

REASONING = frozenset({"thinking", "redacted_thinking", "reasoning"})
"""Content-block types a cut reply leaves out (Anthropic's, OpenAI Responses', LangChain's)."""


class StreamText:
    """``TextLoop`` over streamed pieces, fed whole lines as the finished-reply check is (a
    line longer than ``LINE`` characters in parts): a code fence, a table row or a list
    marker split across two chunks is still seen as what it is."""

    def __init__(self) -> None:
        """Nothing seen yet."""
        self.loop = TextLoop()
        self.pending = ""

    def add(self, piece: str) -> bool:
        """Append one streamed piece; True once the text loops."""
        text, self.pending = self.pending + piece, ""
        end = text.rfind("\n") + 1
        if not end and len(text) < LINE:
            self.pending = text  # the line goes on
            return False
        if end:
            text, self.pending = text[:end], text[end:]
        return any(self.loop.add(line) for line in text.splitlines(keepends=True))


# --- streaming -----------------------------------------------------------------------------------

def _sendable(content: Any) -> Any:
    """A cut reply's content without reasoning blocks, and with text (``prompts.CUT_REPLY``
    when none is left)."""
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") in REASONING)]
    if reply_text(content).strip():
        return content
    if isinstance(content, list) and content:
        return [*content, {"type": "text", "text": prompts.CUT_REPLY}]
    return prompts.CUT_REPLY


def build_reply(chunks: Sequence[Any], *, cut: bool) -> Any:
    """The reply the chunks make, merged as ``invoke`` merges them; when ``cut``, tagged and
    made sendable (see module docstring)."""
    if not chunks:
        raise ValueError("model: the stream returned no chunks")
    head, *rest = chunks
    merged = head + rest if rest and isinstance(head, BaseMessageChunk) else head
    reply = message_chunk_to_message(merged)
    if not cut or not isinstance(reply, AIMessage):
        return reply
    return reply.model_copy(update={"content": _sendable(reply.content), "response_metadata": {
        **reply.response_metadata, CUT_KEY: "text"}})


class _Watch:
    """The chunks of one streamed reply, and the rule reading their text."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []
        self.text = StreamText()

    def add(self, chunk: Any) -> bool:
        """Keep the chunk; True when the text now loops."""
        self.chunks.append(chunk)
        return isinstance(chunk, AIMessageChunk) and self.text.add(
            reply_text(chunk.content, chunk.additional_kwargs))


def stream_reply(runnable: Runnable[Any, Any], request: Any, config: RunnableConfig) -> Any:
    """``runnable.stream``, closed as soon as the text loops; the reply (see module docstring)."""
    watch = _Watch()
    with closing(cast("Generator[Any, None, None]", runnable.stream(request, config))) as chunks:
        cut = any(watch.add(chunk) for chunk in chunks)
    return build_reply(watch.chunks, cut=cut)


async def astream_reply(runnable: Runnable[Any, Any], request: Any, config: RunnableConfig) -> Any:
    """``runnable.astream``, closed as soon as the text loops; the reply."""
    watch, cut = _Watch(), False
    async with aclosing(cast("AsyncGenerator[Any, None]", runnable.astream(request, config))) as chunks:
        async for chunk in chunks:
            if watch.add(chunk):
                cut = True
                break
    return build_reply(watch.chunks, cut=cut)
