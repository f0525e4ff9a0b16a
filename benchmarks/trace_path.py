"""The library code one tool round runs through: files and functions, counted.

One ``invoke`` of a graph built with the defaults and one tool: the model asks for the
tool once, then answers. Every Python function of ``langgraph_loop`` that runs during the
``invoke`` (not while building the graph) is recorded with ``sys.setprofile``; the
scripted model and the tool (test scaffolding, not the loop) are left out.

Run: ``python -m benchmarks.trace_path`` (``--list`` prints the functions).

Example:
    >>> files, functions = traced_path()
    >>> 0 < len(files) <= len(functions)
    True
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

import langgraph_loop
from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["traced_path"]

ROOT = Path(langgraph_loop.__file__).resolve().parent
SKIP = {"scripted.py"}
_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def traced_path() -> tuple[set[str], set[str]]:
    """(files, functions) of the library that one tool round runs."""
    model = ScriptedChatModel(script=[[("echo", {"text": "hi"})], "done"])
    agent = create_loop_agent(model, [echo])
    seen: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename).resolve()
        # the editable install maps graph/ and nodes/ through a link tree: compare names
        parts = path.parts
        if "langgraph_loop" not in parts and not _inside(path):
            return
        if path.name in SKIP:
            return
        seen.add((_relative(path), frame.f_code.co_qualname))

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        agent.invoke({"messages": [HumanMessage("say hi")]})
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    files = {f for f, _ in seen}
    functions = {f"{f}:{q}" for f, q in seen if not q.endswith(_COMPREHENSIONS)}
    return files, functions


def _inside(path: Path) -> bool:
    repo = ROOT.parent if ROOT.name == "graph" else ROOT
    return str(path).startswith(str(repo / "graph")) or str(path).startswith(str(repo / "nodes"))


def _relative(path: Path) -> str:
    parts = path.parts
    for anchor in ("langgraph_loop", "graph", "nodes"):
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[i:])
    return str(path)


def main(argv: list[str] | None = None) -> None:
    """Print the counts (and the functions with ``--list``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every function")
    args = parser.parse_args(argv)
    files, functions = traced_path()
    print(f"one tool round: {len(files)} files, {len(functions)} functions")
    if args.list:
        for name in sorted(functions):
            print(" ", name)


if __name__ == "__main__":
    main()
