"""Result normalization: a tool result's volatile parts (ids, timestamps, durations, temp paths...)
replaced by placeholders, so that two runs of the same command that differ only there read alike.

No rule's match holds a line break: normalization keeps a text's line count, which lets the
detector (``engine/detection.py: same_result``) tell most results apart without normalizing them.

Example:
    >>> normalize("Ran 4 tests in 0.012s at 2025-11-19T00:04:32, id 0x7f3a2c10")
    'Ran 4 tests in <duration> at <time>, id <addr>'
    >>> normalize("took 5\\nms").count("\\n")
    1
"""

from __future__ import annotations

import re

__all__ = ["VOLATILE", "normalize"]

_VOLATILE = [
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
    (r"\b0x[0-9a-f]{4,}\b", "<addr>"),
    (r"\b\d+(\.\d+)?[^\S\n]?(ms|s|sec|secs|seconds|min|mins|minutes)\b", "<duration>"),  # one line
    (r"(/tmp|/var/folders|/private/var/folders)/[^\s'\"]+", "<tmp>"),
    (r"\btmp[a-z0-9_]{6,}\b", "<tmp>"),
    (r"\b(toolu|call|msg|req|run|chatcmpl|block|resp|lc)[_-][a-z0-9]{8,}\b", "<id>"),
    (r"\b1[5-9]\d{8}(\d{3})?\b", "<epoch>"),
    (r"\bpid[ =:]+\d+\b", "pid <n>"),
    (r"\b(ba|z|da)?sh: line \d+:", "sh: line <n>:"),  # the shell's own line counter
    (r"\brandom seed: *\d+", "random seed: <n>"),
    (r"\bid[=:] *'?\d{6,}'?", "id=<n>"),  # Python object ids
]
VOLATILE = [(re.compile(pattern, re.IGNORECASE), repl) for pattern, repl in _VOLATILE]
"""The volatile parts of a result and their placeholders, in the order ``normalize`` applies them."""


def normalize(text: str) -> str:
    """The text with its volatile parts (``VOLATILE``) replaced by placeholders, rule by rule."""
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text
