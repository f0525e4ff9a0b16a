"""The ``respond`` node: one structured final turn after the loop decided to stop.

``response_format`` is not applied to every iteration (a per-iteration schema lets the model
"answer" the schema instead of finishing the work): the iterations run free, and once
the router stops the run, this node asks the agent's model once more, through
``with_structured_output(response_format)``, for the final answer in that shape.
The request is the last iteration's request (system prompt, transcript or fresh-context
window) plus one instruction; the reply is written to ``structured_response`` and
its usage counts in ``usage``. Nothing is added to ``messages``: the transcript
still ends on the agent's own answer.

It is skipped after the hard stops ``token_budget`` and ``timeout`` (no call may be
made after them) and when the graph's step limit leaves no room.

Example:
    >>> from langgraph_loop.scripted import ScriptedChatModel
    >>> s = LoopSettings.build(ScriptedChatModel())
    >>> wants_response({"stop_reason": StopReason.COMPLETED, "remaining_steps": 5}, s)
    True
    >>> wants_response({"stop_reason": StopReason.TOKEN_BUDGET}, s)
    False
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.runtime import get_runtime

from langgraph_loop.core import prompts
from langgraph_loop.core.messages import RESPOND_NAME, as_structured, loop_message
from langgraph_loop.core.records import add_usage, usage_of
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.model import build_request

__all__ = ["RespondNode", "wants_response"]

_NO_CALL_AFTER = {StopReason.TOKEN_BUDGET, StopReason.TIMEOUT}


def wants_response(state: LoopState, settings: LoopSettings) -> bool:
    """After the router stopped: is a structured final turn due (and possible)?"""
    stop = state.get("stop_reason")
    return (stop is not None and stop not in _NO_CALL_AFTER
            and settings.shape.can_respond(state.get("remaining_steps")))


class RespondNode:
    """The structured final turn (see module docstring)."""

    name = "respond"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        try:
            self._structured = settings.model.with_structured_output(
                settings.response_format, include_raw=True
            )
        except NotImplementedError as exc:
            raise ValueError(
                "response_format: the model does not support with_structured_output"
            ) from exc

    def _request(self, state: LoopState) -> list[Any]:
        settings = self.settings.for_runtime(get_runtime())
        return build_request(state, settings, [loop_message(prompts.RESPOND, name=RESPOND_NAME)])

    def invoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Sync entry point."""
        result = self._structured.invoke(self._request(state), _named(config))
        return _record(state, result)

    async def ainvoke(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Async entry point."""
        result = await self._structured.ainvoke(self._request(state), _named(config))
        return _record(state, result)


def _named(config: RunnableConfig) -> RunnableConfig:
    return merge_configs(config, {"run_name": "respond"})


def _record(state: LoopState, result: Any) -> dict[str, Any]:
    reply = as_structured(result, "respond")
    update: dict[str, Any] = {"structured_response": reply["parsed"]}
    usage = usage_of(reply["raw"])
    if usage is not None:
        update["usage"] = add_usage(state.get("usage"), usage)
    return update
