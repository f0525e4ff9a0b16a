"""One long checkpointed thread (issue 42): what a turn, a ``get_state``, the database and the
process's memory cost as one SQLite thread grows to 500 tool rounds of 5-20 KB coding outputs,
10 rounds per turn, for langgraph-loop (without and with compaction) and ``create_agent``; and
what ``import langgraph_loop`` costs beside ``import langchain.agents``.

Each system runs in its own process (``--child``), so its peak memory is its own; every time is
CPU time (``time.process_time``: user + system of the process, steadier than wall time on a
shared machine) and every figure at a mark is a median:

- **turn ms**: CPU of one 10-round ``invoke`` (a user message, 10 tool rounds, the answer): the
  median of the turns ending at the mark and the two before it; **start** is the median of the
  first three turns (rounds 10-30), and **×start** a mark's turn over it;
- **get_state ms**: CPU of ``get_state`` on the thread, median of 5;
- **loads/turn**: how many times the turn ending at the mark read the thread's history
  (``get_delta_channel_history``: a replay of the writes since the last snapshot; a
  deterministic count, 0 for ``create_agent``, whose checkpoints hold the whole list);
- **queries**: the SQL statements one ``get_state`` runs (a deterministic count);
- **floor ms**: the same messages' ``get_state`` in a bare ``StateGraph(MessagesState)`` (one
  node, LangGraph's plain messages channel, one checkpoint holding them all, the same saver),
  median of 5; and **deserialize ms**: the saver's serializer reading those messages alone:
  what any ``get_state`` of this thread costs, whatever the graph;
- **db MB**: the SQLite file after ``PRAGMA wal_checkpoint(TRUNCATE)``;
- **peak RSS MB**: the process's peak resident memory so far (``ru_maxrss``), the thread's
  outputs (precomputed) included;
- **import**: CPU of a fresh ``python -c "import X"``, the two modules interleaved, median.

Example:
    >>> model = TurnModel()
    >>> model.goal = 1
    >>> bound = model.bind_tools([read_tool(["out"])])
    >>> [c["args"] for c in bound.invoke("go").tool_calls], bound.invoke("go").content
    ([{'path': 'src/module_0.py', 'round': 0}], 'Done: 1 rounds so far.')
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from benchmarks.systems import coding_output, input_tokens, message_tokens

ROUNDS_PER_TURN = 10
MARKS = (10, 30, 50, 100, 250, 500)
QUICK_MARKS = (10, 20, 30)
SYSTEMS = ("langgraph-loop", "langgraph-loop+compaction", "create_agent")
COMPACT_AT = 60_000
"""``Compaction.max_tokens`` of the compacting system (about 20 rounds of these outputs)."""
IMPORTS = ("langchain.agents", "langgraph_loop")


class TurnModel(BaseChatModel):
    """Calls ``read`` once per model call until ``goal`` rounds are done on the thread, then
    answers (with no tools bound, as the summarizer or a final answer, it summarises); call ids
    are unique on the thread; usage about 4 characters per token, as in ``systems.py``."""

    goal: int = 0
    made: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Format tools as OpenAI tool schemas and bind them, like a real provider."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if not kwargs.get("tools") or kwargs.get("tool_choice") == "none":
            message = AIMessage(f"Summary: {self.made} files read so far.")
        elif self.made < self.goal:
            call = {"name": "read", "args": {"path": f"src/module_{self.made}.py", "round": self.made},
                    "id": f"call_{self.made}", "type": "tool_call"}
            message, self.made = AIMessage("", tool_calls=[call]), self.made + 1
        else:
            message = AIMessage(f"Done: {self.made} rounds so far.")
        n_in, n_out = input_tokens(messages), message_tokens(message)
        message.usage_metadata = {"input_tokens": n_in, "output_tokens": n_out,
                                  "total_tokens": n_in + n_out}
        message.response_metadata = {"model_name": "scripted"}
        return ChatResult(generations=[ChatGeneration(message=message)])


def read_tool(outputs: Sequence[str]) -> BaseTool:
    """``read(path, round)``: the precomputed output of that round."""

    @tool("read")
    def read(path: str, round: int) -> str:
        """Read a file of the project."""
        return outputs[round]

    return read


class CountingSaver(SqliteSaver):
    """A ``SqliteSaver`` that counts the history replays it serves (``loads``)."""

    loads = 0

    def get_delta_channel_history(self, *, config: Any, channels: Sequence[str]) -> Any:
        self.loads += 1
        return super().get_delta_channel_history(config=config, channels=channels)


def build(system: str, model: TurnModel, tools: list[BaseTool], saver: SqliteSaver) -> Any:
    """The compiled agent of ``system`` on ``saver``."""
    if system == "create_agent":
        from langchain.agents import create_agent

        return create_agent(model, tools, checkpointer=saver)
    from langgraph_loop import Compaction, create_loop_agent

    compaction = Compaction(max_tokens=COMPACT_AT) if system.endswith("+compaction") else None
    return create_loop_agent(model, tools, checkpointer=saver, compaction=compaction)


def cpu_ms(action: Callable[[], object]) -> float:
    """CPU milliseconds ``action`` takes in this process."""
    start = time.process_time()
    action()
    return (time.process_time() - start) * 1000


def db_mb(saver: SqliteSaver, path: Path) -> float:
    """The database file after folding the write-ahead log into it, MB."""
    with saver.lock:
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists()) / 1e6


def queries(conn: sqlite3.Connection, action: Callable[[], object]) -> int:
    """The SQL statements ``action`` runs on ``conn``."""
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        action()
    finally:
        conn.set_trace_callback(None)
    return len(seen)


def floors(saver: SqliteSaver, messages: list[BaseMessage]) -> dict[str, float]:
    """``get_state`` of ``messages`` in a bare ``StateGraph`` on ``saver``, and deserializing them
    alone (CPU ms, medians of 5); the bare thread is deleted after."""
    builder = StateGraph(MessagesState)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    bare, config = builder.compile(checkpointer=saver), RunnableConfig(configurable={"thread_id": "floor"})
    bare.update_state(config, {"messages": messages})
    blob = saver.serde.dumps_typed(messages)
    out = {"floor_ms": statistics.median(cpu_ms(lambda: bare.get_state(config)) for _ in range(5)),
           "deserialize_ms": statistics.median(cpu_ms(lambda: saver.serde.loads_typed(blob))
                                               for _ in range(5))}
    saver.delete_thread("floor")
    return out


def grow(system: str, marks: Sequence[int], low: int, high: int) -> dict[str, Any]:
    """Grow one thread of ``system`` to the last mark; its figures at every mark."""
    rounds = marks[-1]
    outputs = [coding_output(42, i, low, high) for i in range(rounds)]
    model, rows, turns = TurnModel(), [], []
    with tempfile.TemporaryDirectory(prefix="lgl-long-") as directory:
        path = Path(directory) / "thread.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = CountingSaver(conn)
        saver.setup()
        agent = build(system, model, [read_tool(outputs)], saver)
        config: Any = {"configurable": {"thread_id": "long"}, "recursion_limit": 1_000}
        for turn in range(rounds // ROUNDS_PER_TURN):
            model.goal = (turn + 1) * ROUNDS_PER_TURN
            request = {"messages": [HumanMessage(f"Turn {turn}: read the next {ROUNDS_PER_TURN} files.")]}
            saver.loads = 0
            turns.append(cpu_ms(lambda r=request: agent.invoke(r, config)))
            loads = saver.loads
            if model.goal not in marks:
                continue
            state = agent.get_state(config)
            assert state.values["messages"][-1].content == f"Done: {model.goal} rounds so far.", system
            rows.append({"rounds": model.goal, "turn_ms": statistics.median(turns[-3:]),
                         "get_state_ms": statistics.median(cpu_ms(lambda: agent.get_state(config))
                                                           for _ in range(5)),
                         "messages": len(state.values["messages"]), "loads_per_turn": loads,
                         "queries": queries(conn, lambda: agent.get_state(config)),
                         "db_mb": db_mb(saver, path),
                         "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                         **floors(saver, state.values["messages"])})
        conn.close()
    start = statistics.median(turns[:3])
    return {"system": system, "start_turn_ms": start, "turn_ms": turns,
            "marks": [{**row, "x_start": row["turn_ms"] / start} for row in rows]}


def import_cpu_ms(module: str) -> float:
    """CPU milliseconds of a fresh interpreter importing ``module``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def import_times(reps: int) -> dict[str, float]:
    """Median import CPU of each of ``IMPORTS``, the imports taking turns."""
    samples: dict[str, list[float]] = {m: [] for m in IMPORTS}
    for _ in range(reps):
        for module in IMPORTS:
            samples[module].append(import_cpu_ms(module))
    return {m: statistics.median(s) for m, s in samples.items()}


