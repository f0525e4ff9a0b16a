"""The ``respond`` node: one structured final turn after the loop decided to stop.

``response_format`` is not applied to every pass (a per-pass schema lets the model
"answer" the schema instead of finishing the work): the passes run free, and once
the router stops the run, this node asks the agent's model once more, through
``with_structured_output(response_format)``, for the final answer in that shape.
The request is the last pass's request (system prompt, transcript or fresh-context
window) plus one instruction; the reply is written to ``structured_response`` and
its usage counts in ``usage``. Nothing is added to ``messages``: the transcript
still ends on the agent's own answer.

It is skipped after the hard stops ``token_budget`` and ``timeout`` (no call may be
made after them) and when the graph's step limit leaves no room.

Example:
    >>> from langgraph_loop.core.stop import StopReason
    >>> wants_response({"stop_reason": StopReason.COMPLETED, "remaining_steps": 5})
    True
    >>> wants_response({"stop_reason": StopReason.TOKEN_BUDGET})
    False
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.runtime import Runtime

from langgraph_loop.core.effects import Invoke, Logic, as_structured
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopContext, LoopState, add_usage, usage_of
from langgraph_loop.core.stop import StopReason
from langgraph_loop.nodes.base import LoopNode
from langgraph_loop.nodes.request import build_request

__all__ = ["RESPOND_INSTRUCTION", "RESPOND_NAME", "RespondNode", "wants_response"]

RESPOND_NAME = "loop_respond"
RESPOND_INSTRUCTION = (
    "The task is over. Give your final answer to the original request now, in the required "
    "structured format, based on the work above."
)
_NO_CALL_AFTER = {StopReason.TOKEN_BUDGET, StopReason.TIMEOUT}


def wants_response(state: LoopState) -> bool:
    """After the router stopped: is a structured final turn due (and possible)?"""
    stop = state.get("stop_reason")
    remaining = state.get("remaining_steps")
    return stop is not None and stop not in _NO_CALL_AFTER and (remaining is None or remaining > 1)


class RespondNode(LoopNode):
    """The structured final turn (see module docstring)."""

    name = "respond"

    def __init__(self, settings: LoopSettings) -> None:
        super().__init__(settings)
        try:
            self._structured = settings.model.with_structured_output(
                settings.response_format, include_raw=True
            )
        except NotImplementedError as exc:
            raise ValueError(
                "response_format: the model does not support with_structured_output"
            ) from exc

    def logic(
        self, state: LoopState, config: RunnableConfig, runtime: Runtime[LoopContext] | None
    ) -> Logic:
        settings = self.run_settings(runtime)
        instruction = HumanMessage(RESPOND_INSTRUCTION, name=RESPOND_NAME)
        request = build_request(state, settings, [instruction])
        result = yield Invoke(self._structured, request,
                             merge_configs(config, {"run_name": "respond"}))
        reply = as_structured(result, "respond")
        update: dict[str, Any] = {"structured_response": reply["parsed"]}
        usage = usage_of(reply["raw"])
        if usage is not None:
            update["usage"] = add_usage(state.get("usage"), usage)
        return update
