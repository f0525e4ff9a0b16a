"""The ``approval`` node: a decision for every gated call before any call of the message runs.

A reply asking for a tool in ``Approval.tools`` gets one LangChain ``HITLRequest`` and one
decision per gated call, from ``Approval.resolver`` or a person through ``interrupt()``,
validated inside it (a malformed resume raises and the thread stays paused). The ``tools`` node
applies the decisions (``apply_review``); a gated call without one never runs. Shapes: the
README's "Threads and approval" (examples: ``tests/nodes/test_approval.py``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import partial
from typing import Annotated, Any

from langchain.agents.middleware.human_in_the_loop import ActionRequest, HITLRequest, ReviewConfig
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.runtime import get_runtime
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, TypeAdapter, ValidationError

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.compat import resuming
from langgraph_loop.core.config import Approval
from langgraph_loop.core.drive import StepNode, Steps
from langgraph_loop.core.messages import call_label, newest_reply
from langgraph_loop.core.questions import DECISIONS, Decision, Decisions, ask_plainly, decisions_shape
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import LoopState, emit

__all__ = ["ApprovalNode", "Decision", "Reviewed", "apply_review", "approval_request", "auto_allowed",
           "check_decisions", "edit_note", "mark_edited", "needs_approval", "reject_text",
           "response_schema"]

def approval_request(calls: Sequence[Mapping[str, Any]], description: str) -> HITLRequest:
    """The interrupt value for the gated calls (LangChain's ``HITLRequest``)."""
    actions = [ActionRequest(name=c["name"], args=copy.deepcopy(dict(c.get("args") or {})),
                             description=f"{description}\n\nTool: {c['name']}\nArgs: "
                                         f"{json.dumps(c.get('args') or {}, default=str)}")
               for c in calls]
    names = list(dict.fromkeys(str(c["name"]) for c in calls))
    configs = [ReviewConfig(action_name=n, allowed_decisions=list(DECISIONS)) for n in names]
    return HITLRequest(action_requests=actions, review_configs=configs)


def check_decisions(calls: Sequence[Mapping[str, Any]], decisions: Sequence[Mapping[str, Any]], *,
                    gated: Collection[str], known: Collection[str]) -> list[dict[str, Any]]:
    """Validate decisions against the gated calls; ``ValueError`` says what is wrong. An edit
    may not switch to another gated tool: that tool would run without its own decision."""
    if len(decisions) != len(calls):
        names = ", ".join(str(c["name"]) for c in calls)
        noun = "decision" if len(calls) == 1 else "decisions"
        raise ValueError(f"approval: expected {len(calls)} {noun} (one per gated call: {names}), "
                         f"got {len(decisions)}")
    out: list[dict[str, Any]] = []
    for i, (call, decision) in enumerate(zip(calls, decisions, strict=True), 1):
        kind = decision.get("type")
        if kind not in DECISIONS:
            raise ValueError(f"approval: decision {i} has unknown type {kind!r}; "
                             f"expected one of {', '.join(DECISIONS)}")
        if kind == "edit":
            action = decision.get("edited_action") or {}
            name = action.get("name")
            if name not in known:
                raise ValueError(f"approval: decision {i} edits {call['name']!r} into unknown "
                                 f"tool {name!r}; known tools: {', '.join(sorted(known))}")
            if name != call["name"] and name in gated:
                raise ValueError(f"approval: decision {i} edits {call['name']!r} into another "
                                 f"gated tool {name!r}; an edit may keep the tool or switch "
                                 "to an ungated one")
        out.append(dict(decision))
    return out


def response_schema(calls: Sequence[Mapping[str, Any]], *, gated: Collection[str],
                    known: Collection[str]) -> Any:
    """The resume schema for these calls: ``Decisions``, its meaning checked by
    ``check_decisions`` (pydantic validates both, inside ``interrupt()`` too)."""

    def matches_calls(response: Decisions) -> Decisions:
        check_decisions(calls, response["decisions"], gated=gated, known=known)
        return response

    return Annotated[Decisions, BeforeValidator(partial(decisions_shape, what="approval")),
                     AfterValidator(matches_calls)]


def auto_allowed(run: Mapping[str, Any], max_auto_rounds: int) -> bool:
    """May the resolver decide this gated message? (bounded per run)"""
    return int(run.get("auto_rounds") or 0) < max_auto_rounds


def needs_approval(message: BaseMessage | None, approval: Approval | None) -> bool:
    """Does this reply ask for a tool that needs a decision first? (the one "is it gated")"""
    return (approval is not None and isinstance(message, AIMessage)
            and any(c["name"] in approval.tools for c in message.tool_calls))


def reject_text(name: str, message: str | None) -> str:
    """The error ToolMessage text of a rejected call."""
    base = prompts.REJECTED.format(name=repr(name))
    if message:
        return prompts.REJECTED_WITH_MESSAGE.format(base=base, message=message)
    return prompts.REJECTED_NO_MESSAGE.format(base=base)


def edit_note(original: Mapping[str, Any], executed: Mapping[str, Any]) -> str:
    """The note put before the result of a call a reviewer changed."""
    return prompts.EDIT_NOTE.format(asked=call_label(original["name"], original.get("args") or {}),
                                    ran=call_label(executed["name"], executed.get("args") or {}))


class Reviewed(BaseModel):
    """The calls of a message as the ``tools`` node executes them after review."""

    calls: list[dict[str, Any]]
    refusals: dict[str, str] = Field(default_factory=dict)
    edited: dict[str, dict[str, Any]] = Field(default_factory=dict)


def apply_review(calls: Iterable[Mapping[str, Any]], review: Mapping[str, Any] | None, *,
                 message_id: str | None, gated: Collection[str]) -> Reviewed:
    """Apply the recorded decisions to the calls (a gated call never runs without one)."""
    decisions: Mapping[str, Any] = {}
    if review and review.get("message_id") == message_id:
        decisions = review.get("decisions") or {}
    out = Reviewed(calls=[])
    for original in calls:
        call = dict(original)
        call_id = str(call.get("id"))
        decision: Mapping[str, Any] = decisions.get(call_id) or {}
        if call.get("name") in gated:
            kind = decision.get("type")
            if kind is None:
                out.refusals[call_id] = prompts.NEEDS_APPROVAL.format(name=repr(call["name"]))
            elif kind == "reject":
                out.refusals[call_id] = reject_text(str(call["name"]), decision.get("message"))
            elif kind == "edit":
                action = decision["edited_action"]
                out.edited[call_id] = {"name": call["name"], "args": call.get("args") or {}}
                call = {**call, "name": action["name"], "args": dict(action.get("args") or {})}
        out.calls.append(call)
    return out


def mark_edited(messages: Iterable[Any], reviewed: Reviewed) -> None:
    """Put the edit note before the content of each edited call's ToolMessage."""
    executed = {str(c.get("id")): c for c in reviewed.calls}
    for message in messages:
        if not isinstance(message, ToolMessage) or message.tool_call_id not in reviewed.edited:
            continue
        note = edit_note(reviewed.edited[message.tool_call_id], executed[message.tool_call_id])
        if isinstance(message.content, str):
            message.content = f"{note}\n\n{message.content}"
        else:
            message.content = [{"type": "text", "text": note}, *message.content]


class ApprovalNode(StepNode):
    """Ask for (or auto-resolve) decisions on the gated calls (see module docstring)."""

    name = "approval"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings

    def _gate(self, state: LoopState, config: RunnableConfig) -> _Gate | None:
        """The gated calls of the newest reply and how to decide them (None: nothing gated)."""
        settings = self.settings.for_runtime(get_runtime())
        approval = settings.approval
        newest = newest_reply(state.get("messages") or [])
        ai = newest.reply
        if approval is None or ai is None or not newest.pending:
            return None
        gated = set(approval.tools)
        calls = [c for c in newest.calls() if c["name"] in gated]
        if not calls:
            return None
        run: dict[str, Any] = dict(state.get("run") or {})
        auto = (approval.resolver is not None and auto_allowed(run, approval.max_auto_rounds)
                and not resuming(config))
        return _Gate(ai, calls, run, approval, auto,
                     response_schema(calls, gated=gated, known={t.name for t in settings.tools}))

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """The gate, the resolver's answer (when one is set), the decisions applied."""
        gate = self._gate(state, ensure_config(config))
        if gate is None:
            return {}
        answer = None
        if gate.resolver is not None:
            answer = yield callback(gate.resolver, copy.deepcopy(gate.request), name="approval.resolver")
        return gate.decide(answer)


class _Gate:
    """The gated calls of one reply, and the decisions once they are known."""

    def __init__(self, ai: AIMessage, calls: list[dict[str, Any]], run: dict[str, Any],
                 approval: Approval, auto: bool, schema: Any) -> None:
        self.ai, self.calls, self.run, self.schema = ai, calls, run, schema
        self.request = approval_request(calls, approval.description)
        self.resolver = approval.resolver if auto else None  # None: a person decides

    def decide(self, answer: Any) -> dict[str, Any]:
        """The update with the decisions: the resolver's ``answer``, or a human's."""
        update: dict[str, Any] = {}
        if answer is None:
            response: Decisions = ask_plainly(self.request, self.schema)
            decisions = [dict(d) for d in response["decisions"]]
        else:
            try:
                response = TypeAdapter(self.schema).validate_python(answer)
            except ValidationError as exc:
                raise ValueError(f"approval.resolver returned an invalid answer: {exc}") from exc
            decisions = [dict(d) for d in response["decisions"]]
            self.run["auto_rounds"] = int(self.run.get("auto_rounds") or 0) + 1
            update["run"] = self.run
            emit(get_runtime(), {"event": "approval_auto", "decisions": decisions,
                                 "auto_rounds": self.run["auto_rounds"]})
        update["review"] = {"message_id": self.ai.id,
                            "decisions": {str(c["id"]): d
                                          for c, d in zip(self.calls, decisions, strict=True)}}
        return update
