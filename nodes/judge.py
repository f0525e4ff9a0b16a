"""The ``judge`` node: at a natural iteration end, ask the predicate, then a second model.

Nothing is asked on the capped iteration. The predicate's answer is kept in
``iteration_info["predicate"]`` for the router; if it asks to continue, the judge is not called.
A failed judge call is retried once as plain text; a second failure reads "not answered", with
the error in the verdict.

**Reading a verdict in text.** The instructions ask for a last line ``VERDICT: DONE`` or
``VERDICT: MORE``. ``MORE`` wins when both appear, no marker means "not answered", and a negative
JSON verdict in the text (``"answered": false``) never reads as success. The markers are chosen so
neither contains the other, nor the JSON field name (``UNANSWERED`` contains ``ANSWERED``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime
from pydantic import ValidationError

from langgraph_loop.core import prompts
from langgraph_loop.core.callbacks import callback
from langgraph_loop.core.config import Judge, JudgeVerdict
from langgraph_loop.core.drive import Io, StepNode, Steps
from langgraph_loop.core.messages import as_message, clip
from langgraph_loop.core.settings import LoopSettings
from langgraph_loop.core.state import (
    LoopState,
    Usage,
    add_usage,
    iteration_info,
    latest_answer,
    new_usage,
    usage_of,
)
from langgraph_loop.core.structured import StructuredReply, as_structured
from langgraph_loop.nodes.binding import JUDGE, tagged
from langgraph_loop.nodes.router import capped, normalize_predicate

__all__ = ["JudgeNode", "criteria_block", "judge_instructions", "judge_request", "original_request",
           "parse_text_verdict", "resolve_verdict"]


def original_request(state: LoopState) -> BaseMessage | None:
    """The message that started this run (the first human message as a fallback)."""
    messages = state.get("messages") or []
    request_id = (state.get("run") or {}).get("request_id")
    for message in messages:
        if request_id is not None and message.id == request_id:
            return message
    return next((m for m in messages if isinstance(m, HumanMessage)), None)


def judge_request(state: LoopState, judge: Judge) -> list[BaseMessage]:
    """The judge's instructions, the original request (content verbatim), the latest answer."""
    request = original_request(state)
    answer = latest_answer(state)
    out: list[BaseMessage] = [SystemMessage(judge_instructions(judge.instructions, judge.criteria)),
                              HumanMessage(prompts.JUDGE_INTRO)]
    if request is not None:
        out.append(HumanMessage(request.content))  # type: ignore[arg-type]
    out.append(HumanMessage(prompts.JUDGE_RESPONSE.format(answer=answer, question=prompts.JUDGE_QUESTION)))
    return out


REASONING_LIMIT = 2000

_MARKER = re.compile(r"VERDICT\s*:\s*[*_`]*\s*(DONE|MORE)\b", re.IGNORECASE)
_MARKER_LINE = re.compile(rf"^[^\n]*{_MARKER.pattern}[^\n]*$", re.IGNORECASE | re.MULTILINE)
_JSON_ANSWERED = re.compile(r"(?<![A-Za-z_])answered[\"']?\s*[:=]\s*[\"']?(true|false)\b", re.IGNORECASE)


def criteria_block(criteria: Sequence[str]) -> str:
    """What ``{criteria}`` becomes: a bullet list after a blank line ("" without criteria)."""
    if not criteria:
        return ""
    return f"\n\nThe response must satisfy all of the following criteria:\n{prompts.criteria_list(criteria)}"


def judge_instructions(instructions: str | None, criteria: Sequence[str]) -> str:
    """The judge's system prompt with ``{criteria}`` filled in; custom instructions without the
    ``VERDICT:`` markers get the marker instruction appended (the text fallback needs it)."""
    text = prompts.JUDGE_INSTRUCTIONS if instructions is None else instructions
    if "VERDICT:" not in text.upper():
        text = f"{text}\n\n{prompts.JUDGE_MARKERS}"
    block = criteria_block(criteria)
    return text.replace("{{criteria}}", block).replace("{criteria}", block)


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_answered(text: str, obj: dict[str, Any] | None) -> bool | None:
    if obj is not None and isinstance(obj.get("answered"), bool):
        return bool(obj["answered"])
    found = {m.lower() for m in _JSON_ANSWERED.findall(text)}
    if "false" in found:
        return False
    return True if "true" in found else None