def run_child(system: str, marks: Sequence[int], low: int, high: int) -> dict[str, Any]:
    """``grow`` in a fresh process (``--child``): its own peak memory."""
    command = [sys.executable, "-m", "benchmarks.long_thread", "--child", system,
               "--marks", ",".join(map(str, marks)), "--sizes", f"{low},{high}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{system} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def report(results: list[dict[str, Any]], imports: dict[str, float]) -> list[str]:
    """The markdown tables and the issue-42 targets."""
    lines = ["| system | rounds | messages | turn ms (×start) | loads/turn | get_state ms | queries "
             "| floor ms | deserialize ms | db MB | peak RSS MB |", "|---" * 11 + "|"]
    for result in results:
        lines += [f"| {result['system']} | {m['rounds']} | {m['messages']} | {m['turn_ms']:.0f} "
                  f"({m['x_start']:.2f}×) | {m['loads_per_turn']} | {m['get_state_ms']:.1f} | "
                  f"{m['queries']} | {m['floor_ms']:.1f} | {m['deserialize_ms']:.1f} | {m['db_mb']:.2f} | "
                  f"{m['peak_rss_mb']:.0f} |" for m in result["marks"]]
    base, ours = imports[IMPORTS[0]], imports[IMPORTS[1]]
    lines += ["", f"import CPU ms: langchain.agents {base:.0f}, langgraph_loop {ours:.0f} "
              f"({ours / base:.2f}×)", "", *targets(results, ours / base)]
    return lines


def _at(result: dict[str, Any], rounds: int) -> dict[str, Any] | None:
    return next((m for m in result["marks"] if m["rounds"] == rounds), None)


def targets(results: list[dict[str, Any]], import_ratio: float) -> list[str]:
    """Issue 42's targets, each with its measured value and PASS/FAIL (or not measured)."""
    by = {r["system"]: r for r in results}
    ours, peer = by.get("langgraph-loop"), by.get("create_agent")
    at250 = _at(ours, 250) if ours else None
    at500, peer500 = (_at(ours, 500) if ours else None), (_at(peer, 500) if peer else None)
    rows = [("turn at 250 rounds ≤ 1.5× start", at250 and at250["x_start"], 1.5, "{:.2f}×"),
            ("get_state at 250 rounds ≤ 10 ms", at250 and at250["get_state_ms"], 10, "{:.1f} ms"),
            ("db at 500 rounds ≤ 0.05× create_agent's",
             at500 and peer500 and at500["db_mb"] / peer500["db_mb"], 0.05, "{:.4f}×"),
            ("import ≤ 1.1× langchain.agents", import_ratio, 1.1, "{:.2f}×")]
    return [f"Target (issue 42) {name}: " + ("not measured" if value is None else
                                              f"{fmt.format(value)}: {'PASS' if value <= limit else 'FAIL'}")
            for name, value, limit, fmt in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"marks {QUICK_MARKS}, 3 import reps")
    parser.add_argument("--marks", help=f"comma-separated round counts (default {MARKS})")
    parser.add_argument("--only", default=",".join(SYSTEMS), help="comma-separated systems")
    parser.add_argument("--sizes", default="5000,20000", help="tool output size range, characters")
    parser.add_argument("--import-reps", type=int, default=9)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/long_thread.json"))
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    marks = tuple(int(m) for m in args.marks.split(",")) if args.marks else (
        QUICK_MARKS if args.quick else MARKS)
    if any(m % ROUNDS_PER_TURN for m in marks):
        parser.error(f"--marks must be multiples of {ROUNDS_PER_TURN}")
    low, high = (int(s) for s in args.sizes.split(","))
    if args.child:
        print(json.dumps(grow(args.child, marks, low, high)))
        return 0
    results = [run_child(system, marks, low, high) for system in args.only.split(",")]
    imports = import_times(3 if args.quick else args.import_reps)
    lines = report(results, imports)
    print(f"### One SQLite thread, {ROUNDS_PER_TURN} rounds per turn, {low}-{high} character outputs "
          "(CPU time)\n")
    print("\n".join(lines))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"marks": list(marks), "sizes": [low, high], "results": results,
                                     "imports_cpu_ms": imports, "targets": targets(
                                         results, imports[IMPORTS[1]] / imports[IMPORTS[0]])}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
