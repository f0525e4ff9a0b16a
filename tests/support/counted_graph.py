"""A loop agent whose tools count their executions, for the Aegra scale-out tests.

The tests serve it next to ``langgraph.json``'s graph (Aegra loads it by file path), so
it imports only installed packages. Every execution of a tool appends a JSON line
``{"event": "start"|"end", "label", "server"}`` to ``$COUNTED_TOOLS_DIR/tools.jsonl``
(``server`` is ``$TEST_SERVER_LABEL``, the process that ran it):

- ``step(label, gated=False)`` works for a moment; a gated step waits until the file
  ``$COUNTED_TOOLS_DIR/gate`` exists, so a test can hold runs in flight;
- ``notify(label)`` needs a human's approval.

The model is ``ChatOpenAI`` against ``$OPENAI_BASE_URL`` (the tests' loopback server,
``python -m tests.support.counting_model``); it sends the process's label as the request's ``user``
field so the model server can log which process called it.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from langgraph_loop import Approval, create_loop_agent

GATE_TIMEOUT_S = 300.0


def _dir() -> Path:
    return Path(os.environ.get("COUNTED_TOOLS_DIR") or tempfile.gettempdir())


def _server() -> str:
    return os.environ.get("TEST_SERVER_LABEL", "?")


def _log(event: str, label: str) -> None:
    line = json.dumps({"event": event, "label": label, "server": _server(), "t": time.time()})
    with (_dir() / "tools.jsonl").open("a") as out:
        out.write(line + "\n")


async def _wait_for_gate() -> None:
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not (_dir() / "gate").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


@tool
async def step(label: str, gated: bool = False) -> str:
    """Do one step of work (takes a moment)."""
    _log("start", label)
    if gated:
        await _wait_for_gate()
    else:
        await asyncio.sleep(0.05)
    _log("end", label)
    return f"{label} done"


@tool
async def notify(label: str) -> str:
    """Notify the team (needs a human's approval)."""
    _log("start", label)
    _log("end", label)
    return f"{label} sent"


def make_graph() -> Any:
    """The counted agent: ``step`` and ``notify`` (gated), no checkpointer."""
    model = ChatOpenAI(model="m", base_url=os.environ.get("OPENAI_BASE_URL"),
                       api_key=os.environ.get("OPENAI_API_KEY", "test"),  # type: ignore[arg-type]
                       max_retries=0, model_kwargs={"user": _server()})
    return create_loop_agent(model, [step, notify], approval=Approval(tools=["notify"]),
                             name="counted")


graph = make_graph()
