"""Loop detection on real model trajectories (``--data``: τ-bench's or ``../shared/data/``'s coding
format), replayed through the compiled graph (``--middleware``: also ``create_agent`` with
``LoopDetectionMiddleware``): a scripted model returns the recorded replies in order (it never
reads a warning: the worst case), one tool per recorded name returns each call's recorded result,
a stop ends the run (``benchmarks/rivals.py``: our layers one by one and the rules users pick
instead, in one command). ``--text``: the text rule
on every recorded reply and ``tests/data/markdown_answers.json``. Definitions: benchmarks/README.md.

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

import argparse
import copy
import gzip
import hashlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool, InjectedToolCallId
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, ConfigDict

from benchmarks.systems import DeerFlowGuard
from langgraph_loop import Iterations, Limits, LoopDetection, NoProgress, create_loop_agent
from langgraph_loop.core.messages import BLOCKED_KIND, is_blocked, is_notice
from langgraph_loop.engine.detection import observe
from langgraph_loop.engine.text_loop import StreamText
from langgraph_loop.middleware import LoopDetectionMiddleware
from langgraph_loop.scripted import ScriptedChatModel

END_OF_RECORDING, FINAL_ANSWER = "(end of the recorded run)", "(final answer without tools)"
MALFORMED = "malformed"  # the args of a call that are not an object: mini-swe-agent's 0 or 2+ bash blocks


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
    spares_request: bool = False
    """The stop comes before the model is called for the stop's reply (its prompt is spared)."""


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
                args = _arguments(call.get("arguments"))
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


