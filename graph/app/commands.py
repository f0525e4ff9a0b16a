"""What each ``langgraph-loop`` subcommand does.

Example:
    >>> [t.name for t in demo_tools()]
    ['get_weather', 'send_email']
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import openai
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from rich.console import Console

from langgraph_loop import Judge
from langgraph_loop.app.agent import GATED_TOOLS, TOOLS, get_weather
from langgraph_loop.app.demos import all_scenarios
from langgraph_loop.app.demos.base import print_run
from langgraph_loop.app.env import DEFAULT_DB, UsageError, model_from_env
from langgraph_loop.app.picture import example_agent, mermaid, render_png
from langgraph_loop.app.progress import Progress, run_with_progress
from langgraph_loop.app.review import decisions_for
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import (
    Approval,
    BudgetPressure,
    Hooks,
    Iterations,
    Limits,
    StallDetection,
)
from langgraph_loop.core.history import LoopGraph
from langgraph_loop.core.stop import StopReason
from langgraph_loop.scripted import ScriptedChatModel

__all__ = [
    "EXIT_CODES",
    "NO_STOP_REASON",
    "RUN_MAX_ITERATIONS",
    "UsageError",
    "demo",
    "demo_tools",
    "exit_code",
    "graph",
    "live_demo",
    "model_from_env",
    "offline_demo",
    "run",
    "scenario_list",
    "show",
    "sqlite_saver",
]


DB_FIX = "pass --db the path of a SQLite file, or of a new one to create"


def _check_place(path: Path) -> None:
    """``path`` can be a file: ``UsageError`` if it is a folder or lies under a file."""
    if path.is_dir():
        raise UsageError(f"--db {path} is a folder, not a SQLite file; {DB_FIX}")
    above = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if above is not None:
        raise UsageError(f"--db {path} lies under {above}, which is a file, not a folder; {DB_FIX}")


def _open_store(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file at ``path`` (created with its folder), read once.

    Raises:
        UsageError: the path is a folder, lies under a file, or holds a file that is not a
            SQLite database (one line naming it, exit 2).
    """
    _check_place(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--db {path}: its folder cannot be created ({exc.strerror}); "
                         f"{DB_FIX}") from exc
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False)
    except sqlite3.Error as exc:
        raise UsageError(f"--db {path} cannot be opened ({exc}); {DB_FIX}") from exc
    try:
        conn.execute("PRAGMA schema_version")  # SQLite reads the file's header only now
    except sqlite3.Error as exc:
        conn.close()
        raise UsageError(f"--db {path} is not a SQLite database ({exc}); {DB_FIX}") from exc
    return conn


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    """The embedded default checkpointer: a SQLite file (created with its folder).

    Raises:
        UsageError: ``path`` cannot hold one (``_open_store``).
    """
    conn = _open_store(path)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


LIVE_TASK = ("What is the weather in Paris and in Rome right now? Check each city with the "
             "weather tool, then answer in one sentence.")


def demo(args: argparse.Namespace, console: Console) -> int:
    """The scenarios offline, or one live task when an OpenAI-compatible model is set.

    ``--list`` lists the scenarios; named scenarios always run offline (they are scripted).
    """
    if getattr(args, "list", False):
        console.print(scenario_list(), markup=False, highlight=False)
        return 0
    if not getattr(args, "offline", False) and not args.scenarios and (
        os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
    ):
        return live_demo(args, console)
    return offline_demo(args, console)


def live_demo(args: argparse.Namespace, console: Console) -> int:
    """One task through the configured model, stored in the SQLite default."""

    model = model_from_env(os.environ)
    thread = f"demo-{uuid.uuid4().hex[:8]}"
    with sqlite_saver(args.db or DEFAULT_DB) as saver:
        agent = create_loop_agent(model, [get_weather], checkpointer=saver,
                                  iterations=Iterations(max_model_calls=8),
                                  limits=Limits(max_tool_calls=6))
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        state = run_with_progress(agent, {"messages": [HumanMessage(LIVE_TASK)]}, config, console)
    print_run(console, f"live demo with {getattr(model, 'model_name', 'the model')}", state)
    console.print(f"\nthread {thread} is stored in {args.db or DEFAULT_DB}; "
                  "`langgraph-loop demo --offline` runs the scripted scenarios.")
    return 0


def offline_demo(args: argparse.Namespace, console: Console) -> int:
    """Run the offline scenarios against a SQLite checkpointer."""

    known = {s.key for s in all_scenarios()}
    unknown = [key for key in args.scenarios if key not in known]
    if unknown:
        raise UsageError(f"no scenario named {', '.join(map(repr, unknown))}. The scenarios:\n"
                         + scenario_list())
    chosen = [s for s in all_scenarios() if not args.scenarios or s.key in args.scenarios]
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "demo.sqlite"
        with sqlite_saver(db) as saver:
            for scenario in chosen:
                scenario.run(console, saver)
        console.print(f"\n{len(chosen)} scenarios ran offline with the scripted demo model.")
        if args.db:
            console.print(f"Their threads are stored in {db} as demo-<scenario>, e.g. "
                          f"`langgraph-loop show demo-{chosen[0].key} --db {db}`.")
    return 0


