"""Run the fault property suite without stopping at the first failure: time and census.

Usage: ``python -m tests.faults.property_census [N]`` (default 1,000 examples of two runs
each, as the ``ci`` profile runs it). Prints the examples and runs generated, the time per
100, and the violations found, grouped by kind (numbers replaced by ``N``). Hypothesis
stops at the first failing example and shrinks it; this shows every class the generated
examples hit, which is what a fix needs to see go to 0.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.faults.test_properties import SEGMENTS, configs, contexts, reply_specs, run_example


def census(n: int) -> tuple[int, int, float, Counter[str]]:
    """(examples, runs, seconds, violations by kind) for ``n`` generated examples."""
    counts: Counter[str] = Counter()
    totals = [0, 0]

    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(c=configs, segments=st.lists(st.sampled_from(SEGMENTS), max_size=4),
           script=st.lists(reply_specs, max_size=6),
           turns=st.lists(contexts, min_size=2, max_size=2), seed=st.integers(0, 2**32 - 1))
    def sweep(c: dict[str, Any], segments: list[str], script: list[Any], turns: list[Any],
              seed: int) -> None:
        totals[0] += 1
        totals[1] += len(turns)
        for line in run_example(c, segments, script, turns, seed):
            kind = re.sub(r"\d+", "N", re.sub(r"^run \d+: ", "", line))
            counts[re.sub(r"\[.*", "[...]", kind)[:100]] += 1

    started = time.perf_counter()
    sweep()
    return totals[0], totals[1], time.perf_counter() - started, counts


def main(argv: list[str]) -> None:
    examples, runs, seconds, counts = census(int(argv[0]) if argv else 1000)
    print(f"{examples} examples, {runs} runs, {seconds:.1f} s: "
          f"{100 * seconds / examples:.2f} s per 100 examples, "
          f"{100 * seconds / runs:.2f} s per 100 runs")
    for kind, count in counts.most_common():
        print(f"{count:6d}  {kind}")


if __name__ == "__main__":
    main(sys.argv[1:])
