"""What a tool result, a call's arguments and a reply's text say, for comparing them (pure).

**Results.** Two results are *the same* when their normalized text is equal: content blocks
lose their ``id`` (MCP adapters give every block of every result a fresh one), and volatile
parts of the text are replaced by placeholders: UUIDs, timestamps and clock times, ``0x``
addresses, durations (``in 0.12s``), temp paths, prefixed ids (``toolu_…``, ``call_…``,
``msg_…``, MCP ``block_…``), epoch numbers, pids, the shell's line counter
(``bash: line 36191:``), random seeds and Python object ids. A result has *no content* when it
holds nothing but markup, whitespace and a zero exit status (a silent ``sed -i``).

**Paths.** The path-like tokens in a call's arguments (``src/app.py``, ``build/text``) and the
folders that hold them, hashed short: two calls *touch* each other when one names a path the
other names, a path inside one of its folders, or a folder holding one of its paths.

**Text loops.** Gemini CLI's content-loop rule (``loopDetectionService.ts``) on a reply's text
and reasoning, fed line by line: a 50-character chunk seen 10 times, close together, over the
last 5,000 characters; structure (fences, tables, lists, headings) restarts it, code is skipped.

Example:
    >>> content_hash("Ran 4 tests in 0.012s") == content_hash("Ran 4 tests in 0.398s")
    True
    >>> content_hash([{"type": "text", "text": "x", "id": "lc_1"}]) == content_hash(
    ...     [{"type": "text", "text": "x", "id": "lc_2"}])
    True
    >>> text_loop("Wait, I replaced it with itself. " * 12), text_loop("a b c d e f " * 3)
    (True, False)
    >>> path_keys({"command": "rm -f src/app.py"}) == path_keys({"command": "cat src/app.py"})
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import Any

from langchain_core.messages import AIMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.messages import call_label, digest

__all__ = ["VOLATILE", "SignedCall", "TextLoop", "args_text", "call_signature", "canonical_args",
           "content_hash", "is_empty", "normalize", "path_keys", "reply_text",
           "response_signature", "result_text", "sign_calls", "text_loop"]

HASH_LEN = 8  # hex digits: no collision in practice among the window's few dozen results

_VOLATILE = [
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
    (r"\b0x[0-9a-f]{4,}\b", "<addr>"),
    (r"\b\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|min|mins|minutes)\b", "<duration>"),
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
"""The volatile parts of a result and their placeholders."""

_MARKUP = re.compile(r"<[^>\n]{1,40}>")
_PATH = re.compile(r"(?:[\w.-]*/)+[\w.-]*\w|\b[\w-]+\.(?:py|pyi|java|kt|js|ts|tsx|jsx|go|rs|rb|c|h"
                   r"|cc|cpp|hpp|cs|php|sh|xml|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|html|css"
                   r"|gradle|properties|lock|sql|csv)\b")


def normalize(text: str) -> str:
    """The text with its volatile parts replaced by placeholders.

    Example:
        >>> normalize("Ran 4 tests in 0.012s at 2025-11-19T00:04:32, id 0x7f3a2c10")
        'Ran 4 tests in <duration> at <time>, id <addr>'
        >>> normalize("/bin/bash: line 36191: javac: command not found")
        '/bin/sh: line <n>: javac: command not found'
    """
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def _without_ids(value: Any) -> Any:
    """Content blocks (dicts in a list) without their ``id``, at any depth."""
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    return value


def result_text(content: Any) -> str:
    """A ToolMessage's content as text: a string as it is, blocks as JSON without their ids.

    Example:
        >>> result_text([{"type": "text", "text": "ok", "id": "b1"}])
        '[{"text": "ok", "type": "text"}]'
    """
    if isinstance(content, str):
        return content
    return json.dumps(_without_ids(content), sort_keys=True, default=str, ensure_ascii=False)


def content_hash(content: Any, *, normalized: bool = True) -> str:
    """A short hash of a tool result: equal for the same result (see module docstring)."""
    text = result_text(content)
    return _text_hash(text, normalized) if len(text) <= MEMO_CHARS else _hash(text, normalized)


MEMO_CHARS = 100_000
"""Results up to this size are memoized (64 of them: at most a few MB kept alive)."""


def _hash(text: str, normalized: bool) -> str:
    return digest(normalize(text) if normalized else text, HASH_LEN)


_text_hash = lru_cache(maxsize=64)(_hash)
"""One result is hashed twice per round (its call record, then the detector): normalize once."""


def is_empty(content: Any) -> bool:
    """No content: nothing but markup, whitespace and a zero exit status.

    Example:
        >>> is_empty("<returncode>0</returncode>\\n<output>\\n</output>"), is_empty("  ")
        (True, True)
        >>> is_empty("<returncode>1</returncode>"), is_empty("ok"), is_empty([])
        (False, False, True)
    """
    text = content if isinstance(content, str) else "" if not content else result_text(content)
    return _MARKUP.sub("", text).strip() in ("", "0")


def _tokens(dumped: str) -> set[str]:
    text = dumped.replace("\\n", "\n")
    return {m.strip("./") for m in _PATH.findall(text) if m.strip("./")}


def _short(text: str) -> str:
    return digest(text, HASH_LEN)


def path_keys(args: Any, *, dumped: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The path-like tokens in a call's arguments (``src/app.py``) and the folders that hold
    them (``a/b/c.py`` → ``a/b``, ``a``), hashed short (``dumped``: the arguments' ``_dump``).

    Example:
        >>> paths, dirs = path_keys({"command": "cat build/text/index.txt"})
        >>> len(paths), len(dirs), path_keys({"command": "rm -rf build/text"})[0][0] in dirs
        (1, 2, True)
        >>> path_keys({"command": "ls -la"})
        ((), ())
    """
    tokens = _tokens(_dump(args) if dumped is None else dumped)
    if not tokens:
        return (), ()
    folders = {token.rsplit("/", k)[0] for token in tokens for k in range(1, token.count("/") + 1)}
    return (tuple(sorted({_short(token) for token in tokens})),
            tuple(sorted({_short(folder) for folder in folders if folder})))