def _arguments(raw: Any) -> Any:
    """Recorded arguments as the model's tool call carries them: a JSON object given as a string
    is parsed (Toolathlon records them so); anything else is kept."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


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


class ReplayTool(BaseTool):
    """Returns the recorded result of each call id (``status="error"`` for recorded errors)."""

    description: str = "Replays recorded results."
    args_schema: type[BaseModel] = _AnyArgs
    replayer: Any = None

    def _run(self, tool_call_id: str, **_kwargs: Any) -> ToolMessage:
        rec, reply = self.replayer, self.replayer.served - 1
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
        elif is_notice(message):
            notices.append((reply, str(message.content)))
    return tuple(blocked), tuple(notices)


class Replayer:
    """One compiled graph (limits out of the way unless given, an in-memory checkpointer) that
    replays conversations, each on a thread of its own, serving the run being replayed. ``tools``:
    the tool names used; ``middleware``: ``create_agent`` with ``LoopDetectionMiddleware`` instead."""

    def __init__(self, tools: Iterable[str], *, loop_detection: LoopDetection | None,
                 limits: Limits | None = None, middleware: bool = False) -> None:
        self.run, self.served, self.executed = RecordedRun(user=""), 0, 0
        model = ScriptedChatModel(default=self._next_reply, no_tools_reply=FINAL_ANSWER)
        replay_tools = [ReplayTool(name=n, replayer=self) for n in sorted(set(tools))]
        self.saver = InMemorySaver()
        self.graph = (create_agent(model, replay_tools, checkpointer=self.saver,
                                   middleware=[LoopDetectionMiddleware(loop_detection)]) if middleware
                      else create_loop_agent(model, replay_tools, loop_detection=loop_detection,
                                             iterations=Iterations(max=None, max_model_calls=None),
                                             limits=limits, checkpointer=self.saver))
        self.threads = itertools.count()

    def _next_reply(self, _messages: Sequence[BaseMessage]) -> AIMessage:
        if self.served >= len(self.run.replies):
            return AIMessage(END_OF_RECORDING)
        self.served += 1
        return self.run.replies[self.served - 1]

    def replay(self, runs: Sequence[RecordedRun]) -> list[RunResult]:
        """Replay every run of one conversation on a new thread (deleted afterwards)."""
        thread = f"replay-{next(self.threads)}"
        config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 100_000}
        out, seen = [], 0
        for run in runs:
            self.run, self.served, self.executed = run, 0, 0
            state = self.graph.invoke({"messages": [HumanMessage(run.user)]}, config, durability="exit")
            guard = state.get("stop_guard") or (state.get("iterations") or [{}])[-1].get("guard") or {}
            reason = state.get("stop_reason")
            blocked, notices = _seen(state["messages"][seen:])
            out.append(RunResult(self.served, self.executed,
                                 None if reason is None else str(getattr(reason, "value", reason)),
                                 guard.get("layer"), notices[0][0] if notices else None, blocked, notices))
            seen = len(state["messages"])
        self.saver.delete_thread(thread)
        return out


VENDORED = Path(__file__).parent / "data"
DATA = VENDORED / "taubench_gpt-4o_airline.json.gz"
RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "markdown_answers.json"
LOOPS = {("minisweagent_gemini-3-pro_swebench-verified_dev", "sympy__sympy-15976", 0, 34)}
"""(source, conversation, run, reply) of the recorded replies that loop, read by hand (every reply
the text rule fired on before or after issue 31): gemini-3-pro spelling ``msubsup`` for 159 KB."""
VARIANTS = {"langgraph-loop, block=()": LoopDetection(no_progress=NoProgress(block=False)),
            "langgraph-loop, block always": LoopDetection(
                no_progress=NoProgress(block_only_interleaved=False)),
            "langgraph-loop, no path excuse": LoopDetection(no_progress=NoProgress(path_excuse=False))}
REPEATS, SAME_RESULTS, STUCK = 5, 3, 4
ReplayFn = Callable[[Conversation], list[RunResult]]


@dataclass(frozen=True)
class Loop:
    """A loop: conversation, run, call, the deadline reply index, why, and its kind."""

    conversation: int
    run: int
    call: str
    reply: int
    why: str
    kind: str = "obvious"
    solved: bool = False


def obvious_loops(run: RecordedRun) -> list[tuple[str, int, str]]:
    """``(call, reply index, why)`` for every obvious loop of a run (first evidence only).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> ai = [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": f"c{i}"}]) for i in range(4)]
        >>> obvious_loops(RecordedRun("u", ai, {(i, 0): "Error: no" for i in range(4)}))
        [('f({})', 3, 'requested again after the same result 3 times')]
    """
    seen: dict[str, list[str]] = {}
    found: dict[str, tuple[int, str]] = {}
    for index, call in run.calls():  # one result per call of a reply, in order
        key = canonical_call(call)
        results = seen.setdefault(key, [])
        if key not in found and len(results) >= SAME_RESULTS and len(set(results[-SAME_RESULTS:])) == 1:
            found[key] = (index, f"requested again after the same result {SAME_RESULTS} times")
        if key not in found and len(results) + 1 >= REPEATS:
            found[key] = (index, f"made {REPEATS} times")
        results.append(run.result(index, str(call["id"])))
    return [(key, index, why) for key, (index, why) in found.items()]


def stuck_loops(run: RecordedRun) -> list[tuple[str, int, str]]:
    """``(call, deadline reply index, why)`` for every stuck loop of a run (module docstring).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> names = ["f", "g", "f", "f", "g", "f", "f"]
        >>> ai = [AIMessage("", tool_calls=[{"name": n, "args": {}, "id": f"c{i}"}])
        ...       for i, n in enumerate(names)]
        >>> results = {(i, 0): f"g{i}" if n == "g" else "same" for i, n in enumerate(names)}
        >>> stuck_loops(RecordedRun("u", ai, results))
        [('f({})', 6, 'requested again after the same result 4 times')]
        >>> stuck_loops(RecordedRun("u", ai[:6], results))
        [('f({})', 5, 'the same result 4 times (not requested again)')]
    """
    counts: dict[tuple[str, str], int] = {}
    fourth: dict[str, int] = {}
    found: dict[str, tuple[int, str]] = {}
    for index, call in run.calls():
        key = canonical_call(call)
        if key in fourth and key not in found:
            found[key] = (index, f"requested again after the same result {STUCK} times")
        pair = (key, run.result(index, str(call["id"])))
        counts[pair] = counts.get(pair, 0) + 1
        if counts[pair] == STUCK and key not in fourth:
            fourth[key] = index
    for key, index in fourth.items():
        found.setdefault(key, (index, f"the same result {STUCK} times (not requested again)"))
    return [(key, index, why) for key, (index, why) in found.items()]


def deerflow_replay(conversation: Conversation, setting: DeerFlowGuard | None = None) -> list[RunResult]:
    """deer-flow's rule over each run's recorded replies (a fresh guard per run, set as ``setting``)."""
    out = []
    for run in conversation.runs:
        guard = copy.deepcopy(setting) if setting is not None else DeerFlowGuard()
        warned, served, stopped = None, 0, False
        for index, ai in enumerate(run.replies):
            served = index + 1
            verdict = guard.check(ai) if ai.tool_calls else "end"
            warned = index if verdict == "warn" and warned is None else warned
            if verdict in ("stop", "end"):
                stopped = verdict == "stop"
                break
        executed = sum(len(ai.tool_calls) for ai in run.replies[: served - stopped])
        out.append(RunResult(served, executed, "hard_stop" if stopped else None,
                             "repeat" if stopped else None, warned))
    return out


def systems(conversations: Sequence[Conversation], variants: bool = False,
            middleware: bool = False) -> dict[str, ReplayFn]:
    """The compared systems, by name (each graph is built once per source)."""
    names = {c["name"] for conv in conversations for run in conv.runs for _, c in run.calls()}
    detections = {"no_detection": None, "langgraph-loop": LoopDetection(), **(VARIANTS if variants else {})}
    out: dict[str, ReplayFn] = {}
    for name, detection in detections.items():
        replayer = Replayer(names, loop_detection=detection)
        out[name] = lambda c, r=replayer: r.replay(c.runs)  # type: ignore[misc]
        if name == "no_detection":
            out["deerflow_style"] = deerflow_replay
    if middleware:  # the same engine through create_agent + LoopDetectionMiddleware
        replayer = Replayer(names, loop_detection=LoopDetection(), middleware=True)
        out[MIDDLEWARE] = lambda c, r=replayer: r.replay(c.runs)  # type: ignore[misc]
    return out


MIDDLEWARE = "create_agent + LoopDetectionMiddleware"


def front_doors(m: Source) -> tuple[int, int]:
    """(runs, runs where the middleware warned, blocked and stopped where the graph did; the
    graph's ``completed`` is the middleware's no stop)."""
    def seen(r: RunResult) -> tuple[Any, ...]:
        reason = r.stop_reason if r.stop_reason != "completed" else None
        return reason, r.layer, r.served, r.blocked, r.notices

    pairs = [(g, w) for gc, wc in zip(m.results["langgraph-loop"], m.results[MIDDLEWARE], strict=True)
             for g, w in zip(gc, wc, strict=True)]
    return len(pairs), sum(seen(g) == seen(w) for g, w in pairs)


COUNTS = ("trajectories", "runs", "solved_runs", "calls", "failed_calls", "failed_tokens", "executed",
          "solved_warned",
          "solved_stopped", "solved_cut_new", "solved_blocked", "blocked_changed", "failed_warned",
          "failed_stopped", "failed_saved", "loops", "loops_stopped", "stuck_failed", "stuck_failed_stopped",
          "stuck_failed_refused", "stuck_solved", "stuck_solved_stopped")


@dataclass
class Summary:
    """One system's numbers (``n``: every name of :data:`COUNTS`) over one source, or all of them."""

    system: str
    source: str = ""
    n: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    stops: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def as_dict(self, lists: bool = True) -> dict[str, Any]:
        """Flat: system, source, every count, seconds (and the lists)."""
        out = {"system": self.system, "source": self.source, **{k: self.n[k] for k in COUNTS},
               "seconds": self.seconds}
        return out | ({k: getattr(self, k) for k in ("stops", "warnings", "blocks", "notices")}
                      if lists else {})


_CUT = re.compile(r"\[\.\.\. \d+ of (\d+) characters cut; sha256")


def _chars(text: str) -> int:
    """A recorded text's length; the full length where the data records a cut output."""
    found = _CUT.search(text)
    return int(found.group(1)) if found else len(text)


def tokens_saved(run: RecordedRun, stop: int, final_answer: bool, spares_request: bool = False) -> int:
    """Input tokens (characters / 4) of the requests a stop at reply ``stop`` spares: every
    request after it (and its own, ``spares_request``: a rule that stops before calling the
    model), less the tools-free final answer's (ours makes one; the rivals do not).
    A request is the run's user message and every earlier reply and result (earlier runs of a
    conversation are left out: the same for every system)."""
    sizes = [_chars(run.user)]
    for i, ai in enumerate(run.replies):
        sent = len(str(ai.content)) + sum(len(json.dumps(c["args"])) for c in ai.tool_calls)
        sizes.append(sizes[-1] + sent + sum(_chars(run.result(i, str(c["id"]))) for c in ai.tool_calls))
    spared = sizes[stop + (not spares_request):len(run.replies)]  # the prompts of replies stop+1 .. the last
    return (sum(spared) - (spared[0] if spared and final_answer else 0)) // 4


def engine_replay(detection: LoopDetection) -> ReplayFn:
    """The engine's decisions over each run's recorded replies, without a graph (as the graph's
    model node decides: the layers over the results the previous round returned, blocked calls
    answered by the detector): the fast path for sweeps, checked against the graph's replay."""
    def replay(conversation: Conversation) -> list[RunResult]:
        out = []
        for run in conversation.runs:
            det: Any = {}
            results: list[ToolMessage] = []
            served, executed, stop, layer, warned, blocked = 0, 0, None, None, None, []
            for index, ai in enumerate(run.replies):
                served = index + 1
                obs = observe(det, ai, results, detection)
                det, results = obs.state, []
                if obs.stop is not None:
                    stop, layer = "loop_detected", obs.stop.get("layer")
                    break
                warned = index if obs.warnings and warned is None else warned
                for position, call in enumerate(ai.tool_calls):
                    i = str(call["id"])
                    if i in obs.blocks:
                        blocked.append((index, position))
                        tag = {"langgraph_loop": {"kind": BLOCKED_KIND}}
                        results.append(ToolMessage(obs.blocks[i], tool_call_id=i, status="error",
                                                   additional_kwargs=tag))
                    else:
                        executed += 1
                        results.append(ToolMessage(run.result(index, i), tool_call_id=i, name=call["name"],
                                                   status="error" if run.failed(index, i) else "success"))
                if not ai.tool_calls:
                    break
            out.append(RunResult(served, executed, stop or "completed", layer, warned, tuple(blocked)))
        return out

    return replay


def rule_replay(rule: Callable[[RecordedRun], int | None], spares_request: bool = False) -> ReplayFn:
    """A rival's rule over each run's recorded replies: where it ends the run (``rivals.py``)."""
    def replay(conversation: Conversation) -> list[RunResult]:
        out = []
        for run in conversation.runs:
            stop = rule(run)
            out.append(RunResult(len(run.replies), len(run.calls()), None) if stop is None else
                       RunResult(stop + 1, len(run.calls(0, stop)), "hard_stop", "rule",
                                 spares_request=spares_request))
        return out

    return replay


def deerflow(hard_limit: int, window: int) -> ReplayFn:
    """deer-flow's rule at one setting (warnings do not change the recorded replies)."""
    return lambda c: deerflow_replay(c, DeerFlowGuard(min(3, hard_limit - 1), hard_limit, window))


def stop_index(result: RunResult) -> int | None:
    """The reply index a run was stopped at (``None``: not stopped)."""
    return result.served - 1 if result.stop_reason in ("loop_detected", "hard_stop") else None


def cuts_new_call(run: RecordedRun, stop: int) -> bool:
    """Does a stop at reply ``stop`` save a call the run had not made before it?"""
    before = {canonical_call(c) for i, c in run.calls() if i < stop}
    return any(canonical_call(c) not in before for _, c in run.calls(stop))


def _blocked_changed(run: RecordedRun, blocked: Iterable[tuple[int, int]]) -> int:
    """Blocked calls whose recorded result differed from the call's previous result."""
    changed = 0
    for reply, position in blocked:
        call = run.replies[reply].tool_calls[position]
        key, result = canonical_call(call), run.result(reply, str(call["id"]))
        earlier = [run.result(i, str(c["id"])) for i, c in run.calls(0, reply) if canonical_call(c) == key]
        changed += bool(earlier) and earlier[-1] != result
    return changed


def _count_run(s: Summary, solved: bool, run: RecordedRun, res: RunResult, where: str) -> None:
    stop, n = stop_index(res), s.n
    n.update(runs=1, calls=len(run.calls()), executed=res.executed,
             blocked_changed=_blocked_changed(run, res.blocked))
    s.stops += [] if stop is None else [f"{where}: reply {stop}, {res.layer}"]
    s.warnings += [] if res.first_warning is None else [f"{where}: reply {res.first_warning}"]
    s.blocks += [f"{where}: reply {reply}, call {position}" for reply, position in res.blocked]
    s.notices += [f"{where}: reply {reply}: {text[:200]}" for reply, text in res.notices]
    if solved:
        n.update(solved_runs=1, solved_warned=res.first_warning is not None,
                 solved_stopped=stop is not None, solved_blocked=len(res.blocked),
                 solved_cut_new=stop is not None and cuts_new_call(run, stop))
    else:
        n.update(failed_calls=len(run.calls()), failed_warned=res.first_warning is not None,
                 failed_stopped=stop is not None, failed_saved=(0 if stop is None else len(run.calls(stop)))
                 + sum(1 for reply, _ in res.blocked if stop is None or reply < stop),
                 failed_tokens=0 if stop is None else tokens_saved(run, stop, res.stop_reason != "hard_stop",
                                                                   res.spares_request))


def summarize(system: str, conversations: Sequence[Conversation],
              results: Sequence[list[RunResult]], loops: Sequence[Loop]) -> Summary:
    """Count runs, calls, warnings, stops, blocks, saved calls and stopped loops for one system."""
    s = Summary(system=system)
    s.n["trajectories"] = len(conversations)
    for conv, runs in zip(conversations, results, strict=True):
        for ri, (run, res) in enumerate(zip(conv.runs, runs, strict=True)):
            where = f"{conv.label} run {ri} ({'solved' if conv.solved else 'failed'})"
            _count_run(s, conv.solved, run, res, where)
    for loop in loops:
        res = results[loop.conversation][loop.run]
        stopped = (stop := stop_index(res)) is not None and stop <= loop.reply
        kind = "loops" if loop.kind == "obvious" else "stuck_solved" if loop.solved else "stuck_failed"
        s.n.update({kind: 1, f"{kind}_stopped": stopped})
        if kind == "stuck_failed":
            run = conversations[loop.conversation].runs[loop.run]
            s.n["stuck_failed_refused"] += stopped or any(  # or the loop's call blocked by its deadline
                reply <= loop.reply and canonical_call(run.replies[reply].tool_calls[pos]) == loop.call
                for reply, pos in res.blocked)
    return s


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def format_table(summaries: Sequence[Summary]) -> str:
    """One markdown table, a row per system (and one for blocks, when any system blocked)."""
    lines = ["| system | runs (solved) | calls | solved: runs warned | solved: runs stopped"
             " | solved: stops cutting a new call | failed: runs stopped | failed: calls saved"
             " | obvious loops stopped | stuck loops stopped (failed runs) | stuck loops stopped"
             " (solved runs) | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        n = s.n
        lines.append(
            f"| {s.system} | {n['runs']} ({n['solved_runs']}) | {n['calls']} | {n['solved_warned']}"
            f" | {n['solved_stopped']} ({_pct(n['solved_stopped'], n['solved_runs'])})"
            f" | {n['solved_cut_new']}"
            f" | {n['failed_stopped']} | {n['failed_saved']} ({_pct(n['failed_saved'], n['failed_calls'])})"
            f" | {n['loops_stopped']}/{n['loops']} | {n['stuck_failed_stopped']}/{n['stuck_failed']}"
            f" | {n['stuck_solved_stopped']}/{n['stuck_solved']} | {s.seconds} |")
    blocking = [s for s in summaries if s.n["solved_blocked"] or s.n["blocked_changed"]
                or s.n["stuck_failed_refused"] > s.n["stuck_failed_stopped"]]
    if blocking:
        lines += ["", "| system | solved: calls blocked | blocks hiding a changed result"
                  " | stuck loops stopped or blocked (failed runs) |", "|---|---|---|---|"]
        lines += [f"| {s.system} | {s.n['solved_blocked']} | {s.n['blocked_changed']} | "
                  f"{s.n['stuck_failed_refused']}/{s.n['stuck_failed']} |" for s in blocking]
    return "\n".join(lines)


@dataclass
class Source:
    """One trajectory file, its conversations and, once measured, results, summaries and loops."""

    name: str
    conversations: list[Conversation]
    vendored: bool
    summaries: list[Summary] = field(default_factory=list)
    results: dict[str, list[list[RunResult]]] = field(default_factory=dict)
    loops: list[Loop] = field(default_factory=list)


def load_sources(paths: Iterable[Path], limit: int | None = None,
                 labels: Sequence[str] | None = None) -> list[Source]:
    """Every ``*.json.gz`` of the given files and directories, each file once (by content); only
    the conversations named in ``labels`` when given (a source left empty is dropped)."""
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    vendored, seen, out = {digest(p) for p in VENDORED.glob("*.json.gz")}, set(), []
    for path in paths:
        for file in sorted(path.glob("*.json.gz")) if path.is_dir() else [path]:
            if (key := digest(file)) not in seen:
                seen.add(key)
                picked = [c for c in load_conversations(file, limit) if not labels or c.label in labels]
                if picked:
                    out.append(Source(file.name.removesuffix(".json.gz"), picked, key in vendored))
    return out


def find_loops(source: Source) -> Source:
    """The obvious and stuck loops of every run of a source (``source.loops``)."""
    source.loops = [Loop(ci, ri, call, reply, why, kind, conv.solved)
                    for ci, conv in enumerate(source.conversations) for ri, run in enumerate(conv.runs)
                    for kind, finder in (("obvious", obvious_loops), ("stuck", stuck_loops))
                    for call, reply, why in finder(run)]
    return source


def measure(source: Source, variants: bool = False, middleware: bool = False) -> Source:
    """Replay one source under every system."""
    conversations = find_loops(source).conversations
    for name, replay in systems(conversations, variants, middleware).items():
        started = time.perf_counter()
        source.results[name] = [replay(conv) for conv in conversations]
        summary = summarize(name, conversations, source.results[name], source.loops)
        summary.source, summary.seconds = source.name, round(time.perf_counter() - started, 1)
        source.summaries.append(summary)
    return source


def _print_source(m: Source, details: bool) -> None:
    conversations = m.conversations
    print(f"\n## {m.name} ({len(conversations)} trajectories, {sum(c.solved for c in conversations)}"
          f" solved)\n\n{format_table(m.summaries)}")
    for kind in ("obvious", "stuck") if details else ("obvious",):
        loops = [x for x in m.loops if x.kind == kind]
        print(f"\n{kind.capitalize()} loops ({len(loops)}):")
        for x in loops:
            conv = conversations[x.conversation]
            stops = {name: stop_index(r[x.conversation][x.run]) for name, r in m.results.items()}
            verdicts = [f"{name}: " + (f"stopped at reply {stop}" if stop is not None and stop <= x.reply
                                       else "not stopped") for name, stop in stops.items()]
            print(f"- {kind}: {conv.label} ({'solved' if conv.solved else 'failed'}), run {x.run}:"
                  f" `{x.call[:80]}` {x.why} (reply {x.reply}); " + "; ".join(verdicts))
        if not loops:
            print("- none")
    for s in m.summaries if details else ():
        for what, entries in (("stops", s.stops), ("first warnings", s.warnings), ("blocks", s.blocks)):
            print(f"\n{s.system} {what} ({len(entries)}):" + "".join(f"\n- {x}" for x in entries))
    base = m.summaries[0]
    print(f"\nreplay check: {base.system} executed {base.n['executed']} of {base.n['calls']} recorded calls")
    if MIDDLEWARE in m.results:
        runs, same = front_doors(m)
        print(f"front doors: {MIDDLEWARE} warned, blocked and stopped as the graph on {same} of {runs} runs")


def stream_cut(text: str, piece: int = 7) -> int | None:
    """Where the stream of ``text`` in ``piece``-character pieces is cut (None: it streams whole).

    Example:
        >>> rows = "".join(f"| HAT{i} | ${90 + i} |\\n" for i in range(40))
        >>> stream_cut("I will fix the typo now. " * 40) is not None, stream_cut(rows), stream_cut(rows * 2)
        (True, None, None)
    """
    feed = StreamText()
    return next((i + piece for i in range(0, len(text), piece) if feed.add(text[i:i + piece])), None)


def text_rule(sources: Sequence[Source]) -> str:
    """``--text``: a row per source, and the markdown corpus."""
    rows = []
    corpus = [(a["text"], a["loop"]) for a in json.loads(CORPUS.read_text())["answers"]]
    for name, texts in [*((s.name, [(str(ai.content), (s.name, c.label, ri, i) in LOOPS)
                                     for c in s.conversations for ri, run in enumerate(c.runs)
                                     for i, ai in enumerate(run.replies)]) for s in sources),
                        (f"{CORPUS.name} (written for these tests)", corpus)]:
        started = time.perf_counter()
        cuts = [(stream_cut(text), len(text), loops) for text, loops in texts if text]
        spared = [1 - cut / size for cut, size, loops in cuts if loops and cut is not None]
        looping = sum(loops for *_, loops in cuts)
        rows.append(f"| {name} | {len(cuts)} | {sum(c is not None for c, _, x in cuts if not x)} | {looping}"
                    f" | {len(spared)} ({_pct(len(spared), looping)}) | {_pct(sum(spared), len(spared))}"
                    f" | {time.perf_counter() - started:.1f} |")
    return "\n".join(["| source | replies | cut, not loops | looping | cut, looping (spared) | their text "
                      "spared (mean) | seconds |", "|---|---|---|---|---|---|---|", *rows])


def main(argv: list[str] | None = None) -> int:
    """Replay every source under every system; print the tables and loops; write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_traces",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, action="append", help="a trajectory file or a directory of them"
                        " (repeatable; default benchmarks/data/taubench_gpt-4o_airline.json.gz)")
    parser.add_argument("--label", action="append", help="replay only the conversations with this label")
    parser.add_argument("--limit", type=int, help="replay only the first N conversations of each")
    parser.add_argument("--json", type=Path, help="where to write JSON (default: real_traces.json for"
                        " vendored data only, else real_traces_all.json, in benchmarks/results; none for a"
                        " sample)")
    parser.add_argument("--details", action="store_true", help="list every stuck loop, warning, stop, block")
    parser.add_argument("--text", action="store_true", help="the text rule on every assistant text instead"
                        " (default data ../shared/data)")
    parser.add_argument("--variants", action="store_true", help="also langgraph-loop without the block rung,"
                        " blocking always, and without the path excuse")
    parser.add_argument("--middleware", action="store_true", help=f"also {MIDDLEWARE}")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sources = load_sources(args.data or [SHARED if args.text else DATA], args.limit, args.label)
    if args.text:
        print(f"{text_rule(sources)}\n\nbenchmark runtime: {time.perf_counter() - started:.1f} s")
        return 0
    measured = [measure(source, args.variants, args.middleware) for source in sources]
    print("# Loop detection on real trajectories")
    for m in measured:
        _print_source(m, args.details)
    totals: dict[str, Summary] = {}
    for s in (s for m in measured for s in m.summaries):
        total = totals.setdefault(s.system, Summary(system=s.system, source="overall"))
        total.n.update(s.n)
        total.seconds = round(total.seconds + s.seconds, 1)
    if len(measured) > 1:
        print(f"\n## overall ({len(measured)} sources)\n\n{format_table(list(totals.values()))}")
    print(f"\nbenchmark runtime: {time.perf_counter() - started:.1f} s")
    path = args.json or (None if args.label or args.limit else RESULTS / (
        "real_traces.json" if all(s.vendored for s in sources) else "real_traces_all.json"))
    if path is not None:
        out = [{"source": m.name, "vendored": m.vendored,
                "summaries": [s.as_dict(lists=m.vendored) for s in m.summaries]}
               | ({f"{kind}_loops": [asdict(x) for x in m.loops if x.kind == kind]
                   for kind in ("obvious", "stuck")} if m.vendored else {}) for m in measured]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"sources": out, "overall": [s.as_dict(False) for s in totals.values()]},
                                   indent=2) + "\n")
        print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