def scenario_list() -> str:
    """One line per offline scenario: its key and title."""
    scenarios = all_scenarios()
    width = max(len(s.key) for s in scenarios)
    return "\n".join(f"  {s.key:<{width}}  {s.title}" for s in scenarios)


def demo_tools() -> tuple[Any, ...]:
    """The demo tools of the served graph (``graph/app/agent.py``)."""
    return TOOLS


@contextmanager
def provider_errors(model: Any, resume: str) -> Iterator[None]:
    """The model endpoint's errors, after the retries, as one line and a hint (``resume``:
    how to retry)."""
    endpoint = getattr(model, "openai_api_base", None) or "the OpenAI API"
    try:
        yield
    except openai.APIConnectionError as exc:  # also a timeout
        raise UsageError(f"cannot reach the model endpoint {endpoint}: {exc}",
                         hint=f"check OPENAI_BASE_URL and that the server is up; {resume}"
                         ) from exc
    except openai.APIStatusError as exc:
        raise UsageError(f"the model endpoint {endpoint} answered {exc.status_code}: "
                         f"{exc.message}",
                         hint=f"check OPENAI_API_KEY and LANGGRAPH_LOOP_MODEL; {resume}") from exc


RUN_MAX_ITERATIONS = 3
"""Iterations per ``run --judge`` unless ``--max-iterations`` says otherwise."""


EXIT_CODES: dict[StopReason, int] = {
    StopReason.COMPLETED: 0,
    StopReason.MAX_ITERATIONS: 10,
    StopReason.MAX_MODEL_CALLS: 11,
    StopReason.MAX_TOOL_CALLS: 12,
    StopReason.TOKEN_BUDGET: 13,
    StopReason.BUDGET_PRESSURE: 14,
    StopReason.LOOP_DETECTED: 15,
    StopReason.TOOL_ERRORS: 16,
    StopReason.STALLED: 17,
    StopReason.TIMEOUT: 18,
    StopReason.TERMINATED: 19,
    StopReason.STEP_LIMIT: 20,
}
"""``langgraph-loop run``'s exit code per stop reason: 0 only for ``completed``, so a CI job or
a cron agent can tell a loop stop from success (2 stays a usage error)."""
NO_STOP_REASON = 1
"""The exit code of a run that ended without a stop reason (never expected)."""


def exit_code(stop_reason: str | None) -> int:
    """The exit code for a run's stop reason.

    Example:
        >>> exit_code("completed"), exit_code("loop_detected"), exit_code(None)
        (0, 15, 1)
    """
    return NO_STOP_REASON if stop_reason is None else EXIT_CODES[StopReason(stop_reason)]


NEEDS_JUDGE = ("max_iterations", "stall", "stop_file")
"""``run`` flags that only matter when an iteration can be followed by another (``--judge``)."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _options(args: argparse.Namespace, model: Any, tools: tuple[Any, ...]) -> dict[str, Any]:
    """``create_loop_agent``'s keywords for ``run``'s flags (``UsageError`` for a flag that
    needs another: ``--max-iterations``, ``--stall``, ``--stop-file`` need ``--judge``,
    ``--budget-pressure`` needs ``--token-budget``)."""
    judged = getattr(args, "judge", False)
    given = [n for n in NEEDS_JUDGE if getattr(args, n, None) is not None]
    if given and not judged:
        flag = _flag(given[0])
        raise UsageError(f"{flag} needs --judge: without a judge a run ends at the model's first "
                         "answer, so there is no second iteration", hint=f"`langgraph-loop run "
                         f"\"...\" --judge {flag} {getattr(args, given[0])}`")
    budget, pressure = getattr(args, "token_budget", None), getattr(args, "budget_pressure", None)
    if pressure is not None and budget is None:
        raise UsageError("--budget-pressure needs --token-budget: it is a fraction of the budget",
                         hint=f"`langgraph-loop run \"...\" --token-budget 20000 "
                              f"--budget-pressure {pressure}`")
    stall, stop_file = getattr(args, "stall", None), getattr(args, "stop_file", None)
    if stall == 1:
        raise UsageError("--stall: expected 2 or more iterations (one iteration cannot repeat itself)")
    iterations = Iterations(
        judge=Judge(model=model) if judged else None,  # without a judge: one iteration
        max=(getattr(args, "max_iterations", None) or RUN_MAX_ITERATIONS) if judged else 1,
        max_model_calls=getattr(args, "max_model_calls", None) or 25,
        stall=StallDetection(consecutive=stall) if stall else None)
    limits = Limits(max_tool_calls=getattr(args, "max_tool_calls", None), token_budget=budget,
                    budget_pressure=BudgetPressure(threshold=pressure) if pressure else None,
                    max_tool_errors=getattr(args, "max_tool_errors", None),
                    max_duration_s=getattr(args, "timeout", None))
    hooks = Hooks(on_iteration_end=lambda record, state: stop_file.exists()) if stop_file else None
    return {"iterations": iterations, "limits": limits, "hooks": hooks,
            "approval": Approval(tools=GATED_TOOLS) if tools else None}  # send_email asks a human


def _retry_hint(args: argparse.Namespace, thread: str) -> str:
    """The command that retries this run's request on its thread, as the person typed it."""
    argv = list(getattr(args, "argv", None) or ["run", args.task])
    if not args.thread:
        argv += ["--thread", thread]
    return f"`{shlex.join(['langgraph-loop', *argv])}` retries it on this thread"


