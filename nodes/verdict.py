"""The judge's instructions and verdict parsing (pure functions).

A structured ``JudgeVerdict`` is used when the judge model returns one. Otherwise
the reply text is read: the instructions ask for a last line ``VERDICT: DONE`` or
``VERDICT: MORE``. ``MORE`` wins when both appear, no marker means "not answered",
and a negative JSON verdict in the text (``"answered": false``) never reads as
success. The markers are chosen so neither contains the other, nor the JSON field
name (``UNANSWERED`` contains ``ANSWERED``; ``DONE``/``MORE`` have no such trap).

Example:
    >>> parse_text_verdict("Looks complete.\\nVERDICT: DONE")
    {'answered': True, 'reasoning': 'Looks complete.'}
    >>> parse_text_verdict("VERDICT: DONE ... actually no. VERDICT: MORE")["answered"]
    False
    >>> parse_text_verdict('{"answered": false, "reasoning": "no sources"} VERDICT: DONE')
    {'answered': False, 'reasoning': 'no sources'}
    >>> parse_text_verdict("I think it is fine.")["answered"]
    False
    >>> print(judge_instructions(None, ["cite sources"]).split("\\n\\n")[-1])
    The response must satisfy all of the following criteria:
    - cite sources
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from langgraph_loop.core.config import JudgeVerdict
from langgraph_loop.core.text import clip

__all__ = ["DEFAULT_JUDGE_INSTRUCTIONS", "criteria_block", "criteria_list", "judge_instructions",
           "parse_text_verdict", "resolve_verdict"]

MARKER_INSTRUCTION = (
    'If you cannot return the structured verdict, end your reply with a line reading exactly '
    '"VERDICT: DONE" when the request is fully addressed, or "VERDICT: MORE" when it is not.'
)

DEFAULT_JUDGE_INSTRUCTIONS = (
    "You are an evaluator. You are given a user's original request and an AI agent's latest "
    "response. Decide whether the response fully addresses the original request. Set "
    "`answered` to true only if it does, and use `reasoning` to justify your decision briefly; "
    "when it does not, say what is still missing or wrong, so the agent can fix it. "
    + MARKER_INSTRUCTION + "{criteria}"
)

REASONING_LIMIT = 2000

_MARKER = re.compile(r"VERDICT\s*:\s*[*_`]*\s*(DONE|MORE)\b", re.IGNORECASE)
_MARKER_LINE = re.compile(r"^[^\n]*VERDICT\s*:\s*[*_`]*\s*(?:DONE|MORE)\b[^\n]*$",
                          re.IGNORECASE | re.MULTILINE)
_JSON_ANSWERED = re.compile(r"(?<![A-Za-z_])answered[\"']?\s*[:=]\s*[\"']?(true|false)\b",
                            re.IGNORECASE)


def criteria_list(criteria: Sequence[str]) -> str:
    """The judge's criteria as a bullet list (the judge and the agent see the same list)."""
    return "\n".join(f"- {c}" for c in criteria)


def criteria_block(criteria: Sequence[str]) -> str:
    """What ``{criteria}`` becomes: a bullet list after a blank line ("" without criteria)."""
    if not criteria:
        return ""
    return f"\n\nThe response must satisfy all of the following criteria:\n{criteria_list(criteria)}"


def judge_instructions(instructions: str | None, criteria: Sequence[str]) -> str:
    """The judge's system prompt with ``{criteria}`` filled in.

    Custom instructions that do not mention the ``VERDICT:`` markers get the marker
    instruction appended, so the text fallback still works for them.

    Example:
        >>> judge_instructions("Be strict.{criteria}", ["short"]).startswith("Be strict.")
        True
        >>> "VERDICT: MORE" in judge_instructions("Be strict.", [])
        True
    """
    text = DEFAULT_JUDGE_INSTRUCTIONS if instructions is None else instructions
    if "VERDICT:" not in text.upper():
        text = f"{text}\n\n{MARKER_INSTRUCTION}"
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
    """Read a verdict from a reply that is not structured (see module docstring)."""
    marks = {m.upper() for m in _MARKER.findall(text)}
    obj = _json_object(text)
    in_json = _json_answered(text, obj)
    negative = "MORE" in marks or in_json is False
    answered = not negative and ("DONE" in marks or in_json is True)
    reasoning = obj.get("reasoning") if obj is not None else None
    if not isinstance(reasoning, str):
        reasoning = _MARKER_LINE.sub("", text)
    return {"answered": answered, "reasoning": _bounded(reasoning)}


def _structured(value: Any) -> JudgeVerdict | None:
    if isinstance(value, JudgeVerdict):
        return value
    if isinstance(value, dict):
        try:
            return JudgeVerdict.model_validate(value)
        except ValidationError:
            return None
    return None


def resolve_verdict(parsed: Any, tool_args: Sequence[Any], text: str) -> dict[str, Any]:
    """The verdict: the structured one when valid, else the tool-call args, else the text.

    Example:
        >>> from langgraph_loop.core.config import JudgeVerdict
        >>> resolve_verdict(JudgeVerdict(answered=True, reasoning="ok"), [], "")
        {'answered': True, 'reasoning': 'ok'}
        >>> resolve_verdict(None, [{"answered": "yes please"}], "VERDICT: MORE")["answered"]
        False
    """
    for candidate in (parsed, *tool_args):
        verdict = _structured(candidate)
        if verdict is not None:
            return {"answered": bool(verdict.answered), "reasoning": _bounded(verdict.reasoning)}
    return parse_text_verdict(text)
