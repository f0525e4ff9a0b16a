"""Budget scenarios: a research loop that wraps up under budget pressure.

The agent keeps researching iteration after iteration (its predicate always asks for more).
When its tokens reach 50% of ``Limits(token_budget=...)`` the pressure instruction
is queued; the model sees it on its next call, as the last message of the request,
writes its final report, and the run stops with ``budget_pressure`` at the end of
that iteration, well before the hard budget.

Example:
    >>> [s.key for s in SCENARIOS]
    ['budget-pressure']
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from rich.console import Console
    >>> import io
    >>> state = budget_pressure(Console(file=io.StringIO()), InMemorySaver())
    >>> state["stop_reason"], state["iterations"][-1]["guard"]["reason"]
    ('budget_pressure', 'budget_pressure')
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from rich.console import Console

from langgraph_loop.app.demos.base import Expect, Scenario, print_run
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import BudgetPressure, Iterations, Limits
from langgraph_loop.core.messages import is_notice
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["SCENARIOS", "budget_pressure", "search_papers"]

_FACTS = {
    1: "barn owls locate prey by sound alone",
    2: "owl feathers have serrated edges that muffle flight",
    3: "an owl's facial disc funnels sound to asymmetric ears",
    4: "great horned owls take prey heavier than themselves",
    5: "owls swallow small prey whole and regurgitate pellets",
}


@tool
def search_papers(topic: str) -> str:
    """Search papers about a topic; returns one finding."""
    index = int(topic.rsplit(" ", 1)[-1]) if topic[-1].isdigit() else 1
    return _FACTS.get(index, "no new findings")


def _researcher(messages: list[BaseMessage]) -> Any:
    """The scripted model: research in two-search iterations until told to wrap up."""
    last = messages[-1]
    found = [str(m.content) for m in messages if m.type == "tool"]
    if is_notice(last):
        return ("Final report (budget nearly spent, wrapping up): " + "; ".join(found) + ".")
    if last.type == "tool" and len(found) % 2 == 0:
        return f"Notes so far: {len(found)} findings. More to research."
    return [("search_papers", {"topic": f"owl hunting {len(found) + 1}"})]


def budget_pressure(console: Console, checkpointer: Any) -> dict[str, Any]:
    """A loop that would research forever, wrapped up by budget pressure."""
    model = ScriptedChatModel(default=_researcher)
    agent = create_loop_agent(
        model, [search_papers], iterations=Iterations(should_continue=lambda _state: True, max=10),
        limits=Limits(token_budget=2000, budget_pressure=BudgetPressure(threshold=0.5)),
        checkpointer=checkpointer)
    config: Any = {"configurable": {"thread_id": "demo-budget-pressure"}}
    state = agent.invoke({"messages": [HumanMessage("Research how owls hunt.")]}, config)
    print_run(console, "Budget pressure: Limits(token_budget=2000, "
                       "budget_pressure=BudgetPressure(threshold=0.5))", state)
    return state


SCENARIOS = [
    Scenario("budget-pressure", "A research loop wrapped up by budget pressure", budget_pressure,
             ["limits", "budgets"], Expect("budget_pressure", iterations=3, loop_warnings=0)),
]