def _inputs(agent: Any, config: RunnableConfig, task: str) -> Any:
    """The run's input: the task as a new message, or None (go on from the stored step) when the
    thread's last run stopped on an error before answering this same task, so a retry does
    not store the question twice."""
    stored = agent.get_state(config)
    if stored.next and not stored.interrupts:
        asked = [m for m in stored.values.get("messages") or [] if isinstance(m, HumanMessage)]
        if asked and asked[-1].content == task:
            return None
    return {"messages": [HumanMessage(task)]}


def run(args: argparse.Namespace, console: Console) -> int:
    """Run a task on a stored thread with live progress; the exit code says how it stopped
    (``EXIT_CODES``; the limit flags make every stop reachable).

    With ``--judge`` the model also judges each iteration; an iteration it finds unfinished is
    followed by another, up to ``--max-iterations``. With ``--json`` the progress and the
    answer go to stderr and stdout gets one JSON object: the thread, the stop reason, the
    exit code, the answer and the usage.
    """

    judged = getattr(args, "judge", False)
    model = model_from_env(os.environ)
    thread = args.thread or uuid.uuid4().hex[:8]
    tools = demo_tools() if getattr(args, "demo_tools", False) else ()
    options = _options(args, model, tools)
    with sqlite_saver(args.db) as saver, provider_errors(model, _retry_hint(args, thread)):
        agent = create_loop_agent(model, tools, checkpointer=saver, **options)
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        if getattr(args, "recursion_limit", None):
            config["recursion_limit"] = args.recursion_limit
        context, check = getattr(args, "context", None), cast(LoopGraph, agent).check_context
        try:  # the graph's own check of per-run overrides, before anything runs
            if check is not None:
                check(context)
        except ValueError as exc:
            raise UsageError(f"--context: {exc}") from exc
        inputs = _inputs(agent, config, args.task)
        progress = Progress()  # one count for the run, across its approval pauses
        while True:  # resume after each approval the person at the terminal gives
            state = run_with_progress(agent, inputs, config, console, progress, context)
            paused = agent.get_state(config).interrupts
            if not paused:
                break
            inputs = Command(resume=decisions_for(paused, console,
                                                  approve_all=getattr(args, "yes", False)))
    answer = state["messages"][-1].content if state.get("messages") else ""
    code = exit_code(state.get("stop_reason"))
    if getattr(args, "json", False):
        result = {"thread": thread, "stop_reason": state.get("stop_reason"), "exit_code": code,
                  "iterations": state.get("iteration"), "answer": answer,
                  "usage": state.get("usage") or {}, "judge_usage": state.get("judge_usage") or {}}
        sys.stdout.write(json.dumps(result, default=str) + "\n")  # the console went to stderr
        return code
    console.print(answer)
    judge_tokens = (state.get("judge_usage") or {}).get("total_tokens", 0)
    console.print(f"thread={thread} stop_reason={state.get('stop_reason')} "
                  f"tokens={(state.get('usage') or {}).get('total_tokens', 0)}"
                  + (f" judge_tokens={judge_tokens}" if judged else ""), style="dim")
    return code


def show(args: argparse.Namespace, console: Console) -> int:
    """Print a stored thread: transcript, stop reason, per-iteration records, usage."""

    _check_place(Path(args.db))
    if not Path(args.db).exists():
        raise UsageError(f"no thread store at {args.db}",
                         hint=f"`langgraph-loop run \"task\" --db {args.db}` creates it; "
                              f"the default store is {DEFAULT_DB}")
    with sqlite_saver(args.db) as saver:
        agent = create_loop_agent(ScriptedChatModel(), checkpointer=saver)
        snapshot = agent.get_state({"configurable": {"thread_id": args.thread}})
        known = sorted({str(c.config["configurable"]["thread_id"]) for c in saver.list(None)})
    if not snapshot.values:
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise UsageError(f"no thread {args.thread!r} in {args.db}",
                         hint=f"threads there: {listed}" if known else "that store has no threads")
    print_run(console, f"thread {args.thread}", dict(snapshot.values))
    return 0


def graph(args: argparse.Namespace, console: Console) -> int:
    """Print the graph as Mermaid text; ``--png FILE`` renders it offline."""

    agent = example_agent()
    if args.png is None:
        console.print(mermaid(agent), markup=False, highlight=False)
        return 0
    render_png(agent, args.png)
    console.print(f"wrote {args.png}")
    return 0
