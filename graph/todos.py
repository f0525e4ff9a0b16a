"""Todos: the tools the agent plans with (``write_todos``, ``set_mode``), and the
``Iterations`` callbacks that keep it working while items are open. ``todos`` and ``mode``
are thread state: they survive runs on the same thread.

Example:
    >>> from langgraph_loop import create_loop_agent, write_todos, todos_remaining, todos_remaining_message
    >>> keep_going = todos_remaining(modes=["execute"])
    >>> keep_going({"mode": "Execute", "todos": [{"content": "a", "status": "pending"}]})
    True
    >>> text = todos_remaining_message({"todos": [{"content": "write tests", "status": "pending"},
    ...                                           {"content": "ship", "status": "completed"}]}, None)
    >>> text.splitlines()[1]
    '- [pending] write tests'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command
from pydantic import BaseModel, Field

from langgraph_loop.core import prompts
from langgraph_loop.core.state import Todo
from langgraph_loop.nodes.router import default_message

__all__ = ["TodoItem", "open_todos", "set_mode", "todos_remaining", "todos_remaining_message", "write_todos"]

STATUSES = ("pending", "in_progress", "completed")


class TodoItem(BaseModel):
    """One todo as the model writes it."""

    content: str = Field(min_length=1, description="What to do, in one line.")
    status: Literal["pending", "in_progress", "completed"] = Field(
        description="pending, in_progress or completed."
    )


def _explain(error: Any) -> str:
    """A short, model-readable error for invalid ``write_todos`` arguments."""
    lines = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ()))
        if item.get("type") == "literal_error":
            lines.append(f"{where}: {item.get('input')!r} is not a valid status; "
                         f"use one of {', '.join(STATUSES)}")
        else:
            lines.append(f"{where}: {item.get('msg')}")
    return "Error: write_todos was not applied: " + "; ".join(lines) + "."


@tool
def write_todos(todos: list[TodoItem], tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Write the complete todo list for the task (it replaces the previous list).

    Plan the work as todos, keep exactly the items you are working on as in_progress,
    and mark each item completed as soon as it is done. Statuses: pending,
    in_progress, completed.
    """
    items: list[Todo] = [{"content": t.content, "status": t.status} for t in todos]
    done = sum(1 for t in items if t["status"] == "completed")
    text = f"Todo list updated: {len(items)} item(s), {done} completed."
    return Command(update={"todos": items,
                           "messages": [ToolMessage(text, tool_call_id=tool_call_id,
                                                    name="write_todos")]})


write_todos.handle_validation_error = _explain


@tool
def set_mode(mode: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Switch the working mode (for example from "plan" to "execute")."""
    return Command(update={"mode": mode,
                           "messages": [ToolMessage(f"Mode set to {mode!r}.",
                                                    tool_call_id=tool_call_id, name="set_mode")]})


def open_todos(todos: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The items that are not completed."""
    return [t for t in todos or [] if t.get("status") != "completed"]


def todos_remaining(modes: Sequence[str] | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """A ``should_continue`` predicate: true while a todo is not completed (with ``modes``, only
    while ``state["mode"]`` is one of them, case-insensitive; a ``ValueError`` for bad ``modes``)."""
    if isinstance(modes, str):
        raise ValueError("todos_remaining: modes must be a list of mode names, not one string")
    wanted = None if modes is None else {str(m).strip().lower() for m in modes}
    if wanted is not None and (not wanted or "" in wanted):
        raise ValueError("todos_remaining: modes must name at least one non-empty mode "
                         "(use None to loop in every mode)")

    def predicate(state: Mapping[str, Any]) -> bool:
        if wanted is not None and str(state.get("mode") or "").strip().lower() not in wanted:
            return False
        return bool(open_todos(state.get("todos")))

    predicate.__name__ = "todos_remaining"
    return predicate


def todos_remaining_message(state: Mapping[str, Any], feedback: str | None = None) -> str:
    """A ``continuation`` listing the open todos (the default text when none is open)."""
    items = open_todos(state.get("todos"))
    if not items:
        return default_message(feedback)
    lines = "\n".join(f"- [{t.get('status')}] {t.get('content')}" for t in items)
    text = prompts.TODOS_OPEN.format(count=len(items), lines=lines)
    return prompts.FEEDBACK.format(feedback=feedback, text=text) if feedback else text

