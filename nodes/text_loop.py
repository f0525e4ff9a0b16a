"""Text loops: the model repeating its own text within one reply (pure).

Gemini CLI's content-loop rule (``packages/core/src/services/loopDetectionService.ts``): a
50-character chunk seen 10 times, its last 10 occurrences 5 chunks apart on average at most,
with at most 5 distinct texts between them, over the last 5,000 characters. The text is fed
line by line; a line holding a code fence, a table row, a list item, a heading or a
blockquote starts the tracking again, and text inside code blocks and divider lines is
never analysed. The reply's text and its reasoning blocks are checked.

Example:
    >>> text_loop("Wait, I replaced it with itself. " * 12), text_loop("a b c d e f " * 3)
    (True, False)
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

__all__ = ["TextLoop", "reply_text", "text_loop"]

CHUNK, TIMES, SPAN, HISTORY = 50, 10, 5 * 50, 5000
_STRUCTURE = re.compile(r"(^|\n)\s*(\|.*\||[|+-]{3,})|(^|\n)\s*([*+-]|\d+\.)\s|(^|\n)#+\s|(^|\n)>\s")
_DIVIDER = re.compile(r"^[+\-_=*\u2500-\u257f]+$")


class TextLoop:
    """Gemini CLI's rule over a stream of text pieces: :meth:`add` is True once it loops.

    Example:
        >>> loop = TextLoop()
        >>> any(loop.add("I will fix the typo now. ") for _ in range(30))
        True
        >>> loop = TextLoop()
        >>> any(loop.add(f"- item {i} of the list, each one different\\n") for i in range(30))
        False
    """

    def __init__(self) -> None:
        """Empty history."""
        self.history = ""
        self.places: dict[str, list[int]] = {}
        self.next = 0
        self.in_code = False

    def _reset(self) -> None:
        self.history, self.places, self.next = "", {}, 0

    def add(self, piece: str) -> bool:
        """Append one piece of text; True when the text now loops."""
        fences = piece.count("```")
        divider = bool(_DIVIDER.match(piece.strip())) if piece.strip() else False
        if fences or divider or _STRUCTURE.search(piece):
            self._reset()
        was_in_code = self.in_code
        self.in_code = self.in_code != (fences % 2 == 1)
        if was_in_code or self.in_code or divider:
            return False
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


def reply_text(content: Any, additional: dict[str, Any] | None = None) -> str:
    """A reply's own text: its text and reasoning blocks, and a ``reasoning_content`` field.

    Example:
        >>> reply_text([{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}])
        'hm\\nok'
    """
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                parts += [str(block[k]) for k in ("text", "thinking", "reasoning")
                          if isinstance(block.get(k), str)]
    reasoning = (additional or {}).get("reasoning_content")
    if isinstance(reasoning, str):
        parts.insert(0, reasoning)
    return "\n".join(p for p in parts if p)
