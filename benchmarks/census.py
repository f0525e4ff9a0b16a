"""Graph steps, node runs and checkpoints per tool round, counted from real runs.

Each graph system runs the echo task twice with ``InMemorySaver`` and
``stream_mode="debug"``, at N = 10 and N = 50 rounds. Counted per run: supersteps (distinct
``step`` of the ``task`` events), node runs per node name (``task`` events), checkpoints
(``checkpoint`` events, cross-checked against what the saver stored). Per round is the slope
between the two runs, (count(50) - count(10)) / 40; per run (fixed) is what is left at N = 10.

Example:
    >>> from benchmarks.savers import Savers
    >>> from benchmarks.systems import PEER_SYSTEMS
    >>> agent = [s for s in PEER_SYSTEMS if s.name == "create_agent"]
    >>> with Savers() as savers:
    ...     row = census(agent, savers)[0]
    >>> row.steps_per_round, row.checkpoints_per_round, row.nodes_per_round
    (2.0, 2.0, {'model': 1.0, 'tools': 1.0})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.savers import Savers, saver_stats
from benchmarks.scripted import EchoModel, make_echo
from benchmarks.systems import GraphInvoker, System

__all__ = ["HIGH", "LOW", "StepCount", "census", "count_run", "format_census"]

LOW, HIGH = 10, 50
PROMPT = "Call echo once per turn until you are done, then answer."


@dataclass
class RunCount:
    """What one run of N rounds executed and stored."""

    n: int
    steps: int
    nodes: dict[str, int]
    checkpoints: int
    stored_checkpoints: int


@dataclass
class StepCount:
    """Per-round and per-run counts for one system (None for a system that is not a graph)."""

    system: str
    runs: list[RunCount] = field(default_factory=list)
    steps_per_round: float | None = None
    steps_fixed: float | None = None
    checkpoints_per_round: float | None = None
    checkpoints_fixed: float | None = None
    nodes_per_round: dict[str, float] = field(default_factory=dict)
    nodes_fixed: dict[str, float] = field(default_factory=dict)


def count_run(system: System, n: int, savers: Savers) -> RunCount | None:
    """Run ``system`` for ``n`` rounds with ``InMemorySaver`` and count its debug events."""
    with savers.open("memory") as saver:
        invoker = system.build(EchoModel(n_rounds=n), [make_echo()], n, saver)
        if not isinstance(invoker, GraphInvoker):
            return None
        events = invoker.debug_events(PROMPT)
        stats = saver_stats(saver)
    tasks = [e for e in events if e["type"] == "task"]
    return RunCount(
        n=n,
        steps=len({e["step"] for e in tasks}),
        nodes=dict(Counter(e["payload"]["name"] for e in tasks)),
        checkpoints=sum(e["type"] == "checkpoint" for e in events),
        stored_checkpoints=stats.checkpoints if stats else 0,
    )


def _split(low: float, high: float, span: int) -> tuple[float, float]:
    """(per round, fixed) from the counts at LOW and HIGH rounds."""
    per_round = (high - low) / span
    return per_round, low - LOW * per_round


def census(systems: Sequence[System], savers: Savers) -> list[StepCount]:
    """Count steps, node runs and checkpoints per round and per run for every system."""
    rows = []
    for system in systems:
        low, high = count_run(system, LOW, savers), count_run(system, HIGH, savers)
        row = StepCount(system.name)
        if low is not None and high is not None:
            span = HIGH - LOW
            row.runs = [low, high]
            row.steps_per_round, row.steps_fixed = _split(low.steps, high.steps, span)
            row.checkpoints_per_round, row.checkpoints_fixed = _split(low.checkpoints, high.checkpoints, span)
            for name in sorted(set(low.nodes) | set(high.nodes), key=lambda k: (-high.nodes.get(k, 0), k)):
                per_round, fixed = _split(low.nodes.get(name, 0), high.nodes.get(name, 0), span)
                if per_round:
                    row.nodes_per_round[name] = per_round
                if fixed:
                    row.nodes_fixed[name] = fixed
        rows.append(row)
    return rows


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def _nodes(counts: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in counts.items()) or "–"


def format_census(rows: Sequence[StepCount]) -> str:
    """Markdown table: steps and checkpoints per round and per run, and which nodes ran."""
    lines = [
        f"### Graph steps and checkpoints (counted with stream_mode=\"debug\" at N={LOW} and N={HIGH})",
        "",
        "| system | steps/round | checkpoints/round | steps per run (fixed) | checkpoints per run (fixed)"
        f" | steps at N={LOW} | checkpoints at N={LOW} | node runs per round | node runs per run (fixed) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r.runs:
            lines.append(f"| {r.system} | not a graph | – | – | – | – | – | – | – |")
            continue
        low = r.runs[0]
        lines.append(
            f"| {r.system} | {_num(r.steps_per_round)} | {_num(r.checkpoints_per_round)}"
            f" | {_num(r.steps_fixed)} | {_num(r.checkpoints_fixed)} | {low.steps} | {low.checkpoints}"
            f" | {_nodes(r.nodes_per_round)} | {_nodes(r.nodes_fixed)} |"
        )
    mismatched = [
        f"{r.system} N={c.n}" for r in rows for c in r.runs if c.checkpoints != c.stored_checkpoints
    ]
    if mismatched:
        lines.append(f"\nWARNING: checkpoint events differ from stored checkpoints: {', '.join(mismatched)}")
    return "\n".join(lines)
