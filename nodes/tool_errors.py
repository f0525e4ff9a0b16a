"""Consecutive tool errors as a limit (``Limits.max_tool_errors``, stop reason ``tool_errors``).

A *failed round* is a tool-calling reply whose every result was an error (a tool that
raised, an unknown tool, invalid arguments); answers the loop detector wrote itself (a
blocked call) are not tool errors and neither count nor break the streak. When the last
``max_tool_errors`` rounds of the run all failed and the model asks for more tools, the run
stops. The scan walks back from the end and stops at the first round with a success, the
run's request or the limit: its cost does not grow with the thread.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> def failed(i):
    ...     return [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]),
    ...             ToolMessage(f"Error: no {i}", tool_call_id=f"c{i}", status="error")]
    >>> msgs = [HumanMessage("go", id="h"), *failed(1), *failed(2), *failed(3)[:1]]
    >>> failed_rounds(msgs, "h", limit=5), tool_errors_guard(msgs, "h", 2)["reason"]
    (2, 'tool_errors')
    >>> tool_errors_guard([*msgs[:-1], AIMessage("done")], "h", 2) is None  # a text reply
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_loop.core.stop import Guard, StopReason, limit_guard
from langgraph_loop.nodes.detector_state import is_blocked

__all__ = ["failed_rounds", "tool_errors_guard"]


def failed_rounds(messages: Sequence[BaseMessage], request_id: str | None, *, limit: int) -> int:
    """Failed rounds in a row before the newest message (counted up to ``limit``)."""
    count, statuses = 0, []
    for i in range(len(messages) - 2, -1, -1):  # no slice: that would copy the thread
        msg = messages[i]
        if request_id is not None and msg.id == request_id:
            break
        if isinstance(msg, ToolMessage):
            if not is_blocked(msg):
                statuses.append(msg.status)
            continue
        if not isinstance(msg, AIMessage):
            continue  # notices and continuation messages between rounds
        if statuses and set(statuses) != {"error"}:
            break  # a round with a success
        count += bool(statuses)
        statuses = []
        if count >= limit:
            break
    return count


def tool_errors_guard(messages: Sequence[BaseMessage], request_id: str | None,
                      limit: int | None) -> Guard | None:
    """The stop when the newest reply asks for tools after ``limit`` failed rounds in a row."""
    newest = messages[-1] if messages else None
    if limit is None or not isinstance(newest, AIMessage) or not (
            newest.tool_calls or newest.invalid_tool_calls):
        return None
    count = failed_rounds(messages, request_id, limit=limit)
    return limit_guard(StopReason.TOOL_ERRORS, limit, count) if count >= limit else None
