"""What a user feels per tool round: milliseconds of our own work beside a model that takes 50 ms.

Four systems run the same task (``echo`` once per model call for ``--rounds`` rounds, then answer) on
the same saver: the bare ``model ⇄ ToolNode`` loop, ``create_agent``, ``create_agent`` +
``LoopDetectionMiddleware`` and ``create_loop_agent``. The model sleeps ``--latency`` ms per call; the
tool returns a 2-20 KB coding output, different in every round and run. The overhead of a round is
``(wall - model calls × latency) / rounds``: the graph, the saver, the tool and our decisions. The
systems take turns within every repetition; medians are reported. See benchmarks/README.md.

    python -m benchmarks.round_ms [--latency 50] [--rounds 20] [--reps 7] [--saver sqlite]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from benchmarks.savers import SaverKind, Savers
from benchmarks.systems import EchoModel, System, all_systems, coding_output, make_echo

RESULTS = Path(__file__).parent / "results"
SYSTEMS = ("bare_toolnode", "create_agent", "create_agent_loop_mw", "langgraph-loop")


class SlowEchoModel(EchoModel):
    """``EchoModel`` that takes ``latency`` seconds per call, like a fast hosted model."""

    latency: float = 0.05

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        """Sleep ``latency`` seconds, then answer as ``EchoModel`` does."""
        time.sleep(self.latency)
        return super()._generate(messages, stop, run_manager, **kwargs)


def one_run(system: System, saver_kind: SaverKind, savers: Savers, *, rounds: int, latency: float,
            seed: int) -> float:
    """Build ``system`` on a fresh saver (not timed), run one task; the overhead per round in ms."""
    outputs = [coding_output(seed, step, 2_000, 20_000) for step in range(rounds)]
    model = SlowEchoModel(n_rounds=rounds, latency=latency)
    with savers.open(saver_kind) as saver:
        invoker = system.build(model, [make_echo(outputs=outputs)], rounds, saver)
        start = time.perf_counter()
        invoker("Call echo once per turn until you are done, then answer.")
        wall = time.perf_counter() - start
    calls = len(model.log.kinds)
    assert calls == rounds + 1, f"{system.name}: {calls} model calls, expected {rounds + 1}"
    return (wall - calls * latency) * 1000 / rounds


def measure(*, rounds: int, latency: float, reps: int, saver: SaverKind,
            names: Sequence[str] = SYSTEMS) -> dict[str, Any]:
    """Every system ``reps`` times after one warm-up, taking turns; medians and spreads in ms."""
    systems = [s for s in all_systems() if s.name in names]
    samples: dict[str, list[float]] = {s.name: [] for s in systems}
    with Savers() as savers:
        for rep in range(reps + 1):
            for system in systems:
                ms = one_run(system, saver, savers, rounds=rounds, latency=latency, seed=rep)
                if rep:
                    samples[system.name].append(ms)
    return {"rounds": rounds, "latency_ms": latency * 1000, "saver": saver, "reps": reps,
            "overhead_ms_per_round": {name: {"median": round(statistics.median(v), 2),
                                             "min": round(min(v), 2), "max": round(max(v), 2)}
                                      for name, v in samples.items()}}


def main(argv: Sequence[str] | None = None) -> None:
    """Run, print a table, write ``results/round_ms.json`` (or ``--out``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency", type=float, default=50.0, help="model latency per call, ms (50)")
    p.add_argument("--rounds", type=int, default=20, help="tool rounds per run (20)")
    p.add_argument("--reps", type=int, default=7, help="timed repetitions, median reported (7)")
    p.add_argument("--saver", default="sqlite", choices=("none", "memory", "sqlite", "postgres"))
    p.add_argument("--out", type=Path, default=RESULTS / "round_ms.json")
    args = p.parse_args(argv)
    result = measure(rounds=args.rounds, latency=args.latency / 1000, reps=args.reps, saver=args.saver)
    print(f"overhead per round beside a {args.latency:g} ms model, {args.rounds} rounds, 2-20 KB tool "
          f"outputs, {args.saver} saver, median of {args.reps}:")
    for name, cell in result["overhead_ms_per_round"].items():
        print(f"  {name:<22} {cell['median']:6.2f} ms  ({cell['min']:.2f}-{cell['max']:.2f})")
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
