"""Result normalization: the volatile parts of a tool result (ids, timestamps, durations, temp
paths, the shell's line counter, object ids) replaced by placeholders, so that two runs of the
same command that differ only there read alike.

``VOLATILE`` lists the rules and their placeholders, in the order ``normalize`` applies them;
``normalize`` gives what their substitutions in a row give, reading the text a few times at C
speed (the comment above ``_ALIKE``). The loop detector (``graph/engine/detection.py``: ``Result``,
``content_hash``) normalizes a result only when two results could still be equal once
normalized, and then once (a memo). No rule's match holds a line break: normalization keeps a
text's line count, which lets the detector tell most results apart without normalizing them.

Example:
    >>> normalize("Ran 4 tests in 0.012s at 2025-11-19T00:04:32, id 0x7f3a2c10")
    'Ran 4 tests in <duration> at <time>, id <addr>'
    >>> normalize("took 5\\nms").count("\\n")
    1
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

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
"""The volatile parts of a result and their placeholders (``normalize`` replaces them in this
order)."""

# How ``normalize`` stays close to a scan per rule in C. A pattern that starts with ``\b`` or a
# digit makes ``re`` try a match at every character (~16 ns each), one led by a character class
# pays ~4 ns a character to find it, one led by a literal is scanned for it in C (0.3-1 ns a
# character) and tried only there; a Python step per match costs ~0.5 µs. Volatile parts start
# with digits, so the rules look for them on a *class string* (``_classes``): one byte per
# character, every digit ``0``, letters in lower case (with the four non-ASCII ones
# ``re.IGNORECASE`` takes for ``i``, ``s`` and ``k``), every space a blank, other word characters
# ``\x80``, the rest ``\x81``. There a date is the literal ``-00-00``: a rule's ``_Finder`` is led
# by such a literal, its look-behinds check what comes before (the boundary, the year), and its hits
# give the spans the rule's own ``sub`` replaces; they are cut out of the text and of the class
# string alike (``_splice``). Where the class string merges what a pattern tells apart (a tab and a
# blank), each match is confirmed on the text; a rule led by a literal of its own (``0x``, ``/tmp``)
# runs its ``sub`` on the text itself. A rule runs only when its gate, a needle of every match, is
# in the class string of the original text (no placeholder completes a needle) and, if all its
# matches hold a digit, so does the text. Tests check that ``normalize`` and the subs in a row
# agree (``tests/nodes/test_normalize.py``).
_ALIKE = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}  # İ ı ſ K: i, s, k to re.I
_UNSPELLED = "\x82"  # a decimal digit beyond ASCII (``\\d`` in any script): the subs themselves run


def _class_char(char: str) -> str:
    """What a character beyond Latin-1 is in the class string, as a Latin-1 character that
    ``_CLASS_OF_BYTE`` maps to its class: a letter alike, a blank, ``ª`` (a word character),
    ``\\x81`` (any other) or ``_UNSPELLED``."""
    if char in _ALIKE:
        return _ALIKE[char]
    if char.isdecimal():
        return _UNSPELLED
    return " " if char.isspace() else "\xaa" if char.isalnum() else "\x81"


class _Beyond(dict[int, str]):
    """``str.translate`` table: a character beyond Latin-1 to its class character, found once."""

    def __missing__(self, code: int) -> str:
        found = self[code] = chr(code) if code < 256 else _class_char(chr(code))
        return found


_BEYOND = _Beyond()
_CLASS_OF_BYTE = bytes.maketrans(bytes(range(256)), b"".join(
    b"0" if char.isdecimal() else b" " if char.isspace() else char.lower().encode() if char.isascii()
    else b"\x80" if char.isalnum() else char.encode("latin-1") if char == _UNSPELLED else b"\x81"
    for char in bytes(range(256)).decode("latin-1")))
_WITHIN_LATIN1 = re.compile("[\x00-\xff]+")
_SPECIAL = re.compile(r"[^\W\x00-\xff]|\s")  # beyond Latin-1: a letter, a digit or a space


def _spell(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(map(_BEYOND.__getitem__, map(ord, error.object[error.start:error.end]))), error.end


codecs.register_error("langgraph_loop.classes", _spell)


@functools.cache
def _bmp() -> str:
    """``str.translate`` table: the class character of every code point below 0x10000 (64 KB, built
    on first use; it translates twice as fast as a dict)."""
    return "".join(chr(code) if code < 256 else _class_char(chr(code)) for code in range(0x10000))


def _spelled_beyond_latin1(text: str) -> bool:
    """Whether ``text`` holds a letter, a digit or a space beyond Latin-1 (not only symbols)."""
    return _SPECIAL.search(_WITHIN_LATIN1.sub("", text)) is not None


def _classes(text: str) -> bytes:
    """The class string of ``text`` (see above); it holds ``_UNSPELLED`` for a digit beyond ASCII.
    Characters beyond Latin-1 cost the more, the more of them are letters, digits or spaces."""
    if text.isascii():
        return text.encode("ascii").translate(_CLASS_OF_BYTE)
    many = len(text) - len(text.encode("latin-1", "ignore")) >= 256  # characters beyond Latin-1
    if not (many and _spelled_beyond_latin1(text[:2048])) and not _spelled_beyond_latin1(text):
        return text.encode("latin-1", "replace").translate(_CLASS_OF_BYTE)  # "?" stands for each symbol
    if many:  # a table per character, the error handler for those beyond it (emoji)
        return text.translate(_bmp()).encode("latin-1", "langgraph_loop.classes").translate(_CLASS_OF_BYTE)
    return text.encode("latin-1", "langgraph_loop.classes").translate(_CLASS_OF_BYTE)  # a few, by runs


_W = rb"[0-9a-z_\x80]"  # a word character in the class string
_END = rb"(?!" + _W + rb")"  # a word boundary after a word character
_WORD_BYTES = frozenset(b"0abcdefghijklmnopqrstuvwxyz_\x80")


@dataclass(frozen=True)
class _Finder:
    """Where a rule matches, found on the class string. Each of ``patterns`` is led by a literal
    (their matches never overlap); a hit's match starts ``back`` characters before it, or where
    ``start`` says (-1: none there); ``confirm`` checks a match on the text where the class string
    merges what the rule's pattern tells apart, and gives its end (-1: none)."""

    patterns: tuple[re.Pattern[bytes], ...]
    back: int = 0
    start: Callable[[bytes, int], int] | None = None
    confirm: Callable[[str, int, int], int] | None = None


