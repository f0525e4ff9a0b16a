"""Loop detection over call signatures (pure). First layer: exact repeats.

``observe(detector, ai, results, config)`` takes the detector's state (a small dict
kept in graph state), the new AIMessage and the ToolMessages of the previous round,
and returns the new detector state, the warnings to queue and a stop guard (or None).

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from graph.config import LoopDetection
    >>> ai = AIMessage("", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "1"}])
    >>> det, cfg = {}, LoopDetection(warn_after=2, stop_after=3)
    >>> for _ in range(3):
    ...     obs = observe(det, ai, [], cfg)
    ...     det = obs.state
    >>> obs.stop["reason"]
    'loop_detected'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from graph.config import LoopDetection

__all__ = ["Observation", "call_signature", "observe", "response_signature"]


@dataclass
class Observation:
    """What the detector concluded about one model response."""

    state: dict[str, Any]
    warnings: list[tuple[str, str]] = field(default_factory=list)
    stop: dict[str, Any] | None = None


def _canonical_args(args: Any) -> Any:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return args


def call_signature(name: str, args: Any, config: LoopDetection | None = None) -> str:
    """Tool name + canonical JSON of its arguments, hashed (key order does not matter)."""
    value = _canonical_args(args)
    policy = config.arg_policies.get(name) if config is not None else None
    if policy is not None and isinstance(value, dict):
        if policy.keep is not None:
            value = {k: v for k, v in value.items() if k in policy.keep}
        else:
            value = {k: v for k, v in value.items() if k not in policy.ignore}
    text = json.dumps([name, value], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def response_signature(ai: AIMessage, config: LoopDetection | None = None) -> str:
    """The multiset of a response's call signatures (order of parallel calls ignored)."""
    sigs = sorted(call_signature(c["name"], c["args"], config) for c in ai.tool_calls)
    return hashlib.sha1("|".join(sigs).encode()).hexdigest()[:12]


def observe(
    detector: dict[str, Any],
    ai: AIMessage,
    results: Sequence[ToolMessage],
    config: LoopDetection,
) -> Observation:
    """Count the response's signature in the window; warn, then stop."""
    sig = response_signature(ai, config)
    window = [*(detector.get("window") or []), sig][-config.window :]
    warned = [w for w in detector.get("warned") or [] if w in window]
    count = window.count(sig)
    obs = Observation(state={"window": window, "warned": warned})
    names = ", ".join(sorted({c["name"] for c in ai.tool_calls}))
    if count >= config.stop_after:
        obs.stop = {"guard": "loop_detector", "reason": "loop_detected", "layer": "repeat",
                    "signature": sig, "count": count, "tools": names,
                    "detail": f"the same call to {names} was repeated {count} times"}
    elif count >= config.warn_after and sig not in warned:
        warned.append(sig)
        args = "; ".join(json.dumps(c["args"], sort_keys=True) for c in ai.tool_calls)
        obs.warnings.append((f"repeat:{sig}", (
            f"You have called {names} with the same arguments ({args}) {count} times. "
            "Repeating it will not give a different result. Use what you already have, "
            "try a different approach, or give your answer.")))
    return obs
