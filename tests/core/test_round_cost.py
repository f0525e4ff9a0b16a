"""What a round's events and hashes are, checked as a user would see them.

- A run that streams ``"custom"`` events gets each event, as JSON, its own copy.
- ``digest`` (call signatures, result hashes, finding keys kept in checkpoints) is the same
  in every process: BLAKE2b up to 4 KB of UTF-8, SHA-1 above, pinned here.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from langgraph_loop import create_loop_agent
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


def test_a_custom_stream_gets_each_event_as_json_its_own_copy() -> None:
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