def _spans(finder: _Finder, text: str, classes: bytes) -> list[tuple[int, int]]:
    """The spans the rule's own ``sub`` replaces in ``text`` (``classes``: its class string)."""
    if len(finder.patterns) == 1:
        return _hits(finder, finder.patterns[0], text, classes)
    return sorted(span for pattern in finder.patterns for span in _hits(finder, pattern, text, classes))


def _hits(finder: _Finder, pattern: re.Pattern[bytes], text: str, classes: bytes) -> list[tuple[int, int]]:
    """One pattern's spans, left to right as a ``sub`` finds them."""
    spans: list[tuple[int, int]] = []
    back, start_of, confirm = finder.back, finder.start, finder.confirm
    last = pos = 0
    while True:
        for hit in pattern.finditer(classes, pos):
            at, end = hit.span()
            start = at - back if start_of is None else start_of(classes, at)
            if start >= last and confirm is not None:
                end = confirm(text, start, end)
                if end != hit.end() and end >= 0:  # the text's match ends elsewhere: go on from its end
                    spans.append((start, end))
                    last = pos = end
                    break
            if start < last or end < 0:  # no match there, or one inside the match just found:
                pos = at + 1  # look again right after its literal
                break
            spans.append((start, end))
            last = end
        else:
            return spans


def _splice(text: str, classes: bytes, spans: list[tuple[int, int]], repl: str) -> tuple[str, bytes]:
    """``text`` and its class string with each span replaced by ``repl`` (its own class string)."""
    if not spans:
        return text, classes
    parts, class_parts, last = [], [], 0
    for start, end in spans:
        parts.append(text[last:start])
        class_parts.append(classes[last:start])
        last = end
    parts.append(text[last:])
    class_parts.append(classes[last:])
    return repl.join(parts), repl.encode().join(class_parts)


def _clock_start(classes: bytes, at: int) -> int:
    """A clock time's start: one or two digits before its first ``:`` (at ``at``), a boundary
    before them."""
    start = at - 1
    if start < 0 or classes[start] != 48:  # 48: "0"
        return -1
    if start and classes[start - 1] == 48:
        start -= 1
    return start if not start or classes[start - 1] not in _WORD_BYTES else -1


