"""What a round no longer does, checked as a user would see it.

- A run nobody streams ``"custom"`` events from builds none (LangGraph hands every step a
  writer whose body is ``pass``); one that streams them gets each event, as JSON, its own copy.
- ``digest`` (call signatures, result hashes, finding keys kept in checkpoints) is the same
  in every process: BLAKE2b up to 4 KB of UTF-8, SHA-1 above, pinned here.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from langgraph_loop import create_loop_agent
from langgraph_loop.core import state as core_state
from langgraph_loop.core.messages import digest
from langgraph_loop.scripted import ScriptedChatModel


@tool
def lookup(key: str, tags: list[str]) -> str:
    """Look a key up."""
    tags.append("mutated by the tool")  # its own copy: the transcript keeps the model's args
    return f"value of {key}"


def _script() -> list[Any]:
    return [AIMessage("", tool_calls=[{"name": "lookup", "args": {"key": f"k{i}", "tags": ["a"]},
                                       "id": f"c{i}"}]) for i in range(3)] + ["done"]


def test_events_are_built_only_for_a_listener(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    copy = core_state._json_copy
    monkeypatch.setattr(core_state, "_json_copy", lambda value: built.append(value) or copy(value))
    agent = create_loop_agent(ScriptedChatModel(script=_script()), [lookup])

    result = agent.invoke({"messages": [("user", "look up three keys")]})
    assert result["stop_reason"] == "completed" and len(result["messages"]) == 8
    assert built == []  # invoke: nobody streams "custom", nothing was built

    agent = create_loop_agent(ScriptedChatModel(script=_script()), [lookup])
    events = [chunk for mode, chunk in agent.stream({"messages": [("user", "look up three keys")]},
                                                    stream_mode=["custom", "values"])
              if mode == "custom"]
    calls = [e for e in events if e["event"] == "tool_call"]
    assert [(e["name"], e["args"], e["status"]) for e in calls] == [
        ("lookup", {"key": f"k{i}", "tags": ["a"]}, "success") for i in range(3)]
    assert [e["event"] for e in events] == ["iteration_start", "tool_call", "tool_call",
                                            "tool_call", "iteration_end", "stop"]
    calls[0]["args"]["tags"].append("changed by a listener")  # a listener's own copy
    assert calls[1]["args"] == {"key": "k1", "tags": ["a"]}
    assert len(built) == len(events)


def test_digest_is_pinned_and_the_same_in_every_process() -> None:
    short, long = "search({\"q\":\"x\"})", "line of a build log\n" * 400
    assert len(long.encode()) > 4096 >= len(short.encode())
    assert digest(short, 40) == hashlib.blake2b(short.encode(), digest_size=20).hexdigest()
    assert digest(long, 40) == hashlib.sha1(long.encode()).hexdigest()
    assert digest("caf\udce9") == hashlib.blake2b(b"caf\xed\xb3\xa9", digest_size=20).hexdigest()[:16]
    code = ("from langgraph_loop.core.messages import digest; "
            f"print(digest({short!r}, 8), digest({long!r}, 8))")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout.split()
        assert out == [digest(short, 8), digest(long, 8)]
