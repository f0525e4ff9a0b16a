"""Reading a thread that 0.2 or 0.3 stored: what a new run still reads (a notice 0.2 named
``"loop_warning"``) is translated when ``prepare`` starts a run, and written back; what a run keeps
only while it runs is not: finish runs 0.2 or 0.3 left paused before upgrading (CHANGELOG, 0.4.0).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from langgraph_loop.core.messages import LOOP_NOTICE, NOTICE_SOURCE, notice_marks

__all__ = ["OLD_NOTICE_NAME", "translated"]

OLD_NOTICE_NAME = "loop_warning"  # 0.2's one name for every notice


def translated(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages stored in a shape 0.4 does not read, in 0.4's (same ids: each replaces itself)."""
    out: list[BaseMessage] = []
    for message in messages:
        if (isinstance(message, HumanMessage) and message.name == OLD_NOTICE_NAME
                and message.id is not None
                and message.additional_kwargs.get("lc_source") != NOTICE_SOURCE):
            marks = notice_marks(LOOP_NOTICE, ["loop"])
            out.append(message.model_copy(update={
                "name": LOOP_NOTICE, "additional_kwargs": {**message.additional_kwargs, **marks}}))
    return out
