"""Building the message list one model call receives (pure).

Normal passes send the system prompt and the whole transcript. With
``fresh_context=True`` a later pass sends only the system prompt, the run's original
request, the progress log (unless ``inject_progress=False``) and the messages of the
new pass; state keeps everything.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> from langgraph_loop.core.settings import LoopSettings
    >>> s = LoopSettings.build(ScriptedChatModel(), system_prompt="Be brief.")
    >>> state = {"messages": [HumanMessage("hi", id="h1")], "iteration": 1}
    >>> [m.type for m in build_request(state, s, [])]
    ['system', 'human']
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.nodes.verdict import criteria_list

__all__ = ["build_request", "criteria_instruction", "pass_messages", "progress_message",
           "system_message"]

PROGRESS_NAME = "loop_progress"


def criteria_instruction(criteria: Sequence[str]) -> str:
    """The text that tells the agent the judge's criteria."""
    return f"Your answer will be checked against these criteria:\n{criteria_list(criteria)}"


def system_message(settings: LoopSettings, existing: BaseMessage | None) -> SystemMessage | None:
    """One system message: the configured prompt, the judge criteria, a stored one."""
    parts: list[str] = []
    if settings.system_prompt:
        parts.append(settings.system_prompt)
    if settings.judge is not None and settings.judge.criteria:
        parts.append(criteria_instruction(settings.judge.criteria))
    if isinstance(existing, SystemMessage) and isinstance(existing.content, str):
        parts.append(existing.content)
    return SystemMessage("\n\n".join(parts)) if parts else None


def progress_message(progress: Sequence[str]) -> HumanMessage | None:
    """"Progress so far" as a tagged user message (None when the log is empty)."""
    if not progress:
        return None
    lines = "\n".join(f"{i}. {p}" for i, p in enumerate(progress, 1))
    return HumanMessage(f"Progress so far:\n{lines}", name=PROGRESS_NAME)


def pass_messages(messages: Sequence[BaseMessage], start_id: str | None) -> list[BaseMessage]:
    """The messages of the current pass: from ``start_id`` to the end (scans back)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == start_id:
            return list(messages[i:])
    return list(messages)


def _original_request(messages: Sequence[BaseMessage], request_id: str | None) -> list[BaseMessage]:
    for msg in messages:
        if msg.id == request_id:
            return [msg]
    return []


def build_request(
    state: LoopState, settings: LoopSettings, extra: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The request for the next model call (``extra`` = messages appended this step)."""
    messages: list[BaseMessage] = list(state.get("messages") or [])
    head = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    if head is not None:
        messages = messages[1:]
    system = system_message(settings, head)
    run = state.get("run") or {}
    pass_info = state.get("pass_info") or {}
    if settings.fresh_context and state.get("iteration", 1) > 1:
        body = _original_request(messages, run.get("request_id"))
        progress = progress_message(state.get("progress") or []) if settings.inject_progress else None
        body += [progress] if progress is not None else []
        body += pass_messages(messages, pass_info.get("start_id"))
    else:
        body = list(messages)
    return ([system] if system is not None else []) + body + list(extra)
