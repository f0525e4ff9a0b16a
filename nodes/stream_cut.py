"""Stream a model call and close it as soon as its text loops (``engine/text_loop.py``).

When LangChain would stream the call anyway and the ``text`` layer is on, the ``model`` node
consumes ``stream()`` instead of ``invoke()`` (the same chunks reach the same handlers). When the
rule fires the stream is closed, and with it the provider's response: generation stops.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from contextlib import aclosing, closing
from typing import Any, cast

from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_loop.core.messages import reply_text
from langgraph_loop.engine.text_loop import StreamText, build_reply

__all__ = ["astream_reply", "stream_reply"]


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
