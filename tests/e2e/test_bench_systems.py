"""The overhead benchmark, run the way a user runs it (``python -m benchmarks ...`` in a subprocess,
its printout and JSON read back): every system ends the echo task exactly like the others (the
tool ran N times and the final transcript is the echo task's, sync and async, on every saver), and
the harness reports every cell and target. No timing is asserted here: timings belong to the
benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
N = 3
SYSTEMS = ("plain_loop", "bare_direct", "bare_toolnode", "bare_toolnode_loopstate", "create_react_agent",
           "create_agent", "langgraph-loop")
COMPARED = {"bare_direct", "bare_toolnode", "create_react_agent", "create_agent", "langgraph-loop"}
SAVERS = ("none", "memory", "sqlite", "postgres")


def bench(tmp_path: Path, pg_server: str, *args: str) -> tuple[str, dict[str, Any]]:
    """Run ``python -m benchmarks`` on the session's PostgreSQL server; its printout and JSON."""
    out = tmp_path / "overhead.json"
    env = {**os.environ, "LANGGRAPH_LOOP_TEST_PG_URI": pg_server}
    done = subprocess.run([sys.executable, "-m", "benchmarks", *args, "--json", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(out.read_text())


def test_every_system_ends_the_echo_task_alike_and_every_cell_is_reported(
    tmp_path: Path, pg_server: str
) -> None:
    printed, data = bench(tmp_path, pg_server, "--quick", "--ns", str(N), "--only", ",".join(SYSTEMS),
                          "--cases", ",".join(SAVERS))
    cells = {(r["system"], r["case"], r["mode"]): r for r in data["results"]}
    expected = {(s, c, m) for s in SYSTEMS for c in SAVERS for m in ("sync", "async")
                if c == "none" or (s != "plain_loop" and (c != "postgres" or s in COMPARED))}
    assert set(cells) == expected
    assert all(r["rounds_ok"] and r["n"] == N and r["runs"] == 2 for r in data["results"])
    assert all((r["bytes"] is not None) == (r["mode"] == "sync" and r["case"] != "none")
               for r in data["results"])
    assert "did not run exactly" not in printed and "unavailable" not in printed
    rows = [line for line in printed.split("### Time per tool round, every system")[1].split("###")[0]
            .splitlines() if line.startswith("| ")]
    assert "÷ bare_toolnode" in rows[0] and "÷ create_agent" in rows[0]
    assert len(rows) == 1 + 2 * len(SAVERS)  # the header, then saver × mode at one N
    assert "### Machine" in printed and "load average at start" in printed
    assert "### Targets (issue 24" in printed
    assert {"cpu", "cores", "python", "packages"} <= set(data["meta"]["host"])
    assert len(data["meta"]["load_average_at_start"]) == len(data["meta"]["load_average_at_end"]) == 3
    assert len(data["targets_issue24"]) == 17 and "targets" not in data  # issue 14's: retired
    assert {t["verdict"] for t in data["targets_issue24"]} == {"not measured"}  # no cell at N=3


def test_cpu_clock_ab_interleaves_the_chosen_systems(tmp_path: Path, pg_server: str) -> None:
    printed, data = bench(tmp_path, pg_server, "--ns", str(N), "--only", "bare_toolnode,langgraph-loop",
                          "--cases", "none,sqlite", "--modes", "sync", "--reps", "3", "--clock", "cpu",
                          "--no-census")
    assert data["meta"]["clock"] == "cpu" and "cpu clock" in printed
    assert {(r["system"], r["case"]) for r in data["results"]} == {
        (s, c) for s in ("bare_toolnode", "langgraph-loop") for c in ("none", "sqlite")}
    assert all(r["rounds_ok"] and len(r["ms_per_round_samples"]) == 3 for r in data["results"])
    assert data["steps"] == []


def test_detector_cost_reports_every_thread_length_and_its_target(tmp_path: Path) -> None:
    out = tmp_path / "detector.json"
    command = [sys.executable, "-m", "benchmarks.detector_cost", "--reps", "20", "--json", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [r["rounds"] for r in rows] == [25, 250, 2500, 10000]
    assert all(0 < r["us_per_step"] <= r["us_median"] for r in rows)
    (target,) = [line for line in done.stdout.splitlines() if line.startswith("Target (issue 24")]
    ratio = rows[-1]["us_per_step"] / rows[0]["us_per_step"]
    assert target.endswith(": PASS" if ratio <= 1.1 else ": FAIL") and f"{ratio:.3f}" in target