# --- call and response signatures ------------------------------------------------------

SIG_LEN = 8  # hex digits: no collision in practice among the window's few dozen calls
LABEL_ARGS = 100
_JSON: dict[str, Any] = {"sort_keys": True, "default": str, "separators": (",", ":"), "ensure_ascii": False}


def _digest(text: str) -> str:
    return digest(text, SIG_LEN)


def canonical_args(args: Any) -> Any:
    """Arguments as a JSON value: a JSON string is parsed, anything else kept.

    Example:
        >>> canonical_args('{"b": 1, "a": 2}')
        {'b': 1, 'a': 2}
        >>> canonical_args("not json")
        'not json'
    """
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def _apply_policy(name: str, value: Any, config: LoopDetection | None) -> Any:
    policy = config.policy(name) if config is not None else None
    if policy is None or not isinstance(value, dict):
        return value
    if policy.key is not None:
        return {"__key__": policy.key(value)}
    if policy.keep is not None:
        return {k: v for k, v in value.items() if k in policy.keep}
    return {k: v for k, v in value.items() if k not in policy.ignore}


def _str_keys(value: Any) -> Any:
    """``value`` with every mapping key a string (JSON's own rule), so any keys sort."""
    if isinstance(value, Mapping):
        return {str(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_str_keys(v) for v in value]
    return value


def _dump(value: Any) -> str:
    """Canonical JSON of any value (keys sorted; other objects as ``str``), for hashing."""
    try:
        return json.dumps(value, **_JSON)
    except TypeError:  # keys of mixed or non-JSON types
        return json.dumps(_str_keys(value), **_JSON)


def call_signature(name: str | None, args: Any, config: LoopDetection | None = None, *,
                   malformed: bool = False, dumped: str | None = None) -> str:
    """Tool name + canonical JSON of its (policy-filtered) arguments (``dumped``: theirs), hashed."""
    value = canonical_args(args)
    if malformed:
        return _digest(_dump([name, {"__malformed__": value if isinstance(value, str) else _dump(value)}]))
    kept = _apply_policy(str(name), value, config)
    if kept is value and dumped is not None:
        return _digest(f"[{json.dumps(name, ensure_ascii=False)},{dumped}]")  # = _dump([name, value])
    return _digest(_dump([name, kept]))


def args_text(args: Any, *, malformed: bool = False, dumped: str | None = None) -> str:
    """The arguments as short compact JSON, for warning texts and records.

    Example:
        >>> args_text('{"b": 1, "a": 2}'), args_text("{oops", malformed=True)
        ('{"a":2,"b":1}', '<invalid JSON arguments: {oops>')
    """
    value = canonical_args(args)
    text = value if isinstance(value, str) else dumped if dumped is not None else _dump(value)
    if len(text) > LABEL_ARGS:
        text = text[: LABEL_ARGS - 1] + "…"
    return f"<invalid JSON arguments: {text}>" if malformed else text


def response_signature(sigs: Sequence[str]) -> str:
    """The multiset of call signatures, hashed (order of parallel calls ignored).

    Example:
        >>> response_signature(["b", "a"]) == response_signature(["a", "b"])
        True
    """
    return _digest("|".join(sorted(sigs)))


@dataclass(frozen=True)
class SignedCall:
    """One call of a response with its signature and the paths its arguments name."""

    id: str
    sig: str
    name: str
    args: str
    malformed: bool = False
    paths: tuple[str, ...] = field(default=(), compare=False)
    dirs: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        """``tool(args)``, as warnings show it."""
        return call_label(self.name, self.args)


def sign_calls(ai: AIMessage, config: LoopDetection | None = None) -> list[SignedCall]:
    """Every call of a response (valid, then malformed) with its signature.

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "1"}],
        ...                invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "2",
        ...                                     "error": "bad json", "type": "invalid_tool_call"}])
        >>> [(c.name, c.malformed) for c in sign_calls(ai)]
        [('f', False), ('f', True)]
    """
    paths = config is not None and config.path_excuse
    out = []
    for c in ai.tool_calls:
        args = canonical_args(c["args"])
        dumped = _dump(args)
        named, folders = path_keys(args, dumped=dumped) if paths else ((), ())
        out.append(SignedCall(str(c.get("id")), call_signature(c["name"], args, config, dumped=dumped),
                              c["name"], args_text(args, dumped=dumped), paths=named, dirs=folders))
    for bad in ai.invalid_tool_calls:
        name = bad.get("name") or "?"
        raw = bad.get("args") or ""
        out.append(SignedCall(str(bad.get("id")), call_signature(name, raw, malformed=True),
                              name, args_text(raw, malformed=True), malformed=True))
    return out


# --- text loops ------------------------------------------------------------------------------

CHUNK, TIMES, SPAN, HISTORY = 50, 10, 5 * 50, 5000
_STRUCTURE = re.compile(r"(^|\n)\s*(\|.*\||[|+-]{3,})|(^|\n)\s*([*+-]|\d+\.)\s|(^|\n)#+\s|(^|\n)>\s")
_DIVIDER = re.compile(r"^[+\-_=*\u2500-\u257f]+$")


class TextLoop:
    """Gemini CLI's rule over a stream of text pieces: :meth:`add` is True once it loops.

    Example:
        >>> loop, items = TextLoop(), TextLoop()
        >>> any(loop.add("I will fix the typo now. ") for _ in range(30)), any(
        ...     items.add(f"- item {i} of the list, each one different\\n") for i in range(30))
        (True, False)
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
