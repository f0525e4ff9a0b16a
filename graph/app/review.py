"""Asking the person at the terminal to approve gated tool calls (``run --demo-tools``).

The approval interrupt's request (``action_requests`` + ``review_configs``) is shown
one call at a time; the answer becomes one decision of the same shapes a program
resumes with: ``{"type": "approve"}``, ``{"type": "edit", "edited_action": {...}}``,
``{"type": "reject", "message": ...}``. ``--yes`` approves every call without asking.

Example:
    >>> import io
    >>> from rich.console import Console
    >>> request = {"action_requests": [{"name": "send_email", "args": {"to": "a@b.c"}}]}
    >>> answers = iter(["r", "not now"])
    >>> decide(request, Console(file=io.StringIO()), ask=lambda _prompt: next(answers))
    [{'type': 'reject', 'message': 'not now'}]
    >>> decide(request, Console(file=io.StringIO()), approve_all=True)
    [{'type': 'approve'}]
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console

__all__ = ["decide", "decisions_for"]

Ask = Callable[[str], str]
CHOICES = {"a": "approve", "approve": "approve", "y": "approve", "yes": "approve",
           "e": "edit", "edit": "edit", "r": "reject", "reject": "reject", "n": "reject",
           "no": "reject"}


def _ask_decision(action: Mapping[str, Any], console: Console, ask: Ask) -> dict[str, Any]:
    """One gated call: approve, edit (new JSON arguments) or reject (with a reason)."""
    args = json.dumps(action.get("args") or {}, ensure_ascii=False)
    console.print(f"approval needed: {action.get('name')}({args})", markup=False, highlight=False)
    while True:
        try:
            answer = ask("approve / edit / reject? [a/e/r] ").strip().lower()
        except EOFError:
            return {"type": "reject", "message": "no decision: the terminal input ended"}
        choice = CHOICES.get(answer)
        if choice == "approve":
            return {"type": "approve"}
        if choice == "reject":
            try:
                reason = ask("reason (optional): ").strip()
            except EOFError:
                reason = ""
            return {"type": "reject", "message": reason or "rejected at the terminal"}
        if choice == "edit":
            try:
                edited = json.loads(ask(f"new arguments as JSON [{args}]: ") or args)
            except (json.JSONDecodeError, EOFError):
                console.print("not valid JSON; asking again", markup=False)
                continue
            return {"type": "edit", "edited_action": {"name": action.get("name"), "args": edited}}
        console.print("answer a (approve), e (edit) or r (reject)", markup=False)


def decide(request: Mapping[str, Any], console: Console, *, approve_all: bool = False,
           ask: Ask | None = None) -> list[dict[str, Any]]:
    """One decision per action request, in order."""
    actions = list(request.get("action_requests") or [])
    if approve_all:
        for action in actions:
            console.print(f"approved (--yes): {action.get('name')}", markup=False)
        return [{"type": "approve"} for _ in actions]
    reader = ask or functools.partial(console.input, markup=False)
    return [_ask_decision(action, console, reader) for action in actions]


def decisions_for(interrupts: Any, console: Console, *, approve_all: bool = False,
                  ask: Ask | None = None) -> dict[str, Any]:
    """The resume value for a paused run's approval interrupt(s)."""
    decisions: list[dict[str, Any]] = []
    for pending in interrupts:
        decisions += decide(pending.value, console, approve_all=approve_all, ask=ask)
    return {"decisions": decisions}
