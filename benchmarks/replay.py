"""Replay recorded OpenAI-format tool-calling conversations through a compiled loop graph.

A recorded conversation is split into *runs*: one per user message, holding the assistant
replies (and their tool results) up to the next user message. Replaying a run invokes the
graph once on the conversation's thread with that user message; a scripted model returns the
run's recorded assistant messages in order (it never reads loop warnings: the worst case), and
one tool per recorded tool name returns the recorded result of each call id. A recorded result
that starts with ``Error`` (or, in the coding format, is flagged ``error``) comes back as
``ToolMessage(status="error")``, as it would from a
LangChain tool that raised. A stop ends the run early: the rest of its recorded replies are
skipped, and the next run starts with the next user message.

Example:
    >>> traj = [{"role": "user", "content": "hi"},
    ...         {"role": "assistant", "content": None, "tool_calls": [{"id": "c1",
    ...          "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
    ...         {"role": "tool", "tool_call_id": "c1", "name": "look", "content": "ok"},
    ...         {"role": "assistant", "content": "done"}]
    >>> [(r.user, len(r.replies), r.results) for r in split_runs(traj)]
    [('hi', 2, {(0, 0): 'ok'})]
    >>> replay_conversation(split_runs(traj), loop_detection=None)[0].executed
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
from langgraph_loop.core.messages import is_blocked, is_notice
from langgraph_loop.scripted import ScriptedChatModel

__all__ = [
    "Conversation",
    "RecordedRun",
    "Replayer",
    "RunResult",
    "canonical_call",
    "coding_run",
    "load_conversations",
    "replay_conversation",
    "split_runs",
    "tool_names",
]

END_OF_RECORDING = "(end of the recorded run)"
FINAL_ANSWER = "(final answer without tools)"


@dataclass
class RecordedRun:
    """One user message and the agent's recorded replies until the next user message."""

    user: str
    replies: list[AIMessage] = field(default_factory=list)
    results: dict[tuple[int, int], str] = field(default_factory=dict)
    """Recorded result by (reply index, position of the call in the reply)."""
    errors: frozenset[tuple[int, int]] | None = None
    """The results recorded as errors, by the same key; ``None``: a result is an error when
    its text starts with ``Error`` (τ-bench's tools return such strings)."""

    def calls(self, start: int = 0) -> list[tuple[int, ToolCall]]:
        """``(reply index, tool call)`` of every recorded call from reply ``start`` on."""
        return [(i, c) for i, ai in enumerate(self.replies) if i >= start for c in ai.tool_calls]

    def result(self, reply: int, call_id: str) -> str:
        """The recorded result of the call ``call_id`` of reply ``reply``."""
        ids = [str(c["id"]) for c in self.replies[reply].tool_calls]
        return self.results.get((reply, ids.index(call_id) if call_id in ids else 0), "")

    def failed(self, reply: int, call_id: str) -> bool:
        """Was the result of the call ``call_id`` of reply ``reply`` recorded as an error?"""
        if self.errors is None:
            return self.result(reply, call_id).startswith("Error")
        ids = [str(c["id"]) for c in self.replies[reply].tool_calls]
        return (reply, ids.index(call_id) if call_id in ids else 0) in self.errors


@dataclass
class Conversation:
    """One recorded conversation: its runs, whether it solved its task, and where it came from."""

    label: str
    solved: bool
    runs: list[RecordedRun]


@dataclass
class RunResult:
    """What happened when one run was replayed."""

    served: int
    executed: int
    stop_reason: str | None
    layer: str | None = None
    first_warning: int | None = None
    blocked: tuple[tuple[int, int], ...] = ()
    """(reply index, position) of every call a system refused to run without stopping the
    run (a block: answered with an error result, the run goes on)."""
    notices: tuple[tuple[int, str], ...] = ()
    """(reply index, text) of every loop notice the model received after that reply."""


def canonical_call(call: Mapping[str, Any]) -> str:
    """``name(canonical JSON arguments)``: the identity of a call for counting repeats.

    Example:
        >>> canonical_call({"name": "f", "args": {"b": 1, "a": 2}})
        'f({"a": 2, "b": 1})'
    """
    return f"{call['name']}({json.dumps(call['args'], sort_keys=True)})"


