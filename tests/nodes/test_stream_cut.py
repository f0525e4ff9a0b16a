"""Cutting a runaway reply while it streams (``nodes/stream_cut.py``): which calls are streamed
(LangChain would stream them anyway), how streamed text is read (as the finished-reply check
reads it), and the reply built from the chunks. The loop through real clients and servers is in
``tests/e2e/test_streaming.py``."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import tool
from langchain_core.tracers._streaming import _V2StreamingCallbackHandler
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from langgraph_loop.core.compat import streams
from langgraph_loop.core.messages import is_cut
from langgraph_loop.core.prompts import CUT_REPLY
from langgraph_loop.nodes.fingerprint import TextLoop, text_loop
from langgraph_loop.nodes.model import without_tool_calls
from langgraph_loop.nodes.stream_cut import LINE, StreamText, build_reply

RUNAWAY = "I will fix the typo now. " * 200
CODE = "Here is the fix:\n```python\n" + "    print(row.name, row.size)\n" * 30 + "```\nDone.\n"
PROSE = "".join(f"Step {i}: read the file, then run test number {i} and compare.\n" for i in range(40))


class Tokens(BaseCallbackHandler):
    """A handler that wants tokens, as LangGraph's ``stream_mode="messages"`` handler does."""

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output


class Events(Tokens, _V2StreamingCallbackHandler):
    """A handler that wants v2 protocol events (``invoke`` emits them; ``stream()`` does not)."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def chat(**kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), model="m", **kwargs)


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


# --- which calls are streamed ---------------------------------------------------------------

def test_a_call_is_streamed_when_langchain_would_stream_it_anyway() -> None:
    tokens = {"callbacks": CallbackManager(handlers=[Tokens()])}
    assert not streams(chat(), {}, async_api=False)  # nobody asked for tokens: invoke
    assert streams(chat(), tokens, async_api=False)  # stream_mode="messages", astream_events
    assert streams(chat(), {"callbacks": [Tokens()]}, async_api=True)
    assert streams(chat(streaming=True), {}, async_api=False)
    assert streams(chat(streaming=True).bind_tools([lookup]), {}, async_api=False)
    assert streams(chat(callbacks=[Tokens()]), {}, async_api=False)


def test_a_call_keeps_invoke_where_stream_would_behave_differently() -> None:
    tokens = {"callbacks": [Tokens()]}
    assert not streams(chat(streaming=True, disable_streaming=True), tokens, async_api=False)
    no_tools = chat(streaming=True, disable_streaming="tool_calling")
    assert streams(no_tools, {}, async_api=False)
    assert not streams(no_tools.bind_tools([lookup]), {}, async_api=False)
    assert not streams(chat().bind(stream=False), tokens, async_api=False)
    assert not streams(chat().with_retry(), tokens, async_api=False)  # stream() would not retry
    assert not streams(chat(cache=InMemoryCache()), tokens, async_api=False)  # nor read the cache
    assert not streams(chat(), {"callbacks": [Tokens(), Events()]}, async_api=False)  # v2 events


def test_fallbacks_stream_as_their_primary_model_does() -> None:
    tokens = {"callbacks": [Tokens()]}
    assert streams(chat().with_fallbacks([chat()]), tokens, async_api=False)
    assert not streams(chat(disable_streaming=True).with_fallbacks([chat()]), tokens, async_api=False)


# --- how streamed text is read -----------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 7, 25, 300])
def test_a_runaway_is_caught_within_a_line_however_it_is_chunked(size: int) -> None:
    text = StreamText()
    seen = 0
    for piece in pieces(RUNAWAY, size):
        seen += len(piece)
        if text.add(piece):
            break
    assert seen <= 2 * LINE + size  # no newline in it: read every LINE characters


def test_a_code_block_streamed_in_small_pieces_is_not_cut() -> None:
    """The fence split across chunks is still seen: its lines are not read as prose. Fed the raw
    pieces, the rule would take the repeated code lines for a loop."""
    assert not text_loop(CODE)
    text = StreamText()
    assert not any(text.add(piece) for piece in pieces(CODE, 2))
    raw = TextLoop()
    assert any(raw.add(piece) for piece in pieces(CODE, 2))


@given(cuts=st.lists(st.integers(min_value=0, max_value=2500), max_size=40),
       text=st.sampled_from([CODE, PROSE, RUNAWAY[:1000] + "\n", "ok\n" * 50]))
def test_streamed_text_gets_the_finished_replys_verdict(cuts: list[int], text: str) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    feed = StreamText()
    assert any(feed.add(text[a:b]) for a, b in pairwise(bounds)) == text_loop(text)


# --- the reply ------------------------------------------------------------------------------------

def test_the_reply_is_merged_from_the_chunks_and_tagged_when_cut() -> None:
    chunks = [AIMessageChunk("I will ", id="r1"), AIMessageChunk("fix it.", id="r1")]
    whole = build_reply(chunks, cut=False)
    assert (type(whole).__name__, whole.content, whole.id, is_cut(whole)) == (
        "AIMessage", "I will fix it.", "r1", False)
    cut = build_reply(chunks, cut=True)
    assert cut.response_metadata["langgraph_loop_cut"] == "text" and is_cut(cut)
    with pytest.raises(ValueError, match="no chunks"):
        build_reply([], cut=False)


def test_a_half_streamed_call_of_a_cut_reply_is_dropped() -> None:
    """LangChain parses a half-streamed call's arguments as partial JSON: a valid-looking call
    with the wrong arguments. The model node stores a cut reply without its calls."""
    chunks = [AIMessageChunk("", tool_call_chunks=[
                  {"name": "lookup", "args": '{"key": "ab', "id": "c1", "index": 0}]),
              AIMessageChunk("Wait. " * 3)]
    cut = build_reply(chunks, cut=True)
    assert cut.tool_calls[0]["args"] == {"key": "ab"}  # not what the model was going to send
    stored = without_tool_calls(cut)
    assert stored.tool_calls == [] and stored.invalid_tool_calls == [] and is_cut(stored)
    assert stored.response_metadata["langgraph_loop_dropped_tool_calls"][0]["name"] == "lookup"


def test_a_cut_reply_keeps_no_reasoning_and_never_goes_back_empty() -> None:
    """A thinking block cut before its signature is rejected when sent back (and an earlier
    turn's reasoning is optional): a cut reply drops its reasoning; with no text left (it looped
    in its reasoning, or in blank lines) it says it was cut."""
    signed = AIMessageChunk([{"type": "thinking", "thinking": "Line 3.", "signature": "s", "index": 0}])
    text = AIMessageChunk([{"type": "text", "text": "I will fix it. " * 3, "index": 1}])
    assert build_reply([signed, text], cut=True).content == [
        {"type": "text", "text": "I will fix it. " * 3, "index": 1}]
    unsigned = AIMessageChunk([{"type": "thinking", "thinking": "Wait. " * 40, "index": 0}])
    assert build_reply([unsigned], cut=True).content == CUT_REPLY
    assert build_reply([AIMessageChunk("\n" * 500)], cut=True).content == CUT_REPLY
    assert build_reply([signed], cut=False).content[0]["signature"] == "s"  # not cut: as it came
