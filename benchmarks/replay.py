"""Replay recorded tool-calling conversations through a compiled loop graph.

A conversation is split into *runs* (one per user message); a run is one ``invoke`` on the
conversation's thread: a scripted model returns the recorded replies in order (it never reads a
warning: the worst case), one tool per recorded name returns each call's recorded result (an error
result: τ-bench text starting with ``Error``, or the coding format's ``error`` flag, comes back as
``status="error"``). A stop ends the run: the rest of its replies are skipped.

Example:
    >>> traj = [{"role": "user", "content": "hi"},
    ...         {"role": "assistant", "content": None, "tool_calls": [{"id": "c1",
    ...          "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
    ...         {"role": "tool", "tool_call_id": "c1", "name": "look", "content": "ok"},
    ...         {"role": "assistant", "content": "done"}]
    >>> [(r.user, len(r.replies), r.results) for r in split_runs(traj)]
    [('hi', 2, {(0, 0): 'ok'})]
    >>> Replayer(["look"], loop_detection=None).replay(split_runs(traj))[0].executed
    1
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool, InjectedToolCallId
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, ConfigDict

from langgraph_loop import Limits, LoopDetection, create_loop_agent
from langgraph_loop.core.messages import is_blocked
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["Conversation", "RecordedRun", "Replayer", "RunResult", "canonical_call", "coding_run",
           "load_conversations", "split_runs"]

END_OF_RECORDING, FINAL_ANSWER = "(end of the recorded run)", "(final answer without tools)"
MALFORMED = "malformed"
"""The argument key of a recorded call whose arguments are not an object (mini-swe-agent's reply
with zero or several bash blocks): ``{"malformed": <the recorded text>}``."""


@dataclass
class RecordedRun:
    """One user message and the recorded replies until the next one; ``results`` and ``errors`` by
    (reply index, position of the call in the reply); ``errors=None``: a result starting with
    ``Error`` is one (τ-bench's tools return such strings)."""

    user: str
    replies: list[AIMessage] = field(default_factory=list)
    results: dict[tuple[int, int], str] = field(default_factory=dict)
    errors: frozenset[tuple[int, int]] | None = None

    def calls(self, start: int = 0, end: int | None = None) -> list[tuple[int, ToolCall]]:
        """``(reply index, tool call)`` of every recorded call of replies ``start`` to ``end`` (excluded)."""
        return [(i, c) for i, ai in enumerate(self.replies[:end]) if i >= start for c in ai.tool_calls]

    def _key(self, reply: int, call_id: str) -> tuple[int, int]:
        ids = [str(c["id"]) for c in self.replies[reply].tool_calls]
        return reply, ids.index(call_id) if call_id in ids else 0

    def result(self, reply: int, call_id: str) -> str:
        """The recorded result of the call ``call_id`` of reply ``reply``."""
        return self.results.get(self._key(reply, call_id), "")

    def failed(self, reply: int, call_id: str) -> bool:
        """Was the result of the call ``call_id`` of reply ``reply`` recorded as an error?"""
        if self.errors is None:
            return self.result(reply, call_id).startswith("Error")
        return self._key(reply, call_id) in self.errors


@dataclass
class Conversation:
    """One recorded conversation: its label, whether it solved its task, its runs."""

    label: str
    solved: bool
    runs: list[RecordedRun]


@dataclass
class RunResult:
    """What happened when one run was replayed: replies served, calls executed, the stop, the
    first warning's reply, the blocked calls (reply, position: refused without stopping the run)
    and the loop notices (reply, text) the model received."""

    served: int
    executed: int
    stop_reason: str | None
    layer: str | None = None
    first_warning: int | None = None
    blocked: tuple[tuple[int, int], ...] = ()
    notices: tuple[tuple[int, str], ...] = ()


def canonical_call(call: Mapping[str, Any]) -> str:
    """``name(canonical JSON arguments)``: the identity of a call for counting repeats.

    Example:
        >>> canonical_call({"name": "f", "args": {"b": 1, "a": 2}})
        'f({"a": 2, "b": 1})'
    """
    return f"{call['name']}({json.dumps(call['args'], sort_keys=True)})"


def split_runs(trajectory: Iterable[dict[str, Any]]) -> list[RecordedRun]:
    """Split OpenAI-format messages into runs (system messages dropped; results matched to calls
    by position: gpt-4o reuses call ids within a conversation)."""
    runs: list[RecordedRun] = []
    pending: list[tuple[int, int, str]] = []
    for raw in trajectory:
        role = raw.get("role")
        if role == "user":
            runs.append(RecordedRun(user=str(raw.get("content") or "")))
        elif runs and role == "assistant":
            (message,) = convert_to_messages([raw])
            assert isinstance(message, AIMessage)
            pending = [(len(runs[-1].replies), i, str(c["id"])) for i, c in enumerate(message.tool_calls)]
            runs[-1].replies.append(message)
        elif runs and role == "tool" and pending:
            match = next((p for p in pending if p[2] == raw.get("tool_call_id")), pending[0])
            pending.remove(match)
            runs[-1].results[(match[0], match[1])] = str(raw.get("content") or "")
    return runs


def coding_run(messages: Iterable[dict[str, Any]]) -> RecordedRun:
    """One run of the coding format (``../shared/data/README.md``): the replies after the first user
    message, results matched by call id, errors from the ``error`` flag only.

    Example:
        >>> run = coding_run([{"role": "user", "content": "fix it"},
        ...     {"role": "assistant", "content": "two", "tool_calls": [
        ...         {"id": "b", "name": "bash", "arguments": '["ls", "pwd"]'}]},
        ...     {"role": "tool", "tool_call_id": "b", "content": "one action!", "error": True}])
        >>> run.replies[0].tool_calls[0]["args"], run.results, run.errors
        ({'malformed': '["ls", "pwd"]'}, {(0, 0): 'one action!'}, frozenset({(0, 0)}))
    """
    run, where, errors, started = RecordedRun(user=""), {}, set(), False
    for raw in messages:
        role = raw.get("role")
        if role == "user" and not started:
            run.user, started = str(raw.get("content") or ""), True
        elif role == "assistant":
            calls = []
            for position, call in enumerate(raw.get("tool_calls") or []):
                args = call.get("arguments")
                calls.append({"name": str(call["name"]), "id": str(call["id"]),
                              "args": args if isinstance(args, dict) else {MALFORMED: str(args)}})
                where[str(call["id"])] = (len(run.replies), position)
            run.replies.append(AIMessage(str(raw.get("content") or ""), tool_calls=calls))
        elif role == "tool" and raw.get("tool_call_id") in where:
            key = where.pop(str(raw["tool_call_id"]))
            run.results[key] = str(raw.get("content") or "")
            errors |= {key} if raw.get("error") else set()
    run.errors = frozenset(errors)
    return run


def load_conversations(path: Path, limit: int | None = None) -> list[Conversation]:
    """Read a gzipped trajectory file: τ-bench's list (``task_id``, ``trial``, ``reward``, ``traj``:
    one run per user message) or the coding format's ``{"source", "simulations"}`` (one run each)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    if isinstance(items, dict):
        out = [Conversation(str(sim["id"]), float(sim["reward"]) >= 1.0, [coding_run(sim["messages"])])
               for sim in items["simulations"]]
    else:
        out = [Conversation(f"task {it['task_id']} trial {it['trial']}", float(it["reward"]) >= 1.0,
                            split_runs(it["traj"])) for it in items]
    return out[:limit] if limit is not None else out


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


class _Recording:
    """The run being replayed: its replies (served in order) and results (by call id)."""

    def __init__(self) -> None:
        self.begin(RecordedRun(user=""))

    def begin(self, run: RecordedRun) -> None:
        self.run, self.served, self.executed = run, 0, 0

    def next_reply(self, _messages: Sequence[BaseMessage]) -> AIMessage:
        if self.served >= len(self.run.replies):
            return AIMessage(END_OF_RECORDING)
        self.served += 1
        return self.run.replies[self.served - 1]


class ReplayTool(BaseTool):
    """Returns the recorded result of each call id (``status="error"`` for recorded errors)."""

    description: str = "Replays recorded results."
    args_schema: type[BaseModel] = _AnyArgs
    recording: Any = None

    def _run(self, tool_call_id: str, **_kwargs: Any) -> ToolMessage:
        rec, reply = self.recording, self.recording.served - 1
        rec.executed += 1
        return ToolMessage(rec.run.result(reply, tool_call_id), tool_call_id=tool_call_id, name=self.name,
                           status="error" if rec.run.failed(reply, tool_call_id) else "success")


def _seen(messages: Sequence[BaseMessage]) -> tuple[tuple[tuple[int, int], ...],
                                                    tuple[tuple[int, str], ...]]:
    """(reply index, position) of every call the loop detector blocked (answered, not run), and
    (reply index, text) of every loop notice, in a run's messages."""
    blocked, notices, reply, ids = [], [], -1, []
    for message in messages:
        if isinstance(message, AIMessage):
            reply, ids = reply + 1, [str(c["id"]) for c in message.tool_calls]
        elif isinstance(message, ToolMessage) and is_blocked(message) and message.tool_call_id in ids:
            blocked.append((reply, ids.index(message.tool_call_id)))
        elif isinstance(message, HumanMessage) and message.name == "loop_warning":
            notices.append((reply, str(message.content)))
    return tuple(blocked), tuple(notices)


class Replayer:
    """One compiled graph (limits out of the way unless given, an in-memory checkpointer) that
    replays conversations, each on a thread of its own. ``tools``: the tool names used;
    ``read_only_hints``: tools whose metadata carries MCP's ``readOnlyHint``, as
    langchain-mcp-adapters exposes it."""

    def __init__(self, tools: Iterable[str], *, loop_detection: LoopDetection | None,
                 read_only_hints: frozenset[str] = frozenset(), limits: Limits | None = None) -> None:
        self.recording = _Recording()
        model = ScriptedChatModel(default=self.recording.next_reply, no_tools_reply=FINAL_ANSWER)
        replay_tools = [ReplayTool(name=n, recording=self.recording,
                                   metadata={"readOnlyHint": True} if n in read_only_hints else None)
                        for n in sorted(set(tools))]
        self.saver = InMemorySaver()
        self.graph = create_loop_agent(model, replay_tools, loop_detection=loop_detection,
                                       max_iterations=None, limits=limits or Limits(max_model_calls=None),
                                       checkpointer=self.saver)
        self.threads = itertools.count()

    def replay(self, runs: Sequence[RecordedRun]) -> list[RunResult]:
        """Replay every run of one conversation on a new thread (deleted afterwards)."""
        thread = f"replay-{next(self.threads)}"
        config: Any = {"configurable": {"thread_id": thread}}
        out, seen = [], 0
        for run in runs:
            self.recording.begin(run)
            state = self.graph.invoke({"messages": [HumanMessage(run.user)]}, config, durability="exit")
            guard = (state.get("iterations") or [{}])[-1].get("guard") or {}
            reason = state.get("stop_reason")
            blocked, notices = _seen(state["messages"][seen:])
            out.append(RunResult(self.recording.served, self.recording.executed,
                                 None if reason is None else str(getattr(reason, "value", reason)),
                                 guard.get("layer"), notices[0][0] if notices else None, blocked, notices))
            seen = len(state["messages"])
        self.saver.delete_thread(thread)
        return out