def split_runs(trajectory: Iterable[dict[str, Any]]) -> list[RecordedRun]:
    """Split OpenAI-format messages into runs (system messages are dropped).

    Results are matched to calls by position: recorded call ids are not unique (gpt-4o
    reuses ids within a conversation).
    """
    runs: list[RecordedRun] = []
    pending: list[tuple[int, int, str]] = []
    for raw in trajectory:
        role = raw.get("role")
        if role == "user":
            runs.append(RecordedRun(user=str(raw.get("content") or "")))
        elif runs and role == "assistant":
            (message,) = convert_to_messages([raw])
            assert isinstance(message, AIMessage)
            reply = len(runs[-1].replies)
            runs[-1].replies.append(message)
            pending = [(reply, i, str(c["id"])) for i, c in enumerate(message.tool_calls)]
        elif runs and role == "tool" and pending:
            match = next((p for p in pending if p[2] == raw.get("tool_call_id")), pending[0])
            pending.remove(match)
            runs[-1].results[(match[0], match[1])] = str(raw.get("content") or "")
    return runs


MALFORMED = "malformed"
"""The argument key of a recorded call whose arguments are not an object (mini-swe-agent's
reply with zero or several bash blocks): ``{"malformed": <the recorded text>}``."""


def coding_run(messages: Iterable[dict[str, Any]]) -> RecordedRun:
    """One run of the normalized coding format (``role``, ``content``, ``tool_calls`` of
    ``{"id", "name", "arguments"}``, ``tool_call_id``, ``error``): the replies after the first
    user message, their results matched by call id, errors from the ``error`` flag only.

    Example:
        >>> run = coding_run([{"role": "user", "content": "fix it"},
        ...     {"role": "assistant", "content": "look", "tool_calls": [
        ...         {"id": "a", "name": "bash", "arguments": {"command": "ls"}}]},
        ...     {"role": "tool", "tool_call_id": "a", "content": "x.py", "error": False},
        ...     {"role": "assistant", "content": "two", "tool_calls": [
        ...         {"id": "b", "name": "bash", "arguments": '["ls", "pwd"]'}]},
        ...     {"role": "tool", "tool_call_id": "b", "content": "one action!", "error": True}])
        >>> run.replies[1].tool_calls[0]["args"], run.results, sorted(run.errors or ())
        ({'malformed': '["ls", "pwd"]'}, {(0, 0): 'x.py', (1, 0): 'one action!'}, [(1, 0)])
    """
    run = RecordedRun(user="")
    where: dict[str, tuple[int, int]] = {}
    errors: set[tuple[int, int]] = set()
    started = False
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
            if raw.get("error"):
                errors.add(key)
    run.errors = frozenset(errors)
    return run


def load_conversations(path: Path, limit: int | None = None) -> list[Conversation]:
    """Read a gzipped trajectory file in either format (the label tells them apart).

    τ-bench: a list of ``task_id``, ``trial``, ``reward``, ``traj`` (OpenAI-format messages,
    one run per user message). Coding: ``{"source", "simulations": [...]}``, each simulation
    one run (``id``, ``reward``, ``messages``; see ``coding_run``).
    """
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        items = json.load(handle)
    if isinstance(items, dict):
        out = [Conversation(label=str(sim["id"]), solved=float(sim["reward"]) >= 1.0,
                            runs=[coding_run(sim["messages"])])
               for sim in items["simulations"]]
    else:
        out = [Conversation(label=f"task {it['task_id']} trial {it['trial']}",
                            solved=float(it["reward"]) >= 1.0, runs=split_runs(it["traj"]))
               for it in items]
    return out[:limit] if limit is not None else out


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")
    tool_call_id: Annotated[str, InjectedToolCallId]


class _Recording:
    """The run being replayed: its replies (served in order) and results (by call id)."""

    def __init__(self) -> None:
        self.run = RecordedRun(user="")
        self.served = 0
        self.executed = 0

    def begin(self, run: RecordedRun) -> None:
        self.run, self.served, self.executed = run, 0, 0

    def next_reply(self, _messages: Sequence[BaseMessage]) -> AIMessage:
        if self.served >= len(self.run.replies):
            return AIMessage(END_OF_RECORDING)
        reply = self.run.replies[self.served]
        self.served += 1
        return reply


