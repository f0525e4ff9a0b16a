"""Measurements behind :mod:`benchmarks.detector_proto`'s defaults (pure replays, no graph).

``python -m benchmarks.detector_proto [--data PATH ...]`` prints, on the given sources
(default ``../shared/data/``):

* the prototype at its defaults and at the variants of its parameters, per source and overall,
  with deer-flow's rule as the yardstick (the numbers of :mod:`benchmarks.real_traces`);
* Gemini CLI's text-loop rule on the assistant contents: within one reply (as Gemini CLI
  resets at every tool call) and across the replies of a run (no reset between replies);
* for each reply whose text loops, how much of it comes after the point where the rule fires
  when the reply streams in 20-character pieces (what cutting the stream saves);
* a consecutive-tool-error stop at 2 to 10 replies in a row whose every result was an error.

A stop *cuts a new call* in a solved run when one of the calls it saves was not made earlier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.detector_proto import ProtoConfig, TextLoop, replay_run, text_loop
from benchmarks.real_traces import (
    Source,
    Summary,
    cuts_new_call,
    deerflow_replay,
    find_loops,
    load_sources,
    summarize,
)
from benchmarks.replay import Conversation, RecordedRun, RunResult
from langgraph_loop.nodes import fingerprint
from langgraph_loop.nodes.stream_cut import StreamText

__all__ = ["VARIANTS", "consecutive_errors", "proto_summaries", "stream_cut_savings", "study",
           "text_loops"]

VARIANTS: dict[str, ProtoConfig] = {
    "proto (defaults)": ProtoConfig(),
    "ladder: block at 3, stop when asked again": ProtoConfig(block_after=3, stop_after=99),
    "ladder: block at 2, stop when asked again": ProtoConfig(block_after=2, stop_after=99),
    "ladder for interleaved successes only": ProtoConfig(block_interleaved=True),
    "stop_after=4": ProtoConfig(stop_after=4),
    "no path excuse (touch=False)": ProtoConfig(touch=False),
    "no path excuse, empty results like others": ProtoConfig(touch=False, empty_stop_after=3),
    "no normalization": ProtoConfig(normalize=False),
    "window=20 calls": ProtoConfig(window=20),
    "window=50 calls": ProtoConfig(window=50),
    "no consecutive-reply stop": ProtoConfig(consecutive_stop_after=None),
    "consecutive-reply stop at 5 (Gemini CLI, Cline)": ProtoConfig(consecutive_stop_after=5),
    "+ results-blind repeat 5 in 20 calls": ProtoConfig(repeat_stop_after=5, window=20),
    "+ results-blind repeat 10 in 50 calls": ProtoConfig(repeat_stop_after=10, window=50),
}


def _replay_all(conversations: Sequence[Conversation],
                replay: Callable[[RecordedRun], RunResult]) -> list[list[RunResult]]:
    return [[replay(run) for run in conv.runs] for conv in conversations]


def proto_summaries(sources: Sequence[Source], config: ProtoConfig,
                    name: str = "proto") -> list[Summary]:
    """The prototype's numbers per source, then overall."""
    out = []
    total = Summary(system=name, source="overall")
    for source in sources:
        convs = source.conversations
        results = _replay_all(convs, lambda run: replay_run(run, config))
        s = summarize(name, convs, results, find_loops(convs))
        s.source = source.name
        out.append(s)
        total.add(s)
    return [*out, total]


def _deerflow(sources: Sequence[Source]) -> list[Summary]:
    out = []
    total = Summary(system="deerflow_style", source="overall")
    for source in sources:
        convs = source.conversations
        s = summarize("deerflow_style", convs, [deerflow_replay(c) for c in convs],
                      find_loops(convs))
        s.source = source.name
        out.append(s)
        total.add(s)
    return [*out, total]


def _row(s: Summary) -> str:
    return (f"| {s.system} | {s.source} | {s.stuck_failed_stopped}/{s.stuck_failed}"
            f" | {s.stuck_failed_refused}/{s.stuck_failed} | {s.solved_stopped}/{s.solved_runs}"
            f" | {s.solved_cut_new} | {s.solved_blocked} | {s.blocked_changed}"
            f" | {s.failed_stopped} | {s.failed_saved} |")


