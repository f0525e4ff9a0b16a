"""Random loop scenarios for the property suite: a recording world, tools and scripted models.

A ``World`` records, in order, everything the invariants are checked against: tool
executions (by call id), stop decisions seen on the stream, notices queued (custom
events) and delivered (as seen in model requests), the tools offered to each model
call, the replies (with their usage), the compaction summaries (with theirs: the loop counts
them in ``usage``) and the approval decisions sent per call id.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.types import interrupt

from langgraph_loop.core.messages import is_notice
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["CALLS", "GATED", "FuzzModel", "ModelDown", "SummarizerModel", "World", "make_tools",
           "reply_item"]

_IDS = itertools.count()
GATED = ("danger", "wipe")

# The pool every reply draws its calls from: few enough that repeats and cycles happen.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "add": ("add", {"a": 1, "b": 2}),
    "add2": ("add", {"a": 2, "b": 2}),
    "badargs": ("add", {"a": "not a number"}),
    "boom": ("boom", {}),
    "unknown": ("nope", {"x": 1}),
    "big": ("big", {}),
    "danger": ("danger", {"target": "prod"}),
    "wipe": ("wipe", {}),
    "ask": ("ask", {"q": "sure?"}),
}


class ModelDown(RuntimeError):
    """A scripted provider failure."""


@dataclass
class World:
    """What happened during one example (see module docstring)."""

    run: int = 0
    log: list[tuple[Any, ...]] = field(default_factory=list)
    executions: list[tuple[int, str, str]] = field(default_factory=list)  # (run, name, id)
    offered: dict[str, list[str]] = field(default_factory=dict)  # call id -> tools bound
    replies: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    summaries: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    queued: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    delivered: list[tuple[int, str]] = field(default_factory=list)  # (run, notice text)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> decision
    last_calls: list[tuple[str, str]] = field(default_factory=list)  # newest reply: (id, name)
    raised: int = 0
    updates: int = 0  # node updates seen on the stream
    use_async: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def executed(self, name: str, call_id: str) -> None:
        with self.lock:
            self.executions.append((self.run, name, call_id))
            self.log.append(("tool", self.run, call_id))

    def on_reply(self, messages: list[BaseMessage], reply: AIMessage, tools: list[str]) -> None:
        """A successful model call: its usage, the notice it delivered, what it offered."""
        self.replies[self.run].append((reply.usage_metadata or {}).get("total_tokens", 0))
        for m in messages:  # a notice delivered by this call is not stored yet: no id
            if is_notice(m) and m.id is None:
                self.delivered.append((self.run, str(m.content)))
        for call in reply.tool_calls:
            self.offered[str(call["id"])] = list(tools)
        self.last_calls = [(str(c["id"]), c["name"]) for c in reply.tool_calls]


class FuzzModel(ScriptedChatModel):
    """A scripted model that reports requests and successful replies to its world."""

    world: Any = None

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        reply = super()._next(messages, kwargs)
        tools = [t["function"]["name"] for t in kwargs.get("tools") or []]
        self.world.on_reply(messages, reply, tools)
        return reply


class SummarizerModel(ScriptedChatModel):
    """A scripted summarizer that reports its replies' usage to its world."""

    world: Any = None

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        reply = super()._next(messages, kwargs)
        self.world.summaries[self.world.run].append(
            (reply.usage_metadata or {}).get("total_tokens", 0))
        return reply


def make_tools(world: World) -> list[BaseTool]:
    """The example's tools; each records its execution (``ask`` once it has its answer)."""

    @tool
    def add(a: int, b: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> int:
        """Add two integers."""
        world.executed("add", tool_call_id)
        return a + b

    @tool
    def boom(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Always fails."""
        world.executed("boom", tool_call_id)
        raise RuntimeError("kaput")

    @tool
    def big(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """A large output."""
        world.executed("big", tool_call_id)
        return "x" * 3000

    @tool
    def danger(target: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Destroy a target (needs approval when gated)."""
        world.executed("danger", tool_call_id)
        return f"destroyed {target}"

    @tool
    def wipe(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Wipe everything (needs approval when gated)."""
        world.executed("wipe", tool_call_id)
        return "wiped"

    @tool
    def ask(q: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Ask the user (pauses the run)."""
        answer = interrupt({"question": q})
        world.executed("ask", tool_call_id)
        return f"user said {answer}"

    return [add, boom, big, danger, wipe, ask]


def _call(key: str) -> dict[str, Any]:
    name, args = CALLS[key]
    return {"name": name, "args": dict(args), "id": f"f{next(_IDS)}", "type": "tool_call"}


def reply_item(spec: tuple[Any, ...], world: World) -> Any:
    """A script item for a reply spec (fresh call ids on every use)."""
    kind = spec[0]
    if kind == "text":
        return spec[1]

    def item(_messages: list[BaseMessage]) -> AIMessage:
        if kind == "raise":
            world.raised += 1
            raise ModelDown("provider unavailable (scripted)")
        calls = [_call(k) for k in spec[1]] if kind == "calls" else []
        invalid = []
        if kind == "malformed" or spec[2]:
            invalid = [{"name": "add", "args": '{"a": 1,', "id": f"f{next(_IDS)}",
                        "error": "Unterminated JSON", "type": "invalid_tool_call"}]
        return AIMessage("", tool_calls=calls, invalid_tool_calls=invalid)

    return item
