"""Where a turn's growth goes on a long thread (issue 42): the pieces of a 10-round turn that
grow with the thread, each measured alone at two lengths of the ``long_thread.py`` thread (one
SQLite thread of 5-20 KB outputs), and what one turn does of each (deterministic counts).

Two threads are grown in this process (``--marks``, default 30 and 250 rounds); every piece
runs on both in turns (A, B, A, B, ...), CPU time (``time.process_time``), median of ``--reps``,
so a shared machine's noise falls on both alike. Then one more turn on each thread is counted:
bytes the saver serialized and deserialized, full copies (snapshots) written, checkpoints the
load walked, model calls and the messages each was sent. A piece's share of a turn is its
growth per occurrence times its count per turn. Whose each piece is, and whether
``create_agent`` pays it too: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import langgraph.checkpoint.sqlite as sqlite_saver
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite._delta import DELTA_STAGE1_SQL
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages

from benchmarks.long_thread import ROUNDS_PER_TURN, CountingSaver, TurnModel, build, read_tool
from benchmarks.systems import coding_output

Piece = Callable[[], object]


def _stage1(conn: sqlite3.Connection, checkpoint_id: str) -> sqlite3.Cursor:
    """The installed saver's stage-1 query from ``checkpoint_id`` (its rows end in ``type,
    checkpoint``): a recursive walk of the parents since 3.1, a range scan before."""
    key = ("long", "", checkpoint_id, "long", "")
    return conn.execute(DELTA_STAGE1_SQL, key[:DELTA_STAGE1_SQL.count("?")])


class Thread:
    """One ``langgraph-loop`` thread of the benchmark grown to ``rounds`` on its own file."""

    def __init__(self, rounds: int, directory: str, outputs: Sequence[str]) -> None:
        self.conn = sqlite3.connect(Path(directory) / f"t{rounds}.sqlite", check_same_thread=False)
        self.saver = CountingSaver(self.conn)
        self.saver.setup()
        self.model = TurnModel()
        self.agent = build("langgraph-loop", self.model, [read_tool(outputs)], self.saver)
        self.config: Any = {"configurable": {"thread_id": "long"}, "recursion_limit": 1_000}
        while self.model.goal < rounds:
            self.turn()

    def turn(self) -> None:
        self.model.goal += ROUNDS_PER_TURN
        self.agent.invoke({"messages": [HumanMessage(f"Read the next {ROUNDS_PER_TURN} files.")]},
                          self.config)

    def pieces(self) -> dict[str, Piece]:
        """The growing pieces of a turn, each a callable over this thread."""
        tip = self.saver.get_tuple(self.config)
        cid = tip.config["configurable"]["checkpoint_id"]
        messages = self.agent.get_state(self.config).values["messages"]
        walk = list(_stage1(self.conn, cid))
        snapshot = next((row for row in walk[1:]  # the messages' seed (else the root): a load's end
                         if "messages" in self.saver.serde.loads_typed(row[-2:])["channel_values"]), walk[-1])
        bare = StateGraph(MessagesState)
        bare.add_node("noop", lambda state: {})
        bare.add_edge(START, "noop")
        floor, at = bare.compile(checkpointer=self.saver), {"configurable": {"thread_id": "floor"}}
        floor.update_state(at, {"messages": messages})
        blob = self.saver.serde.dumps_typed(messages)[1]
        self.conn.execute("CREATE TABLE IF NOT EXISTS scratch (k INTEGER PRIMARY KEY, v BLOB)")
        bound = TurnModel(goal=10**9).bind_tools([read_tool(["x"])])
        new = AIMessage("", tool_calls=[{"name": "read", "args": {"path": "p", "round": 0}, "id": "n"}],
                        id="new")

        def ancestors() -> None:  # LangGraph's stage-1 query, read up to the snapshot row
            for row in _stage1(self.conn, cid):
                if row[0] == snapshot[0]:
                    break

        def insert() -> None:
            with self.conn:
                self.conn.execute("INSERT OR REPLACE INTO scratch VALUES (1, ?)", (blob,))

        return {
            "load: ancestor query to the snapshot (SQL)": ancestors,
            "load: the snapshot row by primary key (SQL)": lambda: self.conn.execute(
                "SELECT checkpoint FROM checkpoints WHERE thread_id = 'long' AND checkpoint_ns = '' "
                "AND checkpoint_id = ?", (snapshot[0],)).fetchone(),
            "load: deserializing the snapshot row": lambda: self.saver.serde.loads_typed(snapshot[-2:]),
            "load: whole (get_delta_channel_history)": lambda: self.saver.get_delta_channel_history(
                config=tip.config, channels=["messages", "call_log"]),
            "get_state (ours)": lambda: self.agent.get_state(self.config),
            "get_state floor (bare StateGraph, one row)": lambda: floor.get_state(at),
            "snapshot write: serializing the messages": lambda: self.saver.serde.dumps_typed(messages),
            "snapshot write: SQLite insert of that blob": insert,
            "chat model call (LangChain's invoke path)": lambda: bound.invoke(messages),
            "delta reducer, one write (ours, LangGraph's)": lambda: _messages_delta_reducer(
                messages, [[new]]),
            "add_messages, one write (create_agent's)": lambda: add_messages(messages, [new]),
        }

    def snapshots(self) -> int:
        """Checkpoints of the thread that hold a full copy of the messages."""
        return sum("messages" in c.checkpoint["channel_values"] for c in self.saver.list(self.config))

    def counts(self) -> dict[str, int]:
        """What one more turn does, counted."""
        counts = dict.fromkeys(("bytes serialized", "bytes deserialized", "checkpoints a load walked",
                                "model calls", "messages sent to the model"), 0)
        before, self.saver.loads = self.snapshots(), 0
        dumps, loads, generate = (JsonPlusSerializer.dumps_typed, JsonPlusSerializer.loads_typed,
                                  TurnModel._generate)
        walk = sqlite_saver.step_walk_with_row

        def counted_dumps(serde: JsonPlusSerializer, value: Any) -> tuple[str, bytes]:
            out = dumps(serde, value)
            counts["bytes serialized"] += len(out[1])
            return out

        def counted_loads(serde: JsonPlusSerializer, data: tuple[str, bytes]) -> Any:
            counts["bytes deserialized"] += len(data[1])
            return loads(serde, data)

        def counted_walk(**kwargs: Any) -> bool:
            counts["checkpoints a load walked"] += 1
            return walk(**kwargs)

        def counted_generate(model: TurnModel, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            counts["model calls"] += 1
            counts["messages sent to the model"] += len(messages)
            return generate(model, messages, *args, **kwargs)

        JsonPlusSerializer.dumps_typed, JsonPlusSerializer.loads_typed = counted_dumps, counted_loads  # type: ignore[method-assign,assignment]
        TurnModel._generate, sqlite_saver.step_walk_with_row = counted_generate, counted_walk  # type: ignore[method-assign,assignment]
        try:
            self.turn()
        finally:
            JsonPlusSerializer.dumps_typed, JsonPlusSerializer.loads_typed = dumps, loads  # type: ignore[method-assign]
            TurnModel._generate, sqlite_saver.step_walk_with_row = generate, walk  # type: ignore[method-assign]
        return {**counts, "loads": self.saver.loads, "full copies written": self.snapshots() - before}


def cpu_ms(piece: Piece) -> float:
    start = time.process_time()
    piece()
    return (time.process_time() - start) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--marks", default="30,250", help="two round counts (multiples of 10)")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args(argv)
    low, high = (int(m) for m in args.marks.split(","))
    outputs = [coding_output(42, i, 5000, 20000) for i in range(high + ROUNDS_PER_TURN)]
    with tempfile.TemporaryDirectory(prefix="lgl-growth-") as directory:
        threads = [Thread(low, directory, outputs), Thread(high, directory, outputs)]
        pieces = [t.pieces() for t in threads]
        samples: dict[str, list[list[float]]] = {name: [[], []] for name in pieces[0]}
        for _ in range(args.reps):
            for name in samples:
                for i in (0, 1):
                    samples[name][i].append(cpu_ms(pieces[i][name]))
        print(f"### A turn's growing pieces, {low} and {high} rounds (CPU ms, median of {args.reps})\n")
        print(f"| piece | {low} rounds | {high} rounds | growth |\n|---|---|---|---|")
        for name, (a, b) in samples.items():
            print(f"| {name} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | "
                  f"{statistics.median(b) - statistics.median(a):+.2f} |")
        counts = [t.counts() for t in threads]
        print(f"\n### One more 10-round turn, counted\n\n| count | after {low} | after {high} |")
        print("|---|---|---|")
        for name in counts[0]:
            print(f"| {name} | {counts[0][name]:,.0f} | {counts[1][name]:,.0f} |")
        for thread in threads:
            thread.conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
