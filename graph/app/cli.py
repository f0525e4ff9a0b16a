"""The ``langgraph-loop`` command: ``demo``, ``run``, ``show``, ``graph``.

Example:
    >>> parser().parse_args(["run", "hello", "--thread", "t1"]).thread
    't1'
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from langgraph_loop import __version__
from langgraph_loop.app import commands
from langgraph_loop.app.env import DEFAULT_DB

__all__ = ["DEFAULT_DB", "main", "parser"]


def _iterations(value: str) -> int:
    """``--max-iterations``: a whole number of iterations, 1 or more."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a number of iterations, 1 or more, got {value!r}")
    return number


def parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(prog="langgraph-loop", description="An agent loop as a LangGraph graph.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the scripted scenarios, or a live task when "
                          "OPENAI_API_KEY / OPENAI_BASE_URL are set")
    demo.add_argument("scenarios", nargs="*",
                      help="scenario keys (default: all; naming scenarios always runs them "
                      "offline); --list shows them")
    demo.add_argument("--list", action="store_true", help="list the scenarios and exit")
    demo.add_argument("--db", type=Path, default=None,
                      help="SQLite file (offline default: temporary; live: .langgraph-loop/threads.sqlite)")
    demo.add_argument("--offline", action="store_true",
                      help="always run the scripted scenarios, even with a model configured")
    codes = ", ".join(f"{code} {reason.value}" for reason, code in commands.EXIT_CODES.items())
    run = sub.add_parser("run", help="run a task with an OpenAI-compatible model",
                         description="Run a task with an OpenAI-compatible model. The exit code "
                         f"says how the run stopped: {codes}; 2 a usage error.")
    run.add_argument("task")
    run.add_argument("--thread", default=None, help="continue this thread id")
    run.add_argument("--db", type=Path, default=DEFAULT_DB)
    run.add_argument("--judge", action="store_true",
                     help="after each iteration the model judges whether the task is done; if not, "
                          "another iteration runs with the judge's reasoning (without --judge a run "
                          "ends at the model's first answer)")
    run.add_argument("--max-iterations", type=_iterations, default=None, metavar="N",
                     help=f"iterations per run with --judge (default {commands.RUN_MAX_ITERATIONS}); "
                          "a run capped by it ends with stop_reason=max_iterations")
    run.add_argument("--demo-tools", action="store_true",
                     help="offer the demo tools (get_weather, send_email) to the model; "
                          "send_email waits for your approve / edit / reject")
    run.add_argument("--yes", action="store_true",
                     help="approve gated tool calls (send_email) without asking")
    run.add_argument("--json", action="store_true",
                     help="print the result as one JSON object on stdout (thread, stop_reason, "
                          "exit_code, iterations, answer, usage); progress goes to stderr")
    show = sub.add_parser("show", help="show a stored thread")
    show.add_argument("thread")
    show.add_argument("--db", type=Path, default=DEFAULT_DB)
    graph = sub.add_parser("graph", help="print the graph as Mermaid; --png to render")
    graph.add_argument("--png", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script and ``python -m langgraph_loop``."""
    args = parser().parse_args(argv)
    console = Console(stderr=bool(getattr(args, "json", False)))  # --json: stdout is the JSON
    handler = {"demo": commands.demo, "run": commands.run, "show": commands.show,
               "graph": commands.graph}[args.command]
    try:
        return handler(args, console)
    except commands.UsageError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        if exc.hint:
            console.print(f"hint: {exc.hint}", style="dim", markup=False, highlight=False,
                          soft_wrap=True)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

