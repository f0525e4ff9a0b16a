"""Call and response signatures for loop detection (pure).

A *call signature* is a short hash of the tool name and the canonical JSON of its
arguments: key order does not matter, and arguments given as a JSON string or as a
dict give the same signature. ``LoopDetection.arg_policies`` decides which fields
count (``ignore`` a ``timestamp``, or ``keep`` only a ``path``); the policy under the
key ``"*"`` applies to tools without their own. A *response signature* is the
multiset of a response's call signatures, so parallel calls in another order are
the same response. Malformed calls (``invalid_tool_calls``: arguments that are not
valid JSON) are signed from their raw text, so a model repeating the same broken
call is counted like any other repeat.

Example:
    >>> from langgraph_loop.core.config import ArgPolicy, LoopDetection
    >>> call_signature("search", {"q": "x", "page": 1}) == call_signature(
    ...     "search", '{"page": 1, "q": "x"}')
    True
    >>> cfg = LoopDetection(arg_policies={"log": ArgPolicy(ignore=("timestamp",))})
    >>> call_signature("log", {"msg": "hi", "timestamp": 1}, cfg) == call_signature(
    ...     "log", {"msg": "hi", "timestamp": 2}, cfg)
    True
    >>> label("search", {"q": "x"})
    'search({"q":"x"})'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.core.text import digest

__all__ = [
    "SignedCall",
    "args_text",
    "call_signature",
    "canonical_args",
    "content_hash",
    "label",
    "response_signature",
    "sign_calls",
]

SIG_LEN = 8  # hex digits: no collision in practice among the window's few dozen calls
LABEL_ARGS = 100


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
    if config is None or not isinstance(value, dict):
        return value
    policy = config.arg_policies.get(name) or config.arg_policies.get("*")
    if policy is None:
        return value
    if policy.keep is not None:
        return {k: v for k, v in value.items() if k in policy.keep}
    return {k: v for k, v in value.items() if k not in policy.ignore}


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"),
                      ensure_ascii=False)


def call_signature(
    name: str | None, args: Any, config: LoopDetection | None = None, *, malformed: bool = False
) -> str:
    """Tool name + canonical JSON of its (policy-filtered) arguments, hashed."""
    value = canonical_args(args)
    if malformed:
        value = {"__malformed__": value if isinstance(value, str) else _dump(value)}
    else:
        value = _apply_policy(str(name), value, config)
    return _digest(_dump([name, value]))


def args_text(args: Any, *, malformed: bool = False) -> str:
    """The arguments as short compact JSON, for warning texts and records.

    Example:
        >>> args_text('{"b": 1, "a": 2}'), args_text("{oops", malformed=True)
        ('{"a":2,"b":1}', '<invalid JSON arguments: {oops>')
    """
    value = canonical_args(args)
    text = _dump(value) if not isinstance(value, str) else value
    if len(text) > LABEL_ARGS:
        text = text[: LABEL_ARGS - 1] + "…"
    return f"<invalid JSON arguments: {text}>" if malformed else text


def label(name: str | None, args: Any, *, malformed: bool = False) -> str:
    """A short human-readable ``tool(args)``."""
    return f"{name}({args_text(args, malformed=malformed)})"


def response_signature(sigs: Sequence[str]) -> str:
    """The multiset of call signatures, hashed (order of parallel calls ignored).

    Example:
        >>> response_signature(["b", "a"]) == response_signature(["a", "b"])
        True
    """
    return _digest("|".join(sorted(sigs)))


def content_hash(content: Any) -> str:
    """A short hash of a tool result (a ToolMessage's content)."""
    text = content if isinstance(content, str) else _dump(content)
    return _digest(text)


@dataclass(frozen=True)
class SignedCall:
    """One call of a response with its signature."""

    id: str
    sig: str
    name: str
    args: str
    malformed: bool = False

    @property
    def label(self) -> str:
        """``tool(args)``."""
        return f"{self.name}({self.args})"


def sign_calls(ai: AIMessage, config: LoopDetection | None = None) -> list[SignedCall]:
    """Every call of a response (valid, then malformed) with its signature.

    Example:
        >>> ai = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "1"}],
        ...                invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "2",
        ...                                     "error": "bad json", "type": "invalid_tool_call"}])
        >>> [(c.name, c.malformed) for c in sign_calls(ai)]
        [('f', False), ('f', True)]
    """
    out = [SignedCall(str(c.get("id")), call_signature(c["name"], c["args"], config),
                      c["name"], args_text(c["args"])) for c in ai.tool_calls]
    for bad in ai.invalid_tool_calls:
        name = bad.get("name") or "?"
        raw = bad.get("args") or ""
        out.append(SignedCall(str(bad.get("id")), call_signature(name, raw, malformed=True),
                              name, args_text(raw, malformed=True), malformed=True))
    return out
