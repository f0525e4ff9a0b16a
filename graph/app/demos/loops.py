"""Loop-detection scenarios: a model that loops, is warned and recovers; one that
ignores the warning and is stopped with a summary; a poller that makes progress.

Example:
    >>> [s.key for s in SCENARIOS]
    ['loop-warned', 'loop-stopped', 'poll-progress']
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from rich.console import Console

from langgraph_loop.app.demos.base import Expect, Scenario, print_run
from langgraph_loop.app.demos.core import get_weather
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.messages import is_notice
from langgraph_loop.scripted import ScriptedChatModel, repeat

__all__ = ["SCENARIOS", "job_status_tool"]

PARIS = [("get_weather", {"city": "Paris"})]


def job_status_tool(step: int = 10) -> BaseTool:
    """A ``job_status`` tool whose job advances ``step`` percent per call."""
    progress = itertools.count(step, step)

    @tool
    def job_status(job_id: str) -> str:
        """Progress of a batch job."""
        done = min(next(progress), 100)
        return f"job {job_id}: {done}% done" + (" (finished)" if done == 100 else "")

    return job_status


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def _warned(messages: list[BaseMessage]) -> bool:
    last = messages[-1]
    return is_notice(last)


def _print_guard(console: Console, state: dict[str, Any]) -> None:
    for record in state.get("iterations", []):
        guard = record.get("guard") or {}
        if guard.get("guard") == "loop_detector":
            console.print(f"  loop detector: {guard['detail']}", markup=False, highlight=False)


def loop_warned(console: Console, checkpointer: Any) -> dict[str, Any]:
    """The model re-checks the same thing, is warned once, and answers."""
    model = ScriptedChatModel(script=[
        PARIS, PARIS, PARIS,
        lambda m: ("Paris is 18°C and cloudy; checking again would not change that."
                   if _warned(m) else PARIS),
    ])
    agent = create_loop_agent(model, [get_weather], checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Is it warm in Paris right now?")]},
                         _config("demo-loop-warned"))
    print_run(console, "Looping model warned after 3 identical calls, then recovers", state)
    return state


def loop_stopped(console: Console, checkpointer: Any) -> dict[str, Any]:
    """The model ignores the warning: the repeated call is not run, a summary follows."""
    model = ScriptedChatModel(
        default=repeat(PARIS),
        no_tools_reply="I kept getting the same reading: Paris is 18°C and cloudy.",
    )
    agent = create_loop_agent(model, [get_weather], checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Is it warm in Paris right now?")]},
                         _config("demo-loop-stopped"))
    print_run(console, "Model ignores the warning: hard stop, then a tools-free summary", state)
    _print_guard(console, state)
    return state


def poll_progress(console: Console, checkpointer: Any) -> dict[str, Any]:
    """Polling whose results change is progress: the same call 7 times, where a repeat
    with unchanged results would be warned at 3 and stopped at 5 (a poll that keeps
    changing is warned only at 9 = 3 × Repeat.warn_after and stopped at 15)."""
    poll = [("job_status", {"job_id": "rna-7"})]
    model = ScriptedChatModel(default=lambda m: "Job rna-7 finished."
                              if "finished" in str(m[-1].content) else poll)
    agent = create_loop_agent(model, [job_status_tool(step=15)], checkpointer=checkpointer)
    state = agent.invoke({"messages": [HumanMessage("Wait for job rna-7 to finish.")]},
                         _config("demo-poll-progress"))
    print_run(console, "Polling a job that makes progress: the same call 7 times, never flagged "
                       "(an unchanging repeat is warned at 3, stopped at 5)", state)
    return state


SCENARIOS = [
    Scenario("loop-warned", "A looping model is warned and recovers", loop_warned,
             ["loops"], Expect("completed", iterations=1, loop_warnings=1, model_calls=4)),
    Scenario("loop-stopped", "A model ignores the warning and is stopped with a summary",
             loop_stopped, ["loops"],
             Expect("loop_detected", iterations=1, loop_warnings=1, model_calls=5)),
    Scenario("poll-progress", "Polling that makes progress is not a loop: never flagged",
             poll_progress, ["loops"],
             Expect("completed", iterations=1, loop_warnings=0, model_calls=8)),
]
