"""Cutting a runaway reply while it streams (``graph/engine/text_loop.py``): how streamed text is read
(as the finished-reply check reads it), and the reply built from the chunks. Which calls are
streamed (LangChain would stream them anyway) is ``core/compat.streams``, tested beside it; the
loop through real clients and servers is in ``tests/e2e/test_streaming.py``."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessageChunk

from langgraph_loop.core.messages import is_cut
from langgraph_loop.core.prompts import CUT_REPLY
from langgraph_loop.engine.final import without_tool_calls
from langgraph_loop.engine.text_loop import LINE, StreamText, TextLoop, build_reply, text_loop

RUNAWAY = "I will fix the typo now. " * 200
CODE = "Here is the fix:\n```python\n" + "    print(row.name, row.size)\n" * 30 + "```\nDone.\n"
PROSE = "".join(f"Step {i}: read the file, then run test number {i} and compare.\n" for i in range(40))


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


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


MARKDOWN = json.loads((Path(__file__).parents[1] / "data" / "markdown_answers.json").read_text())["answers"]


@pytest.mark.parametrize("answer", MARKDOWN, ids=[a["name"] for a in MARKDOWN])
def test_markdown_is_not_a_loop_and_chanting_is_cut(answer: dict[str, Any]) -> None:
    """The corpus (``tests/data/markdown_answers.json``): tables of several widths, separator
    rows, dividers, box drawing, lists of 50 items, CSV rows and fenced code stream whole; the
    looping replies are cut before their end. The finished reply gets the same verdict."""
    text, feed = answer["text"], StreamText()
    cut = next((i for i, piece in enumerate(pieces(answer["text"], 7)) if feed.add(piece)), None)
    assert (cut is not None) == answer["loop"] == text_loop(text)
    assert cut is None or 7 * (cut + 1) < len(text)


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
