"""The loop detector's state, derived from the run's transcript (never checkpointed).

The detection layers (``nodes/detection.py``) fold each tool-calling reply of a run
and the results of the round before it into a small ``DetectorState``. That state is
not kept in graph state: a clean round writes no detector bytes to the checkpoint.
It is a pure function of the current run's messages (from the run's request on), so
it is derived from them: ``state_before(messages, run, config)`` is the state after
every reply before the newest one.

Deriving it from scratch costs one ``observe`` per reply of the run, so the state
after each reply is remembered in a bounded in-process memo keyed by the run id and
the reply's message id, for an equal ``LoopDetection`` (a cache of a pure function:
a process that has not seen the run, after a restart or on another worker, replays
the run's transcript and gets the same state). With the memo warm one decision costs
one ``observe``, O(window), whatever the length of the thread.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> from langgraph_loop.core.config import LoopDetection
    >>> call = {"name": "f", "args": {}, "id": "c1"}
    >>> msgs = [HumanMessage("go", id="h"), AIMessage("", tool_calls=[call], id="a1"),
    ...         ToolMessage("x", tool_call_id="c1", id="t1"),
    ...         AIMessage("", tool_calls=[{**call, "id": "c2"}], id="a2")]
    >>> det = state_before(msgs, {"id": "run-1", "request_id": "h"}, LoopDetection())
    >>> det["responses"], list(det["pending"])
    (1, ['c1'])
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_loop.core.config import LoopDetection
from langgraph_loop.nodes.detection import observe
from langgraph_loop.nodes.detector_state import DetectorState

__all__ = ["MEMO_SIZE", "remember", "results_before", "state_before"]

MEMO_SIZE = 4096
"""Detector states remembered per process (one per reply; the oldest are dropped)."""

_memo: OrderedDict[tuple[str, str], tuple[LoopDetection, DetectorState]] = OrderedDict()
_lock = threading.Lock()


def results_before(messages: Sequence[BaseMessage], index: int) -> list[ToolMessage]:
    """The ToolMessages between the reply at ``index`` and the AIMessage before it.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> msgs = [AIMessage("a"), ToolMessage("r", tool_call_id="c"), AIMessage("b")]
        >>> [m.content for m in results_before(msgs, 2)]
        ['r']
    """
    out: list[ToolMessage] = []
    for i in range(index - 1, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if isinstance(msg, ToolMessage):
            out.append(msg)
        elif isinstance(msg, AIMessage):
            break
    out.reverse()
    return out


def remember(run: Mapping[str, Any], ai: BaseMessage, config: LoopDetection,
             state: DetectorState) -> None:
    """Remember the detector state after ``ai`` (a reply of the run ``run``)."""
    if run.get("id") is None or ai.id is None:
        return
    with _lock:
        _memo[(str(run["id"]), str(ai.id))] = (config, state)
        _memo.move_to_end((str(run["id"]), str(ai.id)))
        while len(_memo) > MEMO_SIZE:
            _memo.popitem(last=False)


def _recall(run: Mapping[str, Any], ai: BaseMessage, config: LoopDetection) -> DetectorState | None:
    if run.get("id") is None or ai.id is None:
        return None
    with _lock:
        hit = _memo.get((str(run["id"]), str(ai.id)))
    if hit is None or not (hit[0] is config or hit[0] == config):
        return None
    return hit[1]


def _previous_reply(messages: Sequence[BaseMessage], request_id: Any) -> int | None:
    """Index of the run's reply before the newest message (None: the run has none)."""
    for i in range(len(messages) - 2, -1, -1):
        msg = messages[i]
        if isinstance(msg, AIMessage):
            return i
        if request_id is not None and msg.id == request_id:
            return None
    return None


def _run_start(messages: Sequence[BaseMessage], end: int, request_id: Any) -> int:
    """Index of the run's request (0 when it is no longer in the thread)."""
    for i in range(end, -1, -1):
        if request_id is not None and messages[i].id == request_id:
            return i
    return 0


def _replay(messages: Sequence[BaseMessage], run: Mapping[str, Any], end: int,
            config: LoopDetection) -> DetectorState:
    """Fold every reply of the run up to ``end`` (inclusive), remembering each state."""
    det: DetectorState = {}
    for i in range(_run_start(messages, end, run.get("request_id")), end + 1):
        msg = messages[i]
        if isinstance(msg, AIMessage):
            det = observe(det, msg, results_before(messages, i), config).state
            remember(run, msg, config, det)
    return det


def state_before(messages: Sequence[BaseMessage], run: Mapping[str, Any],
                 config: LoopDetection) -> DetectorState:
    """The detector state after every reply of the run before the newest message."""
    prev = _previous_reply(messages, run.get("request_id"))
    if prev is None:
        return {}
    known = _recall(run, messages[prev], config)
    return known if known is not None else _replay(messages, run, prev, config)
