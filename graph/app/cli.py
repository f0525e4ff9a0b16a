"""The ``langgraph-loop`` command: ``demo``, ``run``, ``show``, ``graph``.

Example:
    >>> parser().parse_args(["run", "hello", "--thread", "t1", "--max-tool-calls", "5"]).max_tool_calls
    5
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape

from langgraph_loop import __version__
from langgraph_loop.app import commands
from langgraph_loop.app.env import DEFAULT_DB

__all__ = ["DEFAULT_DB", "main", "parser"]


def _count(what: str) -> Callable[[str], int]:
    """An argument type: a whole number of ``what``, 1 or more."""
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number < 1:
            raise argparse.ArgumentTypeError(f"expected a number of {what}, 1 or more, got {value!r}")
        return number
    return parse


def _above_zero(below: float, expected: str) -> Callable[[str], float]:
    """An argument type: a number more than 0 and less than ``below``; ``expected`` says what."""
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = 0.0
        if not 0 < number < below:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
        return number
    return parse


_seconds = _above_zero(math.inf, "a number of seconds, more than 0")
"""``--timeout``: seconds, more than 0."""
_fraction = _above_zero(1, "a fraction of the token budget between 0 and 1 (e.g. 0.8)")
"""``--budget-pressure``: a fraction of the token budget, between 0 and 1."""


def _context(value: str) -> dict[str, Any]:
    """``--context``: a JSON object of per-run overrides."""
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of per-run overrides such as "
                                         f"'{{\"limits\": {{\"max_tool_calls\": 5}}}}', got {value!r}")
    return parsed


class _BadArguments(Exception):
    """A usage error argparse found, raised so that ``main`` can also say it as JSON."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _BadArguments(self, message)


def parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = _Parser(prog="langgraph-loop", description="An agent loop as a LangGraph graph.")
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
    run.add_argument("--max-iterations", type=_count("iterations"), default=None, metavar="N",
                     help=f"iterations per run with --judge (default {commands.RUN_MAX_ITERATIONS}); "
                          "a run capped by it ends with stop_reason=max_iterations")
    limit = run.add_argument_group("limits (each stop has its exit code)")
    limit.add_argument("--max-model-calls", type=_count("model calls"), metavar="N",
                       help="model calls per iteration (default 25): max_model_calls")
    limit.add_argument("--max-tool-calls", type=_count("tool calls"), metavar="N",
                       help="tool executions per run: max_tool_calls")
    limit.add_argument("--token-budget", type=_count("tokens"), metavar="N",
                       help="agent tokens per run, the final answer included: token_budget")
    limit.add_argument("--budget-pressure", type=_fraction, metavar="F",
                       help="with --token-budget: at this fraction of it the model is told to "
                            "finish, and the run ends after that iteration: budget_pressure")
    limit.add_argument("--max-tool-errors", type=_count("failed tool rounds"), metavar="N",
                       help="tool rounds in a row where every call failed: tool_errors")
    limit.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                       help="wall-clock seconds per run, checked between steps: timeout")
    limit.add_argument("--stall", type=_count("iterations"), metavar="N",
                       help="with --judge: N iterations in a row that repeat themselves without "
                            "new work stop the run (2 or more): stalled")
    limit.add_argument("--stop-file", type=Path, metavar="PATH",
                       help="with --judge: when PATH exists at the end of an iteration, the run "
                            "stops there: terminated")
    limit.add_argument("--recursion-limit", type=_count("graph steps"), metavar="N",
                       help="graph steps per run; the run stops cleanly before it: step_limit")
    limit.add_argument("--context", type=_context, metavar="JSON",
                       help="per-run overrides as a deployed graph takes them (README, \"Per-run "
                            "overrides\"), e.g. '{\"iterations\": {\"max_model_calls\": 5}}'")
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


def _json_error(error: str, hint: str | None, thread: str | None) -> None:
    """``--json``: a usage error as the one JSON object on stdout (exit 2, no stop reason)."""
    result = {"thread": thread, "stop_reason": None, "exit_code": 2, "error": error, "hint": hint}
    sys.stdout.write(json.dumps(result) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script and ``python -m langgraph_loop``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argv)
    except _BadArguments as exc:
        if "--json" in argv:
            _json_error(f"{exc.parser.prog}: {exc}", exc.parser.format_usage().strip(), None)
        argparse.ArgumentParser.error(exc.parser, str(exc))  # the usage and the error, exit 2
    args.argv = argv
    as_json = bool(getattr(args, "json", False))
    console = Console(stderr=as_json)  # --json: stdout is the JSON
    handler = {"demo": commands.demo, "run": commands.run, "show": commands.show,
               "graph": commands.graph}[args.command]
    try:
        return handler(args, console)
    except commands.UsageError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        if exc.hint:
            console.print(f"hint: {exc.hint}", style="dim", markup=False, highlight=False,
                          soft_wrap=True)
        if as_json:
            _json_error(str(exc), exc.hint, getattr(args, "thread", None))
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