HEADER = ("| system | source | stuck loops stopped (failed) | stopped or blocked | solved runs"
          " stopped | cutting a new call | solved: calls blocked | blocks hiding a changed"
          " result | failed runs stopped | failed: calls saved |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


@dataclass
class Firing:
    """Where a run-level rule fires: solved/failed runs, calls saved, stops cutting new calls."""

    solved: int = 0
    solved_cut_new: int = 0
    failed: int = 0
    saved: int = 0

    def count(self, run: RecordedRun, solved: bool, stop: int | None) -> None:
        """Count one run stopped at ``stop`` (``None``: not stopped)."""
        if stop is None:
            return
        if solved:
            self.solved += 1
            self.solved_cut_new += cuts_new_call(run, stop)
        else:
            self.failed += 1
            self.saved += len(run.calls(stop))


def _first_text_loop(run: RecordedRun, across: bool) -> int | None:
    """The first reply whose text loops (``across``: the text runs on between replies)."""
    loop = TextLoop()
    for index, ai in enumerate(run.replies):
        text = ai.content if isinstance(ai.content, str) else str(ai.content)
        if not across:
            if text_loop(text):
                return index
            continue
        if any(loop.add(line) for line in (text + "\n").splitlines(keepends=True)):
            return index
    return None


def text_loops(sources: Sequence[Source]) -> list[str]:
    """Gemini CLI's rule on the assistant contents (a stop at the reply whose text loops)."""
    lines = ["| source | scope | solved runs flagged | cutting a new call | failed runs flagged"
             " | failed: calls saved |", "|---|---|---|---|---|---|"]
    for source in sources:
        for across in (False, True):
            fired = Firing()
            for conv in source.conversations:
                for run in conv.runs:
                    fired.count(run, conv.solved, _first_text_loop(run, across))
            lines.append(f"| {source.name} | {'across replies' if across else 'one reply'}"
                         f" | {fired.solved} | {fired.solved_cut_new} | {fired.failed}"
                         f" | {fired.saved} |")
    return lines


def _fires_at(text: str, feed: fingerprint.TextLoop | StreamText, piece: int) -> int | None:
    """Characters streamed when ``feed`` fires on ``text`` sent in ``piece``-character pieces."""
    for start in range(0, len(text), piece):
        if feed.add(text[start:start + piece]):
            return min(start + piece, len(text))
    return None


def stream_cut_savings(sources: Sequence[Source], piece: int = 20) -> list[str]:
    """Each reply whose text loops (the library's rule on the finished reply): where the rule
    fires when the reply streams in ``piece``-character pieces, fed as they come (``TextLoop``)
    and as the model node feeds them (``StreamText``: whole lines), and the characters after
    that point, which a cut stream is spared."""
    lines = ["| source | run (solved) | reply | characters | fires at (pieces / node) |"
             " after the cut (node) |", "|---|---|---|---|---|---|"]
    total = after = 0
    for source in sources:
        for conv in source.conversations:
            for run in conv.runs:
                for index, ai in enumerate(run.replies):
                    text = ai.content if isinstance(ai.content, str) else str(ai.content)
                    if not fingerprint.text_loop(text):
                        continue
                    raw = _fires_at(text, fingerprint.TextLoop(), piece)
                    node = _fires_at(text, StreamText(), piece)
                    rest = len(text) - (node if node is not None else len(text))
                    total, after = total + len(text), after + rest
                    fired = " / ".join("-" if n is None else f"{n:,}" for n in (raw, node))
                    lines.append(f"| {source.name} | {conv.label} ({conv.solved}) | {index} |"
                                 f" {len(text):,} | {fired} | {rest:,} ({rest / len(text):.1%}) |")
    share = f"{after / total:.1%}" if total else "-"
    lines.append(f"| all | | | {total:,} | | {after:,} ({share}) |")
    return lines


def _errors_stop(run: RecordedRun, after: int) -> int | None:
    streak = 0
    for index, ai in enumerate(run.replies):
        if not ai.tool_calls:
            return None
        if streak >= after:
            return index
        failed = all(run.failed(index, str(c["id"])) for c in ai.tool_calls)
        streak = streak + 1 if failed else 0
    return None


def consecutive_errors(sources: Sequence[Source], thresholds: Sequence[int] = range(2, 11)) -> list[str]:
    """A stop when the last ``k`` tool-calling replies all had only error results."""
    lines = ["| k | " + " | ".join(s.name for s in sources) + " |",
             "|---|" + "---|" * len(sources)]
    for k in thresholds:
        cells = []
        for source in sources:
            fired = Firing()
            for conv in source.conversations:
                for run in conv.runs:
                    fired.count(run, conv.solved, _errors_stop(run, k))
            cells.append(f"solved {fired.solved} (new {fired.solved_cut_new}), failed"
                         f" {fired.failed}, saved {fired.saved}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def study(paths: Sequence[Path], variants: dict[str, ProtoConfig] | None = None) -> None:
    """Print every measurement (module docstring)."""
    sources = load_sources(paths)
    print("## The prototype and its variants, deer-flow's rule as the yardstick\n")
    print(HEADER)
    for s in _deerflow(sources):
        print(_row(s))
    for name, config in (variants or VARIANTS).items():
        for s in proto_summaries(sources, config, name):
            print(_row(s))
    print("\n## Text loops (Gemini CLI's rule: a 50-character chunk 10 times within 5 chunks on"
          " average)\n")
    print("\n".join(text_loops(sources)))
    print("\n## Cutting a looping reply while it streams (20-character pieces)\n")
    print("\n".join(stream_cut_savings(sources)))
    print("\n## Consecutive tool errors: stop after k tool-calling replies in a row with only"
          " error results\n")
    print("\n".join(consecutive_errors(sources)))


def quick(paths: Sequence[Path], **overrides: Any) -> list[Summary]:
    """The prototype with some parameters changed, per source and overall (for exploring)."""
    return proto_summaries(load_sources(paths), replace(ProtoConfig(), **overrides))
