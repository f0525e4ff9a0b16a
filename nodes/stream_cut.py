"""The ``model`` node's call, closed as soon as its text loops (``engine/text_loop.py``).

When LangChain would stream the call anyway and the ``text`` layer is on, the call consumes
``stream()`` instead of ``invoke()`` (the same chunks reach the same handlers). When the
rule fires the stream is closed, and with it the provider's response: generation stops.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from contextlib import aclosing, closing
from typing import Any, cast

from langchain_core.messages import AIMessageChunk
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_loop.core.compat import streams
from langgraph_loop.core.messages import reply_text
from langgraph_loop.engine.text_loop import StreamText, build_reply

__all__ = ["amodel_reply", "model_reply"]


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


def model_reply(runnable: Runnable[Any, Any], request: Any, config: RunnableConfig, watch_text: bool) -> Any:
    """The model call; streamed and closed as soon as the text loops when ``watch_text`` (the
    ``text`` layer is on) and LangChain streams it anyway (see module docstring)."""
    if not (watch_text and streams(runnable, config, async_api=False)):
        return runnable.invoke(request, config)
    watch = _Watch()
    with closing(cast("Generator[Any, None, None]", runnable.stream(request, config))) as chunks:
        cut = any(watch.add(chunk) for chunk in chunks)
    return build_reply(watch.chunks, cut=cut)


async def amodel_reply(runnable: Runnable[Any, Any], request: Any, config: RunnableConfig,
                       watch_text: bool) -> Any:
    """Async ``model_reply``."""
    if not (watch_text and streams(runnable, config, async_api=True)):
        return await runnable.ainvoke(request, config)
    watch, cut = _Watch(), False
    async with aclosing(cast("AsyncGenerator[Any, None]", runnable.astream(request, config))) as chunks:
        async for chunk in chunks:
            if watch.add(chunk):
                cut = True
                break
    return build_reply(watch.chunks, cut=cut)
