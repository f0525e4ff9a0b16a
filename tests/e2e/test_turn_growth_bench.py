"""``benchmarks/turn_growth.py`` run small, the way a user runs it (a subprocess and its
printout): every piece is measured at both lengths, and one more turn is counted. The counts
are deterministic; no timing is asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_turn_growth_benchmark_measures_every_piece_and_counts_a_turn() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.turn_growth", "--marks", "20,40",
                           "--reps", "1"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:]
            for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    assert len([r for r in rows if r.startswith(("load:", "snapshot write:"))]) == 6
    assert "get_state floor (bare StateGraph, one row)" in rows
    assert rows["model calls"] == ["11", "11 |"]  # ten rounds and the answer, at both lengths
    assert rows["loads"] == ["1", "1 |"]
    assert rows["messages sent to the model"] == ["605", "1,089 |"]  # the whole thread, each call