def _digits_before(classes: bytes, end: int) -> int:
    """Where the run of digits that ends at ``end`` begins (read back 24 at a time, however long
    the run).

    Example:
        >>> _digits_before(b"a" + b"0" * 30_000, 30_001)
        1
    """
    while True:
        window = classes[end - 24 if end > 24 else 0:end]
        kept = len(window.rstrip(b"0"))
        if kept or end <= 24:
            return end - len(window) + kept
        end -= 24


def _duration_start(classes: bytes, at: int) -> int:
    """A duration's start from its number's last digit or its unit (at ``at``): the number's whole
    part if a boundary comes before it, else its fraction (a ``.`` is a boundary); -1 if neither."""
    last = at if classes[at] == 48 else at - 1 if classes[at - 1] == 48 else at - 2
    start = _digits_before(classes, last + 1)
    if start >= 2 and classes[start - 1] == 46 and classes[start - 2] == 48:  # 46: "."
        whole = _digits_before(classes, start - 1)
        if not whole or classes[whole - 1] not in _WORD_BYTES:
            return whole
    return start if not start or classes[start - 1] not in _WORD_BYTES else -1


_PREFIXES = ("toolu", "call", "msg", "req", "run", "chatcmpl", "block", "resp", "lc")


def _id_start(classes: bytes, at: int) -> int:
    """A prefixed id's start: the prefix (its finder checked one is there) before its separator."""
    return next(at - len(p) for p in _PREFIXES if classes[at - len(p):at] == p.encode())


def _shell_start(classes: bytes, at: int) -> int:
    """The shell's ``sh: line N:`` (at ``at``): with ``ba``, ``z`` or ``da`` before it if a
    boundary precedes those."""
    for start in (at - 2, at - 1, at):
        if start >= 0 and classes[start:at] in (b"ba", b"da", b"z", b"") and (
                not start or classes[start - 1] not in _WORD_BYTES):
            return start
    return -1


def _time_separator(text: str, start: int, end: int) -> int:
    return end if text[start + 10] in "Tt " else -1  # the class string's blank is any space


def _own(rule: int) -> Callable[[str, int, int], int]:
    """The rule's own pattern, matched on the text: the class string merges a tab with a blank."""
    pattern = VOLATILE[rule][0]

    def confirm(text: str, start: int, end: int) -> int:
        match = pattern.match(text, start)
        return match.end() if match else -1

    return confirm


def _find(*patterns: bytes, back: int = 0, start: Callable[[bytes, int], int] | None = None,
          confirm: Callable[[str, int, int], int] | None = None) -> _Finder:
    return _Finder(tuple(re.compile(pattern) for pattern in patterns), back, start, confirm)


_HEX = rb"[0-9a-f]"
_Subs = tuple[tuple[str, re.Pattern[str]], ...]  # (a needle the text must hold, the sub), in order


class _Way(NamedTuple):
    """How ``normalize`` finds a rule's matches: on the class string or with subs on the text, if
    one of the ``gate`` needles is in the original's class string (``b""``: always) and, when all
    its matches hold a digit, so does the text."""

    gate: tuple[bytes | re.Pattern[bytes], ...]
    how: _Finder | _Subs
    digit: bool = True


_ID_AFTER = rb"(?<=[ulgqnkpc]%s)(?=[0-9a-z]{8})"  # after an id prefix's last letter, 8 characters
_DASH = re.compile(rb"-(?:" + _ID_AFTER % b"-" + rb"|(?=" + _HEX + rb"{4}-)(?<=(?<!" + _W + rb")" + _HEX
                   + rb"{8}-))")  # a uuid's first dash or an id's: one scan gates both rules
_ID = (rb"[_-](?=[0-9a-z]{8,}" + _END + rb")(?:"
       + b"|".join(rb"(?<=(?<!" + _W + rb")" + p.encode() + rb".)" for p in _PREFIXES) + rb")[0-9a-z]+")