class ReplayTool(BaseTool):
    """Returns the recorded result of each call id (``status="error"`` for recorded errors)."""

    description: str = "Replays recorded results."
    args_schema: type[BaseModel] = _AnyArgs
    recording: Any = None

    def _run(self, tool_call_id: str, **_kwargs: Any) -> ToolMessage:
        self.recording.executed += 1
        reply = self.recording.served - 1
        text = self.recording.run.result(reply, tool_call_id)
        failed = self.recording.run.failed(reply, tool_call_id)
        return ToolMessage(text, tool_call_id=tool_call_id, name=self.name,
                           status="error" if failed else "success")


def _blocked(messages: Sequence[BaseMessage]) -> tuple[tuple[int, int], ...]:
    """(reply index, position) of every call the loop detector blocked (answered, not run)."""
    out: list[tuple[int, int]] = []
    reply, ids = -1, []
    for message in messages:
        if isinstance(message, AIMessage):
            reply, ids = reply + 1, [str(c["id"]) for c in message.tool_calls]
        elif isinstance(message, ToolMessage) and is_blocked(message) and message.tool_call_id in ids:
            out.append((reply, ids.index(message.tool_call_id)))
    return tuple(out)


def _notices(messages: Sequence[BaseMessage]) -> tuple[tuple[int, str], ...]:
    """(reply index, text) of every loop notice in a run's messages."""
    out, replies = [], 0
    for message in messages:
        if isinstance(message, AIMessage):
            replies += 1
        elif is_notice(message):
            out.append((replies - 1, str(message.content)))
    return tuple(out)


def _warned_at(messages: Sequence[BaseMessage]) -> int | None:
    """The reply index whose warning the model saw first (``None``: no warning)."""
    notices = _notices(messages)
    return notices[0][0] if notices else None


class Replayer:
    """One compiled graph that replays conversations, each on a thread of its own.

    ``tools``: the tool names the conversations use. ``read_only_hints``: tools whose
    metadata carries MCP's ``readOnlyHint``, the way langchain-mcp-adapters exposes it.
    """

    def __init__(self, tools: Iterable[str], *, loop_detection: LoopDetection | None,
                 read_only_hints: frozenset[str] = frozenset(),
                 limits: Limits | None = None) -> None:
        """Build the graph once (limits out of the way unless given, an in-memory
        checkpointer)."""
        self.recording = _Recording()
        model = ScriptedChatModel(default=self.recording.next_reply, no_tools_reply=FINAL_ANSWER)
        replay_tools = [ReplayTool(name=n, recording=self.recording,
                                   metadata={"readOnlyHint": True} if n in read_only_hints else None)
                        for n in sorted(set(tools))]
        self.saver = InMemorySaver()
        self.graph = create_loop_agent(model, replay_tools, loop_detection=loop_detection,
                                       max_iterations=None,
                                       limits=limits or Limits(max_model_calls=None),
                                       checkpointer=self.saver)
        self.threads = itertools.count()

    def replay(self, runs: Sequence[RecordedRun]) -> list[RunResult]:
        """Replay every run of one conversation on a new thread (deleted afterwards)."""
        thread = f"replay-{next(self.threads)}"
        config: Any = {"configurable": {"thread_id": thread}}
        out, seen = [], 0
        for run in runs:
            self.recording.begin(run)
            state = self.graph.invoke({"messages": [HumanMessage(run.user)]}, config,
                                      durability="exit")
            messages = state["messages"]
            guard = (state.get("iterations") or [{}])[-1].get("guard") or {}
            reason = state.get("stop_reason")
            out.append(RunResult(
                served=self.recording.served, executed=self.recording.executed,
                stop_reason=None if reason is None else str(getattr(reason, "value", reason)),
                layer=guard.get("layer"), first_warning=_warned_at(messages[seen:]),
                blocked=_blocked(messages[seen:]), notices=_notices(messages[seen:])))
            seen = len(messages)
        self.saver.delete_thread(thread)
        return out


def tool_names(conversations: Iterable[Sequence[RecordedRun]]) -> set[str]:
    """Every tool name called in the conversations."""
    return {c["name"] for runs in conversations for run in runs for _, c in run.calls()}


def replay_conversation(runs: Sequence[RecordedRun], *,
                        loop_detection: LoopDetection | None) -> list[RunResult]:
    """Replay one conversation on a graph of its own."""
    return Replayer(tool_names([runs]), loop_detection=loop_detection).replay(runs)
