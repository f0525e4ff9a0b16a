"""Notices are named by what they say and found by one rule (``is_notice``)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langgraph_loop import is_notice
from langgraph_loop.core.messages import (
    BUDGET_NOTICE,
    LOOP_NOTICE,
    NOTICE_SOURCE,
    STOP_NOTICE,
    TAGS,
    drain,
    queue_notice,
)


def _merged(*sources: str) -> HumanMessage:
    queue: list = []
    for i, source in enumerate(sources):
        queue = queue_notice(queue, run="r", key=f"k{i}", text=f"from {source}", source=source)
    message = drain(queue, run="r")
    assert message is not None
    return message


@pytest.mark.parametrize(("sources", "name"), [
    (("loop",), LOOP_NOTICE),
    (("human",), LOOP_NOTICE),
    (("budget_pressure",), BUDGET_NOTICE),
    (("stop",), STOP_NOTICE),
    (("loop", "budget_pressure"), BUDGET_NOTICE),
    (("loop", "stop", "budget_pressure"), STOP_NOTICE),
])
def test_a_notice_is_named_by_its_most_important_source(sources: tuple[str, ...], name: str) -> None:
    message = _merged(*sources)
    assert message.name == name and name in TAGS
    assert message.additional_kwargs["lc_source"] == NOTICE_SOURCE
    assert message.additional_kwargs["lc_data"] == {"kind": name, "sources": sorted(set(sources))}
    assert message.additional_kwargs["langgraph_loop"] == {"kind": "notice",
                                                           "sources": sorted(set(sources))}
    assert is_notice(message)
    assert message.content == "\n\n".join(f"from {s}" for s in sources)


def test_langchain_core_reads_the_notification_metadata() -> None:
    """langchain-core 1.7.2 and later read it with ``get_notification_metadata``; before, the same
    two keys are what such a reader would find."""
    expected = {"source": "langgraph_loop", "data": {"kind": "loop_notice", "sources": ["loop"]}}
    message = _merged("loop")
    try:
        from langchain_core.messages.notification import get_notification_metadata
    except ImportError:  # langchain-core 1.7.0 and 1.7.1 (the lowest supported): the keys themselves
        kwargs = message.additional_kwargs
        assert {"source": kwargs["lc_source"], "data": kwargs["lc_data"]} == expected
    else:
        assert get_notification_metadata(message) == expected


def test_other_messages_are_not_notices() -> None:
    assert not is_notice(HumanMessage("Continue.", name="loop_continue"))
    assert not is_notice(HumanMessage("hi", additional_kwargs={"lc_source": "async_subagent"}))
