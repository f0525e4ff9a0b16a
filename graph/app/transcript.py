"""Readable transcripts for the terminal (``langgraph-loop show``, ``langgraph-loop demo``).

A run is shown as a table (one row per message: who, what), then the stop reason and
usage, then one line per iteration. Roles are labelled the way the model saw them: the
user, the assistant and its tool calls, each tool result (✓ or ✗), and the loop's
own messages, tagged with their name (``[loop_notice]`` notices, ``[loop_continue]``
continuations, ...).

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> ai = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c"}])
    >>> [row(m)[:2] for m in [HumanMessage("hi"), ai, ToolMessage("2", tool_call_id="c", name="add")]]
    [('user', 'hi'), ('assistant', '→ add({"a": 1})'), ('tool ✓ add', '2')]
    >>> summary({"stop_reason": "completed", "iteration": 1, "usage": {"total_tokens": 9}})
    'stop_reason=completed  iterations=1  tokens=9 (in 0, out 0)'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from langgraph_loop.core.messages import as_text, is_notice, shorten

__all__ = ["iteration_lines", "render_run", "row", "summary", "transcript_table"]


def _text(content: Any, limit: int = 600) -> str:
    return shorten(as_text(content), limit)


def _calls(message: AIMessage) -> str:
    return ", ".join(f"{c['name']}({json.dumps(c['args'], ensure_ascii=False)})"
                     for c in message.tool_calls)


def row(message: BaseMessage) -> tuple[str, str, str]:
    """``(who, text, style)`` for one message."""
    if isinstance(message, AIMessage):
        calls = _calls(message)
        if calls:
            text = f"→ {calls}" + (f"  {_text(message.content)}" if message.content else "")
            return "assistant", text, "cyan"
        return "assistant", _text(message.content), "bold"
    if isinstance(message, ToolMessage):
        failed = message.status == "error"
        who = f"tool {'✗' if failed else '✓'} {message.name or ''}".rstrip()
        return who, _text(message.content), "red" if failed else "green"
    if isinstance(message, HumanMessage) and message.name:
        style = "yellow" if is_notice(message) else "magenta"
        return "loop", f"[{message.name}] {_text(message.content)}", style
    if isinstance(message, SystemMessage):
        return "system", _text(message.content), "dim"
    return "user", _text(message.content), "bold blue"


def transcript_table(messages: Sequence[BaseMessage], start: int = 0) -> Table:
    """The messages (from index ``start``) as a two-column table."""
    table = Table(box=box.SIMPLE, show_header=False, pad_edge=False, expand=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("who", no_wrap=True)
    table.add_column("message", overflow="fold")
    for index, message in enumerate(messages[start:], start):
        who, text, style = row(message)
        table.add_row(str(index), Text(who, style=style), Text(text))
    return table


def summary(state: dict[str, Any]) -> str:
    """The stop reason, iterations and token usage of a run."""
    usage = state.get("usage") or {}
    return (f"stop_reason={state.get('stop_reason')}  iterations={state.get('iteration')}  "
            f"tokens={usage.get('total_tokens', 0)} (in {usage.get('input_tokens', 0)}, "
            f"out {usage.get('output_tokens', 0)})")


def iteration_lines(state: dict[str, Any]) -> list[str]:
    """One line per iteration: model calls, tool calls with their status, the guard."""
    lines = []
    for record in state.get("iterations") or []:
        calls = ", ".join(f"{c['name']}:{c['status']}" for c in record.get("tool_calls", []))
        guard = record.get("guard")
        verdict = record.get("verdict")
        lines.append(f"iteration {record['iteration']}: model_calls={record['model_calls']} "
                     f"tools=[{calls}]" + (f" guard={guard.get('reason')}" if guard else "")
                     + (f" answered={verdict.get('answered')}" if verdict else ""))
    return lines


def render_run(console: Console, title: str, state: dict[str, Any], start: int = 0) -> None:
    """Print a run: title rule, transcript table, summary, per-iteration lines."""
    console.rule(f"[bold]{title}")
    console.print(transcript_table(state.get("messages") or [], start))
    console.print(summary(state), style="bold green", markup=False, highlight=False)
    for line in iteration_lines(state):
        console.print("  " + line, markup=False, highlight=False)
