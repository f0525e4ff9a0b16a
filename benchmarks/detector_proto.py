"""A per-call stagnation detector, prototyped outside the library (pure functions).

The library's detector counts a call's identical results only while *nothing else* changed in
between, so on coding runs any fresh result (an edit, another diagnostic) between two identical
repeats resets the streak and marks the repeat as progressing. This prototype judges every call
by **its own results only**: a call that returns the same result again is stagnating, whatever
ran in between, until its own result changes.

Per call signature (tool name + canonical JSON arguments, hashed) it keeps the hash of its last
*normalized* result and ``same``: how many of its own executions in a row returned that result.
A call is remembered while it was requested within the last ``window`` (30) **calls**, not
responses, so a call interleaved with other work still reaches the thresholds. When the model
requests a call again:

* ``same >= warn_after`` (2): warn, once per streak (a notice; the call runs);
* ``same >= stop_after`` (3): stop the run (``loop_detected``); errors and successes alike;
* with ``block_after`` set (the ladder: warn → block → stop), the repeat at that count is
  *blocked* (not run, answered with an error result saying why, the run goes on) and asking
  for the blocked call again stops the run; ``block_interleaved`` blocks instead of stopping
  only for repeats with other calls in between whose result was not an error.

Two excuses keep legitimate patterns running:

* **the path excuse**: when a call whose arguments name one of the same paths (``src/x.py``,
  ``reproduce.py``), a path inside one of its folders or a folder holding one of its paths ran
  since the call's last execution, the repeat is not judged, and an identical result does not
  extend the streak: re-reading a file after writing it, re-running a script after rewriting
  it, reading a build output after rebuilding its folder;
* **no content**: a result with nothing but markup, whitespace and a zero exit status (a silent
  ``sed -i``) says nothing about the state; such a call counts only from ``empty_stop_after``.

Results are normalized before hashing (:func:`normalize`): UUIDs, timestamps and clock times,
``0x`` addresses, durations (``in 0.12s``), temp paths, prefixed ids (``toolu_…``, ``call_…``,
``msg_…``, MCP ``block_…``), epoch numbers, pids, the shell's line counter (``bash: line 36191:``),
random seeds and Python object ids. Malformed calls are signed from their raw text.

Run-level layers: the same reply (the same calls) ``consecutive_stop_after`` (15) times in a row
stops whatever the results (polling that advances 12 times still finishes); off by default,
for measurement: ``errors_stop_after`` (replies in a row whose every result was an error, as in
Roo Code and Cline) and ``repeat_stop_after`` (deer-flow's results-blind count, in calls).
:class:`TextLoop` is Gemini CLI's rule on the model's own text, measured separately.

The state is a small JSON-friendly dict (short hashes and ints), bounded by the window: it
could live in a checkpoint as the library's detector state does.

Example:
    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> def ask(i, name="test"):
    ...     return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": f"c{i}"}])
    >>> state, results, actions = {}, [], []
    >>> for i, name in enumerate(["test", "edit", "test", "edit", "test", "edit", "test"]):
    ...     obs = observe(state, ask(i, name), results, ProtoConfig())
    ...     actions.append(obs.action)
    ...     text = "1 failed in 0.2s" if name == "test" else f"edited v{i}"
    ...     results = [ToolMessage(text.replace("0.2", str(i)), tool_call_id=f"c{i}", name=name)]
    ...     state = obs.state
    >>> actions
    ['ok', 'ok', 'ok', 'ok', 'warn', 'ok', 'stop']

Usage: ``python -m benchmarks.detector_proto [--data PATH ...]``: the variants, text-loop and
consecutive-error measurements (:mod:`benchmarks.proto_study`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, ToolMessage

from benchmarks.replay import RecordedRun, RunResult

__all__ = ["BLOCKED", "Observation", "ProtoConfig", "TextLoop", "dirs_of", "is_empty", "normalize",
           "observe", "paths_of", "replay_run", "text_loop"]

Action = Literal["ok", "warn", "block", "stop"]

BLOCKED = ("Error: not run. This exact call returned the same result {count} times in a row;"
           " running it again will not tell you anything new. Change something first, or try"
           " a different approach.")

_VOLATILE = [
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
    (r"\b0x[0-9a-f]{4,}\b", "<addr>"),
    (r"\b\d+(\.\d+)?\s?(ms|s|sec|secs|seconds|min|mins|minutes)\b", "<duration>"),
    (r"(/tmp|/var/folders|/private/var/folders)/[^\s'\"]+", "<tmp>"),
    (r"\btmp[a-z0-9_]{6,}\b", "<tmp>"),
    (r"\b(toolu|call|msg|req|run|chatcmpl|block|resp)[_-][a-z0-9]{8,}\b", "<id>"),
    (r"\b1[5-9]\d{8}(\d{3})?\b", "<epoch>"),
    (r"\bpid[ =:]+\d+\b", "pid <n>"),
    (r"\b(ba|z|da)?sh: line \d+:", "sh: line <n>:"),  # the shell's own line counter
    (r"\brandom seed: *\d+", "random seed: <n>"),
    (r"\bid[=:] *'?\d{6,}'?", "id=<n>"),  # Python object ids
]
VOLATILE = [(re.compile(pattern, re.IGNORECASE), repl) for pattern, repl in _VOLATILE]
_MARKUP = re.compile(r"<[^>\n]{1,40}>")
_PATH = re.compile(r"(?:[\w.-]*/)+[\w.-]*\w|\b[\w-]+\.(?:py|pyi|java|kt|js|ts|tsx|jsx|go|rs|rb|c|h|cc"
                   r"|cpp|hpp|cs|php|sh|xml|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|html|css|gradle"
                   r"|properties|lock|sql|csv)\b")


def paths_of(args: Any) -> list[str]:
    """The path-like tokens in a call's arguments, e.g. ``src/app.py`` (hashed short).

    Example:
        >>> len(paths_of({"command": "sed -n '1,5p' django/core/validators.py"}))
        1
        >>> paths_of({"command": "ls -la"}), paths_of({"q": "x"})
        ([], [])
    """
    return sorted({_hash(token)[:8] for token in _tokens(args)})


def dirs_of(args: Any) -> list[str]:
    """The folders that hold the path-like tokens (hashed short): ``a/b/c.py`` → ``a/b``, ``a``.

    Example:
        >>> inside = dirs_of({"command": "cat build/text/index.txt"})
        >>> len(inside), paths_of({"command": "rm -rf build/text"})[0] in inside
        (2, True)
    """
    folders = {token.rsplit("/", k)[0] for token in _tokens(args)
               for k in range(1, token.count("/") + 1)}
    return sorted({_hash(folder)[:8] for folder in folders if folder})


def _tokens(args: Any) -> set[str]:
    text = json.dumps(args, sort_keys=True, default=str).replace("\\n", "\n")
    return {m.strip("./") for m in _PATH.findall(text) if m.strip("./")}


def normalize(text: str) -> str:
    """The result with its volatile parts replaced by placeholders.

    Example:
        >>> normalize("Ran 4 tests in 0.012s at 2025-11-19T00:04:32, id 0x7f3a2c10")
        'Ran 4 tests in <duration> at <time>, id <addr>'
        >>> normalize("job 123e4567-e89b-12d3-a456-426614174000 in /tmp/pytest-7/x.py")
        'job <uuid> in <tmp>'
    """
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def is_empty(text: str) -> bool:
    """No content: nothing but markup, whitespace and a zero exit status.

    Example:
        >>> is_empty("<returncode>0</returncode>\\n<output>\\n</output>"), is_empty("  ")
        (True, True)
        >>> is_empty("<returncode>1</returncode>"), is_empty("ok")
        (False, False)
    """
    return _MARKUP.sub("", text).strip() in ("", "0")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def signature(name: str, args: Any) -> str:
    """Tool name + canonical JSON of the arguments, hashed."""
    return _hash(json.dumps([name, args], sort_keys=True, default=str))


@dataclass(frozen=True)
class ProtoConfig:
    """The prototype's parameters (see module docstring); the defaults are the measured ones."""

    warn_after: int = 2
    """Identical results of a call after which asking for it again warns (once per streak)."""
    stop_after: int = 3
    """Identical results of a call after which asking for it again stops the run."""
    empty_stop_after: int = 4
    """The least count (warn, block or stop) for a call whose result had no content."""
    block_after: int | None = None
    """Identical results after which the call is blocked instead (a ladder); asking for a
    blocked call again stops the run. ``None``: no block rung."""
    window: int = 30
    """Calls (not responses) a call is remembered for after its last request."""
    normalize: bool = True
    """Normalize volatile parts of results before comparing them."""
    touch: bool = True
    """A call that names a path another call names excuses that call's next identical result."""
    consecutive_stop_after: int | None = 15
    """Stop when the same reply (the same calls) comes this many times in a row, whatever the
    results (polling that advances 12 times still finishes)."""
    errors_stop_after: int | None = None
    """Stop after this many tool-calling replies in a row whose every result was an error."""
    block_interleaved: bool = False
    """At ``stop_after``, block instead of stopping when other calls ran since the call's last
    request and its result was not an error (asking for it again stops)."""
    repeat_stop_after: int | None = None
    """Results-blind: stop when one call is requested this many times within ``window`` calls
    (deer-flow's kind of rule, for comparison)."""


