"""Small text helpers with one implementation each: digests, clipping, shortening.

Example:
    >>> shorten("a   lot\\n of   space", 10)
    'a lot of …'
    >>> clip("abcdef", 4), len(digest("x")), len(digest("x", 10))
    ('abc…', 16, 10)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["as_text", "clip", "digest", "shorten"]


def digest(text: str, length: int = 16) -> str:
    """A short, stable hex digest of ``text`` (SHA-1, first ``length`` characters)."""
    return hashlib.sha1(text.encode()).hexdigest()[:length]


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten(text: str, limit: int = 500) -> str:
    """Collapse whitespace and cut to ``limit`` characters with an ellipsis."""
    return clip(" ".join(text.split()), limit)


def as_text(content: Any) -> str:
    """Message content as text: a string as it is, anything else as JSON."""
    return content if isinstance(content, str) else json.dumps(content, default=str)
