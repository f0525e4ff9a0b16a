"""``benchmarks/long_thread.py`` run small, the way a user runs it (a subprocess, its printout and
JSON read back): every system grows its thread to every mark with the right answer, our turns
load the thread once, and every figure and target is reported. No timing is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = ("langgraph-loop", "langgraph-loop+compaction", "create_agent")


def test_the_long_thread_benchmark_reports_every_system_at_every_mark(tmp_path: Path) -> None:
    out = tmp_path / "long.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.long_thread", "--marks", "10,20",
                           "--sizes", "5000,20000", "--import-reps", "1", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    by = {r["system"]: r for r in data["results"]}
    assert tuple(by) == SYSTEMS
    for result in by.values():
        assert [m["rounds"] for m in result["marks"]] == [10, 20]
        assert len(result["turn_ms"]) == 2 and all(t > 0 for t in result["turn_ms"])
        assert all(m["get_state_ms"] > 0 and m["db_mb"] > 0 and m["peak_rss_mb"] > 0
                   and m["queries"] > 0 and m["floor_ms"] > 0 and m["deserialize_ms"] > 0
                   for m in result["marks"])
    ours, compacted, peer = (by[s]["marks"][-1] for s in SYSTEMS)
    assert ours["messages"] == peer["messages"] == 44  # 2 turns: 10 rounds and an answer each
    assert compacted["messages"] < ours["messages"]  # the compacting thread was summarised
    assert ours["loads_per_turn"] == 1 and peer["loads_per_turn"] == 0
    assert ours["db_mb"] < peer["db_mb"] / 2
    assert set(data["imports_cpu_ms"]) == {"langchain.agents", "langgraph_loop"}
    assert len(data["targets"]) == 4
    printed = done.stdout
    assert "| langgraph-loop | 20 | 44 |" in printed and "| create_agent | 20 | 44 |" in printed
    assert "Target (issue 42) import ≤ 1.1× langchain.agents: " in printed
    assert "Target (issue 42) turn at 250 rounds ≤ 1.5× start: not measured" in printed