def _bounded(text: str) -> str:
    return clip(text.strip(), REASONING_LIMIT)


def parse_text_verdict(text: str) -> dict[str, Any]:
    """Read a verdict from a reply that is not structured (the rules: module docstring)."""
    marks = {m.upper() for m in _MARKER.findall(text)}
    obj = _json_object(text)
    in_json = _json_answered(text, obj)
    negative = "MORE" in marks or in_json is False
    answered = not negative and ("DONE" in marks or in_json is True)
    reasoning = obj.get("reasoning") if obj is not None else None
    if not isinstance(reasoning, str):
        reasoning = _MARKER_LINE.sub("", text)
    return {"answered": answered, "reasoning": _bounded(reasoning)}


def _as_verdict(value: Any) -> JudgeVerdict | None:
    if isinstance(value, JudgeVerdict | dict):
        try:
            return JudgeVerdict.model_validate(value)  # a JudgeVerdict comes back as it is
        except ValidationError:
            return None
    return None


def resolve_verdict(parsed: Any, tool_args: Sequence[Any], text: str) -> dict[str, Any]:
    """The verdict: the structured one when valid, else the tool-call args, else the text."""
    for candidate in (parsed, *tool_args):
        verdict = _as_verdict(candidate)
        if verdict is not None:
            return {"answered": bool(verdict.answered), "reasoning": _bounded(verdict.reasoning)}
    return parse_text_verdict(text)


def _read(result: Any, structured: bool) -> tuple[dict[str, Any], Usage]:
    """The verdict and usage of one judge reply."""
    reply = (as_structured(result, "judge") if structured else
             StructuredReply(raw=as_message(result, "judge"), parsed=None, parsing_error=None))
    raw: AIMessage = reply["raw"]
    text = raw.text
    verdict = (resolve_verdict(reply["parsed"], [c.get("args") for c in raw.tool_calls], text)
               if structured else parse_text_verdict(text))
    return verdict, add_usage(new_usage(), usage_of(raw))


class JudgeNode(StepNode):
    """Ask the predicate, then the judge model (see module docstring)."""

    name = "judge"

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        judge = settings.iterations.judge
        self._structured: Runnable[LanguageModelInput, Any] | None = None
        if judge is not None:
            with suppress(NotImplementedError):  # no structured output: plain text only
                self._structured = judge.model.with_structured_output(JudgeVerdict, include_raw=True)

    def _steps(self, state: LoopState, config: RunnableConfig | None) -> Steps[dict[str, Any]]:
        """The predicate, then the judge (two tries), as one core for both entry points."""
        settings = self.settings.for_runtime(get_runtime())
        judge = settings.iterations.judge
        if judge is None or state.get("stop_reason") is not None or capped(state, settings):
            return {}  # asked only at a natural iteration end, and not on the capped iteration
        info = dict(iteration_info(state))
        if settings.iterations.should_continue is not None:
            go, feedback = normalize_predicate((yield callback(
                settings.iterations.should_continue, state, name="should_continue")))
            info["predicate"] = {"continue": go, "feedback": feedback}
            if go:
                return {"iteration_info": info}
        errors: list[str] = []
        first = (judge.model, False) if self._structured is None else (self._structured, True)
        for runnable, structured in (first, (judge.model, False)):  # structured first, then plain text
            try:
                result = yield Io(runnable.invoke, runnable.ainvoke,
                                  (judge_request(state, judge), tagged(config or {}, JUDGE)))
                verdict, usage = _read(result, structured)
            except GraphBubbleUp:
                raise
            except Exception as exc:  # noqa: BLE001 - a judge failure is "not answered"
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            return self._update(state, info, verdict, usage)
        failed = {"answered": False, "reasoning": "", "error": "; ".join(errors)}
        return self._update(state, info, failed, new_usage())

    @staticmethod
    def _update(state: LoopState, info: dict[str, Any], verdict: dict[str, Any],
                usage: Usage) -> dict[str, Any]:
        return {"iteration_info": info, "verdict": verdict,
                "judge_usage": add_usage(state.get("judge_usage"), usage)}
