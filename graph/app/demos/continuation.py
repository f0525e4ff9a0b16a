"""Continuation scenarios: a judge loop that needs two iterations; a todo loop.

Example:
    >>> [s.key for s in SCENARIOS]
    ['judge', 'todos']
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from rich.console import Console

from langgraph_loop.app.demos.base import Expect, Scenario, print_run
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Iterations, Judge
from langgraph_loop.scripted import ScriptedChatModel
from langgraph_loop.todos import todos_remaining, todos_remaining_message, write_todos

__all__ = ["SCENARIOS"]


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def judge_loop(console: Console, checkpointer: Any) -> dict[str, Any]:
    """A judge rejects the first answer (no year), accepts the revised one."""
    model = ScriptedChatModel(script=[
        "Paris hosted the Summer Olympics.",
        "Paris hosted the Summer Olympics in 2024 (and before that in 1900 and 1924).",
    ])
    judge_model = ScriptedChatModel(script=[
        [("JudgeVerdict", {"answered": False,
                           "reasoning": "The answer does not say when: the year is missing."})],
        [("JudgeVerdict", {"answered": True, "reasoning": "Names the city and the years."})],
    ])
    judge = Judge(model=judge_model, criteria=("state the year",))
    agent = create_loop_agent(model, iterations=Iterations(judge=judge, max=5), checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("When did Paris host the Olympics?")]},
                         _config("demo-judge"))
    print_run(console, "Judge loop: rejected once, accepted on iteration 2", state)
    for record in state["iterations"]:
        verdict = record.get("verdict") or {}
        console.print(f"  judge on iteration {record['iteration']}: answered={verdict.get('answered')} "
                      f"— {verdict.get('reasoning')}", markup=False, highlight=False)
    usage = state.get("judge_usage") or {}
    console.print(f"  judge tokens: {usage.get('total_tokens', 0)}", markup=False)
    return state


def _todos(*statuses: str) -> list[tuple[str, dict[str, Any]]]:
    items = ["outline the report", "write the summary", "list the sources"]
    return [("write_todos", {"todos": [{"content": c, "status": s}
                                       for c, s in zip(items, statuses, strict=True)]})]


def todo_loop(console: Console, checkpointer: Any) -> dict[str, Any]:
    """The agent plans todos; the loop continues until every todo is completed."""
    model = ScriptedChatModel(script=[
        _todos("in_progress", "pending", "pending"), "Plan written; the outline is done.",
        _todos("completed", "in_progress", "pending"), "Summary written.",
        _todos("completed", "completed", "completed"), "Sources listed. The report is complete.",
    ])
    agent = create_loop_agent(model, [write_todos], iterations=Iterations(
        should_continue=todos_remaining(), continuation=todos_remaining_message,
        inject_progress=False), checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Write a short report on solar power.")]},
                         _config("demo-todos"))
    print_run(console, "Todo loop: continue while todos are open", state)
    for todo in state.get("todos", []):
        console.print(f"  [{todo['status']}] {todo['content']}", markup=False, highlight=False)
    return state


SCENARIOS = [
    Scenario("judge", "Judge loop that needs two iterations", judge_loop, ["continuation", "judge"],
             Expect("completed", iterations=2, loop_warnings=0, model_calls=2)),
    Scenario("todos", "Todo loop until every todo is completed", todo_loop,
             ["continuation", "todos"], Expect("completed", iterations=3, loop_warnings=0)),
]
