"""Approval and compaction scenarios: a gated tool decided by a resolver, then a human;
a long research loop whose old messages are compacted into one summary.

Example:
    >>> [s.key for s in SCENARIOS]
    ['approval', 'compaction']
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.types import Command
from rich.console import Console

from langgraph_loop.app.demos.base import Expect, Scenario, print_run
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Approval, Compaction
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["SCENARIOS", "delete_branch", "list_branches", "read_chapter"]


@tool
def list_branches() -> str:
    """List the repository's branches."""
    return "main, feature/login, old/spike-2019, old/spike-2020"


@tool
def delete_branch(name: str) -> str:
    """Delete a branch (needs approval)."""
    return f"branch {name} deleted"


@tool
def read_chapter(number: int) -> str:
    """Read one chapter of the handbook."""
    return f"Chapter {number}: " + " ".join(f"rule {number}.{i} applies." for i in range(1, 40))


def _config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def approval(console: Console, checkpointer: Any) -> dict[str, Any]:
    """The resolver approves one gated message; the next one pauses for a human."""
    model = ScriptedChatModel(script=[
        [("list_branches", {})],
        [("delete_branch", {"name": "old/spike-2019"})],
        [("delete_branch", {"name": "main"}), ("delete_branch", {"name": "old/spike-2020"})],
        "Deleted old/spike-2019 and old/spike-2020; main was kept as the reviewer asked.",
    ])

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        names = [a["args"]["name"] for a in request["action_requests"]]
        console.print(f"resolver: approving {names}", markup=False)
        return {"decisions": [{"type": "approve"} for _ in names]}

    agent = create_loop_agent(
        model, [list_branches, delete_branch], checkpointer=checkpointer,
        approval=Approval(tools=("delete_branch",), resolver=policy, max_auto_rounds=1),
    )
    cfg = _config("demo-approval")
    console.rule("[bold]Approval: resolver first, then a human decision")
    paused = agent.invoke({"messages": [HumanMessage("Delete the old spike branches.")]}, cfg)
    request = paused["__interrupt__"][0].value
    console.print(f"paused for a human (the resolver's budget of 1 round is spent): "
                  f"stop_reason={paused['stop_reason']}  next={agent.get_state(cfg).next}",
                  markup=False)
    for action in request["action_requests"]:
        console.print(f"  needs a decision: {action['name']}({json.dumps(action['args'])})",
                      markup=False)
    decisions = [{"type": "reject", "message": "Never delete main."}, {"type": "approve"}]
    console.print(f"reviewer resumes with {json.dumps({'decisions': decisions})}", markup=False)
    state = agent.invoke(Command(resume={"decisions": decisions}), cfg)
    print_run(console, "Approval: the run after the reviewer's decisions", state)
    return state


def _summarize_chapters(messages: list[BaseMessage]) -> str:
    """The demo's summarizer: which chapters the conversation read (earlier summaries too)."""
    read = sorted({int(n) for n in re.findall(r"[Cc]hapter (\d+)", str(messages[-1].content))})
    return f"Read so far: {', '.join(f'chapter {n}' for n in read)} (39 rules each)."


def compaction(console: Console, checkpointer: Any) -> dict[str, Any]:
    """Long tool outputs: old messages are replaced by one summary before the model call."""
    model = ScriptedChatModel(
        script=[[("read_chapter", {"number": n})] for n in range(1, 6)]
        + ["The handbook's five chapters list 39 rules each, 195 rules in all."],
    )
    summarizer = ScriptedChatModel(default=_summarize_chapters)
    agent = create_loop_agent(model, [read_chapter], checkpointer=checkpointer,
                              compaction=Compaction(max_tokens=500, keep_last=4,
                                                    summarizer=summarizer))
    replaced: list[int] = []
    for event in agent.stream({"messages": [HumanMessage("Summarize the handbook.")]},
                              _config("demo-compaction"), stream_mode="custom"):
        if event.get("event") == "compaction":
            replaced.append(event["replaced"])
    state = dict(agent.get_state(_config("demo-compaction")).values)
    print_run(console, "Compaction(max_tokens=500, keep_last=4): one summary replaces old turns",
              state)
    total = sum(r.get("compacted", 0) for r in state.get("iterations", []))
    console.print(f"  {len(replaced)} compactions replaced {' + '.join(map(str, replaced))} = "
                  f"{total} messages (a later summary also replaces the earlier one); the "
                  f"agent's model saw at most {max(len(r) for r in model.requests)} messages "
                  "per call", markup=False)
    return state


SCENARIOS = [
    Scenario("approval", "Gated tool: resolver, then a human decision", approval, ["approval"],
             Expect("completed", iterations=1, loop_warnings=0, model_calls=4)),
    Scenario("compaction", "Long loop compacted into a summary", compaction, ["compaction"],
             Expect("completed", iterations=1, loop_warnings=0, model_calls=6)),
]
