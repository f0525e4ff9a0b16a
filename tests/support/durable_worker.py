"""A child process for tests/e2e/test_durable.py: one phase of a thread's life per process.

Usage: ``python -m tests.support.durable_worker PHASE BACKEND TARGET THREAD WORKDIR``

- BACKEND/TARGET: ``sqlite`` + a file path, or ``postgres`` + a connection URI.
- PHASE ``start``: run the task; pass 1 searches; pass 2 deploys twice (the first
  deploy is approved by the resolver, whose budget is one round; the repeated deploy
  also queues a loop warning) and the run pauses at the approval interrupt.
- PHASE ``resume``: print the stored state, then approve; the deploy tool kills this
  process (``os._exit``) before doing anything when ``WORKDIR/crash`` is absent.
- PHASE ``recover``: print the stored state, then continue the thread (``invoke(None)``).

Every phase prints one JSON line describing what it saw; tool effects are appended
to ``WORKDIR/effects.log`` so the test can count what really ran.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.types import Command

from langgraph_loop import Approval, Iterations, LoopDetection, Repeat, create_loop_agent
from langgraph_loop.core.messages import is_notice
from langgraph_loop.core.state import executed_calls
from langgraph_loop.scripted import ScriptedChatModel
from tests.support.savers import sync_saver as saver

WORKDIR = Path(".")  # set by main()
TODOS = [{"content": "check status", "status": "completed"},
         {"content": "deploy to staging", "status": "in_progress"}]


def _effect(line: str) -> None:
    with (WORKDIR / "effects.log").open("a") as log:
        log.write(line + "\n")


@tool
def search(q: str) -> str:
    """Search the service status."""
    _effect(f"search {q}")
    return f"{q}: all green"


@tool
def deploy(env: str) -> str:
    """Deploy the service to an environment."""
    marker = WORKDIR / "crash"
    if os.environ.get("DURABLE_CRASH") == "1" and not marker.exists():
        marker.write_text("crashed once")
        os._exit(17)  # a crash in the middle of the tools step: nothing is written
    _effect(f"deploy {env}")
    return f"deployed to {env}"


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{n}",
                                      "type": "tool_call"}])


def reply(messages: list[BaseMessage]) -> Any:
    """The model's next reply, decided by the transcript (so any process can continue)."""
    n = sum(isinstance(m, AIMessage) for m in messages)
    script: list[Any] = [
        _call("search", {"q": "status"}, n),
        "Pass 1: the service is green.",
        _call("deploy", {"env": "staging"}, n),
        _call("deploy", {"env": "staging"}, n),
        "Deployed to staging.",
    ]
    return script[n]


def build(checkpointer: Any) -> Any:
    model = ScriptedChatModel(default=reply)
    return create_loop_agent(
        model, [search, deploy], checkpointer=checkpointer,
        iterations=Iterations(max=5, should_continue=lambda state: state["iteration"] < 2),
        loop_detection=LoopDetection(repeat=Repeat(warn_after=2, stop_after=4)),
        approval=Approval(tools=["deploy"], resolver=lambda _r: {"decisions": [{"type": "approve"}]},
                          max_auto_rounds=1),
    )


def snapshot(agent: Any, config: RunnableConfig) -> dict[str, Any]:
    """What the stored thread knows."""
    state = agent.get_state(config)
    values = state.values
    run = values.get("run") or {}
    return {
        "next": list(state.next),
        "interrupts": [i.value for i in state.interrupts],
        "stop_reason": values.get("stop_reason"),
        "iteration": values.get("iteration"),
        "iterations": len(values.get("iterations") or []),
        "usage": values.get("usage"),
        "auto_rounds": run.get("auto_rounds"),
        "tool_calls": executed_calls(values),
        "review": values.get("review"),
        "loop_notices": [n["source"] for n in values.get("loop_notices") or []],
        "todos": values.get("todos"),
        "progress": values.get("progress"),
        "messages": [m.type for m in values.get("messages") or []],
    }


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What an invoke returned."""
    return {
        "stop_reason": result.get("stop_reason"),
        "paused": "__interrupt__" in result,
        "iteration": result.get("iteration"),
        "records": [[c["name"] for c in r["tool_calls"]] for r in result.get("iterations") or []],
        "messages": [m.type + (f":{m.name}" if m.name else "") for m in result["messages"]],
        "last": result["messages"][-1].content,
        "warning_before_answer": [m.content for m in result["messages"]
                                  if is_notice(m)],
    }


def main(phase: str, backend: str, target: str, thread: str, workdir: str) -> None:
    global WORKDIR  # noqa: PLW0603 - one process, one thread story
    WORKDIR = Path(workdir)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    with saver(backend, target) as checkpointer:
        agent = build(checkpointer)
        report: dict[str, Any] = {"phase": phase}
        if phase == "start":
            result = agent.invoke({"messages": [HumanMessage("Check status, then deploy.")],
                                   "todos": TODOS}, config, durability="sync")
        else:
            report["before"] = snapshot(agent, config)
            print(json.dumps(report), flush=True)
            report = {"phase": phase}
            command = (Command(resume={"decisions": [{"type": "approve"}]}) if phase == "resume"
                       else None)
            result = agent.invoke(command, config, durability="sync")
        report["result"] = outcome(result)
        report["after"] = snapshot(agent, config)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
