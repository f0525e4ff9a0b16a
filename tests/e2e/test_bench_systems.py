"""The overhead benchmark's systems (``benchmarks/systems.py``) run the echo task to the same end
as langgraph-loop, sync and async, on every checkpointer the benchmark uses; and the harness
runs them and reports every cell. No timing is asserted here: timings belong to the benchmark.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from benchmarks import targets_bare
from benchmarks.overhead import CASES, COMPARED, Mode, main, run_benchmark, run_once
from benchmarks.report import Lookup, cell_table, format_tables
from benchmarks.savers import SaverKind, Savers
from benchmarks.scripted import EchoModel, ToolCounter, make_echo
from benchmarks.systems import System, all_systems

N = 3
NEW = ("bare_direct", "bare_toolnode", "bare_toolnode_loopstate", "create_react_agent")
SAVERS: list[SaverKind] = ["none", "memory", "sqlite", "postgres"]
MODES: tuple[Mode, ...] = ("sync", "async")


def systems() -> dict[str, System]:
    return {s.name: s for s in all_systems()}


def transcript(messages: list[BaseMessage]) -> list[tuple[str, Any, list[str]]]:
    """Type, content and tool-call ids of every message."""
    return [(m.type, m.content, [c["id"] for c in getattr(m, "tool_calls", [])]) for m in messages]


@pytest.fixture
def savers(request: pytest.FixtureRequest) -> Iterator[Savers]:
    """The benchmark's savers; PostgreSQL on the session's server, started only when asked for."""
    server = request.getfixturevalue("pg_server") if "postgres" in request.node.name else None
    with Savers(pg_server=server) as opened:
        yield opened


def run(system: System, kind: SaverKind, mode: str, savers: Savers) -> tuple[dict[str, Any], EchoModel, int]:
    """One echo task of N rounds: the final state, the model (its log) and the tool's count."""
    counter = ToolCounter()
    model = EchoModel(n_rounds=N)
    tools = [make_echo(counter=counter)]
    if mode == "sync":
        with savers.open(kind) as saver:
            return system.build(model, tools, N, saver)("go"), model, counter.count

    async def arun() -> dict[str, Any]:
        async with savers.aopen(kind) as saver:
            return await system.build(model, tools, N, saver).ainvoke("go")

    return asyncio.run(arun()), model, counter.count


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", SAVERS)
def test_new_systems_end_like_langgraph_loop(kind: SaverKind, mode: str, savers: Savers) -> None:
    by_name = systems()
    ours, _, _ = run(by_name["langgraph-loop"], kind, mode, savers)
    assert ours["messages"][-1].content == f"Done after {N} rounds."
    for name in NEW:
        final, model, tool_runs = run(by_name[name], kind, mode, savers)
        assert final["messages"][-1].content == ours["messages"][-1].content, name
        assert transcript(final["messages"]) == transcript(ours["messages"]), name
        assert tool_runs == N and model.log.kinds == ["tool_calls"] * N + ["answer"], name


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_plain_loop_ends_like_langgraph_loop(mode: str, savers: Savers) -> None:
    by_name = systems()
    ours, _, _ = run(by_name["langgraph-loop"], "none", mode, savers)
    final, _, tool_runs = run(by_name["plain_loop"], "none", mode, savers)
    assert transcript(final["messages"]) == transcript(ours["messages"])
    assert tool_runs == N


def test_run_once_counts_every_round_in_both_modes(savers: Savers) -> None:
    by_name = systems()
    case = next(c for c in CASES if c.key == "sqlite")
    with asyncio.Runner() as runner:
        for name in (*NEW, "langgraph-loop"):
            for mode in MODES:
                result = run_once(by_name[name], N, case, savers, mode=mode, runner=runner)
                assert result.rounds_ok, (name, mode)
                assert len(result.gaps_ms) == N
                assert (result.bytes is not None) == (mode == "sync")


def test_harness_reports_every_cell_and_target(savers: Savers) -> None:
    by_name = systems()
    compared = [by_name[name] for name in COMPARED]
    cases = [c for c in CASES if c.key in ("none", "memory")]
    gc.collect()
    gc.freeze()  # as --quick does: each measured run collects only what it made, not the suite's heap
    try:
        with asyncio.Runner() as runner:
            results = run_benchmark(compared, [N], 1, cases, savers, ("sync", "async"), runner)
    finally:
        gc.unfreeze()
    assert {(m.system, m.case, m.mode) for m in results} == {
        (s, c, mode) for s in COMPARED for c in ("none", "memory") for mode in ("sync", "async")
    }
    assert all(m.rounds_ok for m in results)
    rows = [line for line in cell_table(Lookup(results)).splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 * 2  # the header, then saver × mode at one N
    assert "÷ bare_toolnode" in rows[0] and "÷ create_agent" in rows[0]
    assert "### Time per tool round, every system" in format_tables(results)
    detector = [{"rounds": 25, "us_per_step": 40.0}, {"rounds": 10_000, "us_per_step": 41.0}]
    evaluated = targets_bare.evaluate(results, detector)
    assert len(evaluated) == len(targets_bare.TARGETS)
    verdicts = {r.label: r.verdict for r in evaluated}
    assert verdicts["no checkpointer, N=10, sync: ms/round ×bare_toolnode"] == "not measured"  # N=3 here
    assert verdicts["detector decision per reply: longest thread ÷ 25 rounds"] == "PASS"
    cells = tuple((c, N, mode) for c in ("none", "memory") for mode in ("sync", "async"))
    at_n = targets_bare.Target("every cell at N=3", "time", 1e9, cells, "bare_toolnode")
    (result,) = targets_bare.evaluate(results, targets=[at_n])
    assert (result.verdict, result.measured_cells, result.passed_cells) == ("PASS", 4, 4)
    assert result.paired is not None and len(result.paired) == 1


def test_quick_main_writes_the_machine_and_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "quick.json"
    assert main(["--quick", "--ns", str(N), "--cases", "none", "--no-detector", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "### Machine" in printed and "load average at start" in printed
    assert "### Targets (issue 24" in printed
    data = json.loads(out.read_text())
    assert {"cpu", "cores", "python"} <= set(data["meta"]["host"])
    assert len(data["meta"]["load_average_at_start"]) == 3 and len(data["meta"]["load_average_at_end"]) == 3
    assert {r["system"] for r in data["results"]} == {"plain_loop", *COMPARED}
    assert {r["mode"] for r in data["results"]} == {"sync", "async"}
