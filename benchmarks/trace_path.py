"""The library code one tool round runs through: files, functions, calls and call depth, counted.

One ``invoke`` of ``create_loop_agent(model, [echo])`` (the defaults, one tool): the scripted model
asks for ``echo`` once, then answers. ``--peer`` runs the same with ``create_agent(model, [echo],
middleware=[ModelCallLimitMiddleware(run_limit=25), ToolCallLimitMiddleware(run_limit=100)])``,
where the "library" is ``langchain/agents/``.

How it counts: two identical runs, each on a graph built before it; the second is traced with
``sys.setprofile`` and ``threading.setprofile`` (the first, untraced, pays one-time imports and
caches). Library code is a Python frame whose file is in the library (``langgraph_loop``'s
``graph/`` and ``nodes/``, or ``langchain/agents/``); the scripted model (``scripted.py``) and the
tool are not. Comprehensions, generator expressions, lambdas and module bodies are left out.

* files, functions: the distinct files and ``file:qualname`` of the library functions called;
* calls: every ``call`` event of such a function (a generator's resumption is one too);
* depth: for every such call, the number of library frames on its thread's stack, itself included
  (walking ``frame.f_back``, counting the frames in the library that are not left out); the
  deepest is reported, with its chain under ``--list``.

Example:
    >>> calls, chain = traced_path()
    >>> 0 < len({f.split(":")[0] for f in calls}) <= len(calls) <= calls.total() and len(chain) > 1
    True
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

import langgraph_loop
from langgraph_loop import create_loop_agent
from langgraph_loop.scripted import ScriptedChatModel

ROOT = Path(langgraph_loop.__file__).resolve().parent
REPO = ROOT.parent if ROOT.name == "graph" else ROOT
LEFT_OUT = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>"}


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _ours(path: Path) -> str | None:
    """``langgraph_loop``'s file as ``graph/x.py`` or ``nodes/x.py``, or None (also for scripted.py)."""
    if path.name == "scripted.py":
        return None
    for root, prefix in ((ROOT / "nodes", "nodes"), (ROOT, "graph"), (REPO / "nodes", "nodes")):
        if path.is_relative_to(root):
            return f"{prefix}/{path.relative_to(root)}"
    return None


def _peer(path: Path) -> str | None:
    """``langchain/agents/``'s file as ``langchain/agents/x.py``, or None."""
    hits = [i for i in range(len(path.parts) - 1) if path.parts[i:i + 2] == ("langchain", "agents")]
    return "/".join(path.parts[hits[-1]:]) if hits else None


def _agent(peer: bool) -> Any:
    model = ScriptedChatModel(script=[[("echo", {"text": "hi"})], "done"])
    if not peer:
        return create_loop_agent(model, [echo])
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware, ToolCallLimitMiddleware

    return create_agent(model, [echo], middleware=[ModelCallLimitMiddleware(run_limit=25),
                                                   ToolCallLimitMiddleware(run_limit=100)])


def traced_path(peer: bool = False) -> tuple[Counter[str], list[str]]:
    """Calls per library function (``file:qualname``) and the deepest chain, on the second of two
    identical runs (see the module docstring)."""
    library, names = _peer if peer else _ours, {}
    request = {"messages": [HumanMessage("say hi")]}
    _agent(peer).invoke(request)  # warm-up: imports, caches
    agent, calls, deepest = _agent(peer), Counter[str](), []

    def name(frame: FrameType) -> str | None:
        code = frame.f_code
        if code.co_name in LEFT_OUT:
            return None
        if code.co_filename not in names:
            names[code.co_filename] = library(Path(code.co_filename).resolve())
        file = names[code.co_filename]
        return None if file is None else f"{file}:{code.co_qualname}"

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or (called := name(frame)) is None:
            return
        calls[called] += 1
        chain, current = [], frame
        while current is not None:
            if (found := name(current)) is not None:
                chain.append(found)
            current = current.f_back  # type: ignore[assignment]
        if len(chain) > len(deepest):
            deepest[:] = chain[::-1]

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        agent.invoke(request)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return calls, deepest


def main(argv: list[str] | None = None) -> None:
    """Print the counts (and every function with its calls, and the deepest chain, with ``--list``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="store_true", help="create_agent with the two limit middlewares")
    parser.add_argument("--list", action="store_true", help="print every function and the deepest chain")
    args = parser.parse_args(argv)
    calls, chain = traced_path(args.peer)
    what = "create_agent + 2 limit middlewares (langchain/agents/)" if args.peer else "langgraph-loop"
    print(f"one tool round, {what}: {len({f.split(':')[0] for f in calls})} files, {len(calls)} functions,"
          f" {calls.total()} calls, deepest library chain {len(chain)}")
    if args.list:
        print(*(f"  {n:3d} {f}" for f, n in sorted(calls.items())), sep="\n")
        print("deepest chain:", *(f"  {f}" for f in chain), sep="\n")


if __name__ == "__main__":
    main()
