"""Throughput of ``langgraph.json``'s graph on Aegra, 1 vs 2 server processes (about 2 minutes):
``tests/support/aegra.py``'s deployment with the offline scripted model, 200 runs on new threads,
``--concurrency`` in flight, round-robin, streamed (latency: request to end of stream).

Example:
    >>> print(table([{"servers": 1, "runs": 200, "concurrency": 16, "ok": 200,
    ...               "runs_per_s": 9.5, "p50_ms": 1600.0, "p95_ms": 2100.0}]).splitlines()[2])
    | 1 | 200 | 16 | 200 | 9.5 | 1600 | 2100 |
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client

from tests.support.aegra import server_env, server_venv, serving, write_config
from tests.support.postgres import fresh_database, pg_uri
from tests.support.redis_server import redis_url

REPO = Path(__file__).resolve().parents[1]
PROMPT = {"messages": [{"role": "user", "content": "get_weather for Paris"}]}


async def _one_run(url: str, graph_id: str) -> tuple[float, bool]:
    """One run on a new thread, streamed to its end: ``(seconds, completed)``."""
    client = get_client(url=url)
    thread_id = (await client.threads.create())["thread_id"]
    started = time.perf_counter()
    last: Any = None
    async for part in client.runs.stream(thread_id, graph_id, input=PROMPT, stream_mode="values"):
        if part.event == "values":
            last = part.data
    seconds = time.perf_counter() - started
    return seconds, isinstance(last, dict) and last.get("stop_reason") == "completed"


async def _drive(urls: list[str], graph_id: str, runs: int, concurrency: int) -> dict[str, Any]:
    """``runs`` runs, ``concurrency`` at a time, round-robin over ``urls``."""
    gate = asyncio.Semaphore(concurrency)

    async def bounded(i: int) -> tuple[float, bool]:
        async with gate:
            return await _one_run(urls[i % len(urls)], graph_id)

    started = time.perf_counter()
    results = await asyncio.gather(*(bounded(i) for i in range(runs)))
    wall = time.perf_counter() - started
    latencies = sorted(s for s, _ in results)
    cuts = statistics.quantiles(latencies, n=100)
    return {"servers": len(urls), "runs": runs, "concurrency": concurrency,
            "ok": sum(ok for _, ok in results), "runs_per_s": round(runs / wall, 2),
            "p50_ms": round(cuts[49] * 1000, 1), "p95_ms": round(cuts[94] * 1000, 1)}


def measure(servers: int, runs: int, concurrency: int, pg: str, redis: str) -> dict[str, Any]:
    """Start ``servers`` processes on a fresh database, warm up, then time ``runs`` runs."""
    venv = server_venv(REPO)
    graph_id = next(iter(json.loads((REPO / "langgraph.json").read_text())["graphs"]))
    with tempfile.TemporaryDirectory(prefix="server-throughput-") as tmp:
        config = write_config(REPO, Path(tmp) / "aegra.json", {})
        env = server_env(fresh_database(pg, prefix="bench"), redis, {})
        for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LANGGRAPH_LOOP_MODEL"):
            env.pop(key, None)  # the served graph's offline scripted model
        with serving(venv, config, [env] * servers, Path(tmp)) as procs:
            urls = [p.url for p in procs]
            asyncio.run(_drive(urls, graph_id, 2 * concurrency, concurrency))  # warm-up
            return asyncio.run(_drive(urls, graph_id, runs, concurrency))


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    lines = ["| server processes | runs | in flight | completed | runs/s | p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['servers']} | {r['runs']} | {r['concurrency']} | {r['ok']} | "
              f"{r['runs_per_s']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI: print the table and write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_throughput")
    parser.add_argument("--json", default="benchmarks/results/server_throughput.json")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--servers", default="1,2")
    args = parser.parse_args(argv)
    with pg_uri() as pg, redis_url() as redis:
        rows = [measure(int(n), args.runs, args.concurrency, pg, redis)
                for n in args.servers.split(",")]
    print("### Aegra throughput: langgraph.json's graph, scripted model\n")
    print(table(rows))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