_FAST = [  # per rule of VOLATILE, in its order
    _Way((_DASH,), _find(rb"-(?<=(?<!" + _W + rb")" + _HEX + rb"{8}-)" + _HEX + rb"{4}-" + _HEX
                         + rb"{4}-" + _HEX + rb"{4}-" + _HEX + rb"{12}" + _END, back=8), digit=False),
    _Way((b"-",), _find(rb"-00-00[t ]00:00(?<=(?<!" + _W + rb")0000-00-00[t ]00:00)(?::00(?:\.0+|)|)"
                        rb"(?:z|[+-]00:?00|)", back=4, confirm=_time_separator)),
    _Way((b":",), _find(rb":00:00(?:\.0+" + _END + rb"|" + _END + rb")", start=_clock_start)),
    _Way((b"x",), tuple((needle, re.compile(rf"0{x}(?<=\b0{x})[0-9a-fA-F]{{4,}}\b"))  # 0x, then 0X
                        for needle, x in (("", "x"), ("X", "X")))),
    _Way((b"",), _find(rb"0s(?:|ec|ecs|econds)" + _END, rb"0 s(?:|ec|ecs|econds)" + _END,
                       rb"m(?:(?<=0m)|(?<=0 m))(?:s|in|ins|inutes)" + _END, start=_duration_start,
                       confirm=_own(4))),  # the class string's blank is a line break too
    _Way((re.compile(rb"mp/"), b"/var/folders/"),
         (("", re.compile(r"/(?i:tmp|var/folders|private/var/folders)/[^\s'\"]+")),), digit=False),
    _Way((re.compile(rb"mp"),), _find(rb"tmp(?<!" + _W + rb"tmp)[0-9a-z_]{6,}" + _END), digit=False),
    _Way((re.compile(b"_" + _ID_AFTER % b"_"), _DASH), _find(_ID, start=_id_start), digit=False),
    _Way((b"0000000000",), (("", re.compile(r"1(?<=\b1)[5-9]\d{8}(?:\d{3})?\b")),)),
    _Way((re.compile(rb"id"),), _find(rb"pid(?<!" + _W + rb"pid)[ =:]+0", confirm=_own(9))),
    _Way((re.compile(rb"h: line "),), _find(rb"sh: line 0", start=_shell_start, confirm=_own(10))),
    _Way((re.compile(rb"m seed:"),), _find(rb"random seed:(?<!" + _W + rb"random seed:)", confirm=_own(11))),
    _Way((re.compile(rb"id"),), _find(rb"id(?<!" + _W + rb"id)[=:]", confirm=_own(12))),
]


def _opens(way: _Way, original: bytes, digits: bool, seen: dict[object, bool]) -> bool:
    """Whether a rule may match the text whose class string is ``original`` (``seen``: the needles
    looked for so far, some gates share them)."""
    if way.digit and not digits:
        return False
    for needle in way.gate:
        found = seen.get(needle)
        if found is None:
            found = seen[needle] = (needle in original if isinstance(needle, bytes)
                                    else needle.search(original) is not None)
        if found:
            return True
    return False


def normalize(text: str) -> str:
    """The text with its volatile parts (``VOLATILE``) replaced by placeholders, reading it a few
    times at C speed (see the comment above ``_ALIKE``).

    Example:
        >>> normalize("Ran 4 tests in 0.012s at 2025-11-19T00:04:32, id 0x7f3a2c10")
        'Ran 4 tests in <duration> at <time>, id <addr>'
        >>> normalize("/bin/bash: line 36191: javac: command not found")
        '/bin/sh: line <n>: javac: command not found'
    """
    classes = _classes(text)
    if _UNSPELLED.encode("latin-1") in classes:  # a digit beyond ASCII: the subs themselves
        for pattern, repl in VOLATILE:
            text = pattern.sub(repl, text)
        return text
    original, described = classes, text  # the gates read the original; ``classes`` describes ``described``
    seen: dict[object, bool] = {b"": True}
    digits = b"0" in original
    for (_, repl), way in zip(VOLATILE, _FAST, strict=True):
        if not _opens(way, original, digits, seen):
            continue
        if isinstance(way.how, _Finder):
            if described is not text:  # a sub on the text changed it
                classes, described = _classes(text), text
            text, classes = _splice(text, classes, _spans(way.how, text, classes), repl)
            described = text
        else:
            for needle, sub in way.how:
                if needle in text:
                    text = sub.sub(repl, text)
    return text