@dataclass
class Observation:
    """What the prototype decided on one reply: the strongest action, its layer, the blocks."""

    state: dict[str, Any]
    action: Action = "ok"
    layer: str | None = None
    blocked: dict[str, str] = field(default_factory=dict)
    """Call id → the error text it is answered with instead of running."""

    def escalate(self, action: Action, layer: str) -> None:
        """Keep the strongest action (stop > block > warn > ok), the first layer to reach it."""
        if _rank(action) > _rank(self.action):
            self.action, self.layer = action, layer


def _text(message: ToolMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _absorb_one(old: dict[str, Any], message: ToolMessage, config: ProtoConfig) -> dict[str, Any]:
    """A call's record after one of its results (``old``: the record as requested)."""
    if old.get("blocked_id") == message.tool_call_id:  # not run: nothing learnt
        return {**old, "blocked": True}
    text = _text(message)
    digest = _hash(normalize(text) if config.normalize else text)
    repeated = old.get("result") == digest
    same = old.get("same", 0) + 1 if repeated else 1
    if repeated and old.get("touched"):
        same = old.get("same", 1)  # a call naming its paths ran in between: no evidence
    record = {k: v for k, v in old.items() if k in ("last", "paths", "dirs", "seen")}
    record.update(result=digest, same=same)
    if is_empty(text):
        record["empty"] = True
    if message.status == "error":
        record["failed"] = True
    if repeated and old.get("warned"):
        record["warned"] = True  # one warning per streak
    return record


def absorb(state: Mapping[str, Any], results: Sequence[ToolMessage],
           config: ProtoConfig) -> dict[str, Any]:
    """Record the previous round's results (``pending`` maps its call ids to signatures)."""
    out = dict(state)
    pending: dict[str, str] = dict(out.get("pending") or {})
    if not pending:
        return out
    calls = dict(out.get("calls") or {})
    mine = [m for m in results if m.tool_call_id in pending]
    for message in mine:
        sig = pending[message.tool_call_id]
        calls[sig] = _absorb_one(dict(calls.get(sig) or {}), message, config)
    failed = bool(mine) and all(m.status == "error" for m in mine)
    out["errors"] = out.get("errors", 0) + 1 if failed else 0
    out["calls"], out["pending"] = calls, {}
    return out


def _threshold(record: Mapping[str, Any], config: ProtoConfig, base: int) -> int:
    """A count for this call: a result without content counts from ``empty_stop_after``."""
    return max(base, config.empty_stop_after) if record.get("empty") else base


def _stagnation(record: dict[str, Any], config: ProtoConfig, count: int = 0) -> Action:
    """The ladder for one requested call, from its own results (marks warned/blocked)."""
    if record.get("touched") or "result" not in record:
        return "ok"  # new, or a call naming its paths ran since: it may read differently now
    same = record.get("same", 0)
    if (config.block_interleaved and not record.get("blocked") and not record.get("failed")
            and count - record.get("last", 0) > 1
            and same >= _threshold(record, config, config.stop_after)):
        return "block"
    if record.get("blocked") or same >= _threshold(record, config, config.stop_after):
        return "stop"
    if config.block_after is not None and same >= _threshold(record, config, config.block_after):
        return "block"
    if same >= _threshold(record, config, config.warn_after) and not record.get("warned"):
        record["warned"] = True
        return "warn"
    return "ok"


def _repeated(record: dict[str, Any], count: int, config: ProtoConfig) -> bool:
    """The results-blind rule: requested ``repeat_stop_after`` times within the window."""
    if config.repeat_stop_after is None:
        return False
    seen = [*record.get("seen", ()), count][-config.repeat_stop_after:]
    record["seen"] = seen
    return len(seen) >= config.repeat_stop_after and seen[0] > count - config.window


def _touch(calls: dict[str, dict[str, Any]], sig: str, paths: Sequence[str],
           dirs: Sequence[str]) -> None:
    """Mark every other remembered call that names one of these paths, a path inside one of
    them, or a folder holding one of them (in place)."""
    for other, record in calls.items():
        theirs = record.get("paths", ())
        if other != sig and not (set(paths).isdisjoint([*theirs, *record.get("dirs", ())])
                                 and set(dirs).isdisjoint(theirs)):
            calls[other] = {**record, "touched": True}


def _reply_layers(det: dict[str, Any], ai: AIMessage, obs: Observation,
                  config: ProtoConfig) -> None:
    """The run-level layers: identical replies in a row, error replies in a row."""
    reply = _hash("|".join(sorted(signature(c["name"], c["args"]) for c in ai.tool_calls)))
    det["streak"] = det.get("streak", 0) + 1 if det.get("reply") == reply else 1
    det["reply"] = reply
    if config.consecutive_stop_after is not None and det["streak"] >= config.consecutive_stop_after:
        obs.escalate("stop", "consecutive")
    if config.errors_stop_after is not None and det.get("errors", 0) >= config.errors_stop_after:
        obs.escalate("stop", "errors")


def observe(state: Mapping[str, Any], ai: AIMessage, results: Sequence[ToolMessage],
            config: ProtoConfig) -> Observation:
    """Absorb the previous round's results, then decide on the new reply.

    Args:
        state: the prototype's state (``{}`` at the start of a run); never mutated.
        ai: the new model reply.
        results: the ToolMessages of the round before it.
        config: the parameters.

    Returns:
        The new state and the action (``ok``, ``warn``, ``block``, ``stop``), with the
        blocked calls' error texts.
    """
    det = absorb(state, results, config)
    obs = Observation(state=det)
    if not ai.tool_calls:
        return obs
    calls: dict[str, dict[str, Any]] = dict(det.get("calls") or {})
    count = det.get("n", 0)
    _reply_layers(det, ai, obs, config)
    pending = {}
    for call in ai.tool_calls:
        count += 1
        sig = signature(call["name"], call["args"])
        record = dict(calls.get(sig) or {})
        action = _stagnation(record, config, count)
        if action == "block":
            record["blocked_id"] = str(call["id"])
            obs.blocked[str(call["id"])] = BLOCKED.format(count=record.get("same", 0))
        obs.escalate(action, "stagnation")
        if _repeated(record, count, config):
            obs.escalate("stop", "repeat")
        record["last"] = count
        if config.touch:
            record["paths"], record["dirs"] = paths_of(call["args"]), dirs_of(call["args"])
            _touch(calls, sig, record["paths"], record["dirs"])
        calls[sig] = record
        pending[str(call["id"])] = sig
    det["calls"] = {s: r for s, r in calls.items() if r.get("last", 0) > count - config.window}
    det["n"], det["pending"] = count, pending
    return obs


def _rank(action: Action) -> int:
    return ("ok", "warn", "block", "stop").index(action)


def replay_run(run: RecordedRun, config: ProtoConfig | None = None) -> RunResult:
    """The prototype over one recorded run (the model ignores warnings and blocks).

    A stop ends the run at that reply; a blocked call is not run (its recorded result is
    replaced by the block's error text) and the recorded run goes on.
    """
    config = config or ProtoConfig()
    state: dict[str, Any] = {}
    results: list[ToolMessage] = []
    executed, served, warned = 0, 0, None
    blocked: list[tuple[int, int]] = []
    for index, ai in enumerate(run.replies):
        served = index + 1
        if not ai.tool_calls:
            break
        obs = observe(state, ai, results, config)
        state = obs.state
        if obs.action == "warn" and warned is None:
            warned = index
        if obs.action == "stop":
            return RunResult(served=index + 1, executed=executed, stop_reason="loop_detected",
                             layer=obs.layer, first_warning=warned, blocked=tuple(blocked))
        results = []
        for position, call in enumerate(ai.tool_calls):
            cid = str(call["id"])
            if cid in obs.blocked:
                blocked.append((index, position))
                results.append(ToolMessage(obs.blocked[cid], tool_call_id=cid, status="error"))
                continue
            executed += 1
            results.append(ToolMessage(run.result(index, cid), tool_call_id=cid,
                                       status="error" if run.failed(index, cid) else "success"))
    return RunResult(served=served, executed=executed, stop_reason="completed",
                     first_warning=warned, blocked=tuple(blocked))


# Gemini CLI's content-loop rule (packages/core/src/services/loopDetectionService.ts): a
# 50-character chunk seen 10 times, its last 10 occurrences 5 chunks apart on average at most,
# with at most 5 distinct texts between them; 5,000 characters of history.
CHUNK, TIMES, SPAN, HISTORY = 50, 10, 5 * 50, 5000
_STRUCTURE = re.compile(r"(^|\n)\s*(\|.*\||[|+-]{3,})|(^|\n)\s*([*+-]|\d+\.)\s|(^|\n)#+\s|(^|\n)>\s")
_DIVIDER = re.compile(r"^[+\-_=*\u2500-\u257f]+$")


class TextLoop:
    """Gemini CLI's content-loop rule over a stream of text pieces (lines, when the whole
    reply is known): :meth:`add` returns True once the text repeats itself.

    A piece holding a code fence, a table row, a list item, a heading or a blockquote starts
    the tracking again; text inside code blocks and divider lines are never analysed.

    Example:
        >>> loop = TextLoop()
        >>> any(loop.add("I will fix the typo now. ") for _ in range(30))
        True
        >>> loop = TextLoop()
        >>> any(loop.add(f"- item {i} of the list, each one different\\n") for i in range(30))
        False
    """

    def __init__(self) -> None:
        """Empty history."""
        self.history = ""
        self.places: dict[str, list[int]] = {}
        self.next = 0
        self.in_code = False

    def _reset(self) -> None:
        self.history, self.places, self.next = "", {}, 0

    def add(self, piece: str) -> bool:
        """Append one piece of text; True when the text now loops."""
        fences = piece.count("```")
        divider = bool(_DIVIDER.match(piece.strip())) if piece.strip() else False
        if fences or divider or _STRUCTURE.search(piece):
            self._reset()
        was_in_code = self.in_code
        self.in_code = self.in_code != (fences % 2 == 1)
        if was_in_code or self.in_code or divider:
            return False
        self.history += piece
        if len(self.history) > HISTORY:
            cut = len(self.history) - HISTORY
            self.history = self.history[cut:]
            self.next = max(0, self.next - cut)
            self.places = {k: kept for k, v in self.places.items()
                           if (kept := [i - cut for i in v if i >= cut])}
        while self.next + CHUNK <= len(self.history):
            if self._repeats(self.history[self.next:self.next + CHUNK]):
                return True
            self.next += 1
        return False

    def _repeats(self, chunk: str) -> bool:
        places = self.places.setdefault(chunk, [])
        places.append(self.next)
        if len(places) < TIMES:
            return False
        last = places[-TIMES:]
        if (last[-1] - last[0]) / (TIMES - 1) > SPAN:
            return False
        periods = {self.history[a:b] for a, b in pairwise(last)}
        return len(periods) <= TIMES // 2


def text_loop(text: str) -> bool:
    """Does this reply's text loop (Gemini CLI's rule, the text fed line by line)?

    Example:
        >>> text_loop("Wait, I replaced it with itself. " * 12), text_loop("a b c d e f " * 3)
        (True, False)
    """
    loop = TextLoop()
    return any(loop.add(line) for line in text.splitlines(keepends=True))


def main(argv: list[str] | None = None) -> int:
    """Print the measurements of the extra layers (see :mod:`benchmarks.proto_study`)."""
    from benchmarks.proto_study import study

    parser = argparse.ArgumentParser(prog="python -m benchmarks.detector_proto",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, action="append",
                        help="trajectory files or directories (default: ../shared/data)")
    args = parser.parse_args(argv)
    study(args.data or [Path(__file__).resolve().parents[2] / "shared" / "data"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
