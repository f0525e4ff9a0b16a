"""The ``text`` loop layer's rule: does a reply's text loop (Gemini CLI's rule, read a line at a time)?

``StreamText`` feeds ``TextLoop`` streamed pieces; ``build_reply`` makes a cut reply. The ``model``
node streams and cuts (``nodes/stream_cut.py``); the detector warns, then stops at the second cut.

Example:
    >>> text = StreamText()
    >>> any(text.add(piece) for piece in ["I will fix ", "the typo now. "] * 20)
    True
    >>> from langchain_core.messages import AIMessageChunk
    >>> from langgraph_loop.core.messages import is_cut
    >>> reply = build_reply([AIMessageChunk("I will "), AIMessageChunk("fix")], cut=True)
    >>> reply.content, is_cut(reply)
    ('I will fix', True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessageChunk, message_chunk_to_message

from langgraph_loop.core import prompts
from langgraph_loop.core.messages import CUT_KEY, reply_text

__all__ = ["CHUNK", "HISTORY", "LINE", "REASONING", "SHORTEST_LOOP", "SPAN", "TIMES", "StreamText",
           "TextLoop", "build_reply", "line_kind", "text_loop"]

# --- the text-loop rule (Gemini CLI's content-loop rule, knowing markdown) -----------------

CHUNK, TIMES, SPAN, HISTORY = 50, 10, 5 * 50, 5000
SHORTEST_LOOP = 2 * TIMES  # no shorter text loops: ``TIMES`` lines of at least one character each
LINE = 200  # a line is read in parts of about this size while it streams; its kind, from its start
_ROW = re.compile(r"\s*[|\u2502\u2503\u2551]|[^|\n]*\|[^|\n]*\||(?:[^,\n]*,(?! )){3}|(?:[^\t\n]*\t){2}")
_ITEM = re.compile(r"\s*(?:[-*+\u2022\u2023\u25e6\u25aa]|\d{1,4}[.)]|[a-zA-Z][.)])\s+(?:\[[ xX]\]\s*)?")
_HEAD = re.compile(r"\s*(?:#{1,6}\s|>)")
_ALNUM = re.compile(r"[^\W_]")
_RUN = re.compile(r"(.)\1{3,}")
_DIGITS = re.compile(r"\d+")
Kind = Literal["prose", "head", "rule", "row", "item"]


def line_kind(line: str) -> Kind:
    """What a line of a reply is (from its first ``LINE`` characters): a *rule* has no letter
    or digit (dividers, separator rows, box drawing), a *row* is a table, CSV or TSV row, an
    *item* a list item, a *head* a heading or a quote, the rest *prose*."""
    start = line[:LINE]
    if not _ALNUM.search(start):
        return "rule" if len(start.strip()) >= 3 else "prose"
    if _ROW.match(start):
        return "row"
    return "item" if _ITEM.match(start) else "head" if _HEAD.match(start) else "prose"


class TextLoop:
    """Gemini CLI's rule over a reply's lines (or parts of a long line): ``add`` is True once it loops.

    Only prose is read by the rule, a run of one character cut to three; code is skipped; rules,
    rows and items restart it unread (a separator row, a divider or a list of similar items is no
    loop): a row's or item's text (without its number) loops at ``TIMES`` in ``2 * TIMES`` lines."""

    def __init__(self) -> None:
        self.history = ""
        self.places: dict[str, list[int]] = {}
        self.next = 0
        self.in_code = False
        self.kind: Kind = "prose"
        self.fresh = True  # the next piece starts a line
        self.lines: list[str] = []  # the last ``2 * TIMES`` rows and items, without their list markers

    def _reset(self) -> None:
        self.history, self.places, self.next = "", {}, 0

    def add(self, piece: str) -> bool:
        """Append one piece of text (a line, or a part of one); True when the text now loops."""
        starts, self.fresh = self.fresh, piece.endswith("\n")
        fences = piece.count("```")
        was_in_code = self.in_code
        self.in_code = self.in_code != (fences % 2 == 1)
        if fences:
            self._reset()
        if was_in_code or self.in_code:
            return False
        if starts:
            self.kind = line_kind(piece)
        if self.kind != "prose":
            self._reset()
        if self.kind in ("row", "item", "head"):
            return starts and self._repeated_line(piece)
        if self.kind == "rule":
            return False
        return self._read(self._collapse(piece))

    def _repeated_line(self, line: str) -> bool:
        key = (_ITEM.sub("", line[:LINE], count=1) if self.kind == "item" else line[:LINE]).strip()
        self.lines = [*self.lines[-(2 * TIMES - 1):], key]
        return self.lines.count(key) >= TIMES

    def _collapse(self, piece: str) -> str:
        """``piece`` with numbers read as ``0``, one-character runs cut to three (across pieces)."""
        if self.history.endswith("0") and (number := _DIGITS.match(piece)):
            piece = piece[number.end():]  # a number split across two pieces
        piece = _RUN.sub(r"\1\1\1", _DIGITS.sub("0", piece))
        if piece and self.history.endswith(piece[0]):
            char = piece[0]
            before = len(self.history) - len(self.history.rstrip(char))
            lead = len(piece) - len(piece.lstrip(char))
            piece = char * max(0, min(lead, 3 - before)) + piece[lead:]
        return piece

    def _read(self, piece: str) -> bool:
        self.history += piece
        if len(self.history) > HISTORY:
            self._trim(len(self.history) - HISTORY)
        while self.next + CHUNK <= len(self.history):
            if self._repeats(self.history[self.next:self.next + CHUNK]):
                return True
            self.next += 1
        return False

    def _trim(self, cut: int) -> None:
        self.history = self.history[cut:]
        self.next = max(0, self.next - cut)
        self.places = {k: kept for k, v in self.places.items()
                       if (kept := [i - cut for i in v if i >= cut])}

    def _repeats(self, chunk: str) -> bool:
        places = self.places.setdefault(chunk, [])
        places.append(self.next)
        if len(places) < TIMES:
            return False
        last = places[-TIMES:]
        if (last[-1] - last[0]) / (TIMES - 1) > SPAN:
            return False
        periods = {self.history[a:b] for a, b in pairwise(last)}
        return len(periods) <= TIMES // 2


def text_loop(text: str) -> bool:
    """Does this text loop (the rule fed line by line)?"""
    loop = TextLoop()
    return any(loop.add(line) for line in text.splitlines(keepends=True))


# --- streaming a call, and cutting it -------------------------------------------------------

REASONING = frozenset({"thinking", "redacted_thinking", "reasoning"})
"""Content-block types a cut reply leaves out (Anthropic's, OpenAI Responses', LangChain's)."""


class StreamText:
    """``TextLoop`` fed whole lines as the finished-reply check is (longer than ``LINE``: in parts),
    so a code fence, a table row or a list marker split across two chunks is seen as what it is."""

    def __init__(self) -> None:
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


def _sendable(content: Any) -> Any:
    """A cut reply's content without reasoning blocks; ``prompts.CUT_REPLY`` if no text is left."""
    if isinstance(content, list):
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") in REASONING)]
    if reply_text(content).strip():
        return content
    if isinstance(content, list) and content:
        return [*content, {"type": "text", "text": prompts.CUT_REPLY}]
    return prompts.CUT_REPLY


def build_reply(chunks: Sequence[Any], *, cut: bool) -> Any:
    """The reply the chunks make, merged as ``invoke`` merges them; when ``cut``, tagged
    (``CUT_KEY``) and without reasoning blocks (one cut before its signature is rejected)."""
    if not chunks:
        raise ValueError("model: the stream returned no chunks")
    head, *rest = chunks
    merged = head + rest if rest and isinstance(head, BaseMessageChunk) else head
    reply = message_chunk_to_message(merged)
    if not cut or not isinstance(reply, AIMessage):
        return reply
    return reply.model_copy(update={"content": _sendable(reply.content), "response_metadata": {
        **reply.response_metadata, CUT_KEY: "text"}})
