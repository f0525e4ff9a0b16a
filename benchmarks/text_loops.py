"""The text rule on real replies and chat-style markdown (issue 31): every assistant text of the
trajectory files (``--data``, default ``../shared/data``) and of ``tests/data/markdown_answers.json``,
streamed in ``--piece``-character pieces through ``StreamText`` as the ``model`` node streams a
reply. Prints, per source: fires on replies that are not loops (the target: 0), and of the looping
replies how many the cut spares (cut before their end; target ≥ 90 %) and the share of their text
it spares. A reply of the trajectories is a loop when listed in ``LOOPS`` (read by hand: every
reply the rule ever fired on, before and after issue 31).

Example:
    >>> stream_cut("I will fix the typo now. " * 40, 7) is not None, stream_cut("| a | b |\\n", 7)
    (True, None)
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.report import table
from langgraph_loop.nodes.stream_cut import StreamText

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "markdown_answers.json"
LOOPS = {("minisweagent_gemini-3-pro_swebench-verified_dev.json.gz", "sympy__sympy-15976", 69)}
"""(file, run, message index) of the recorded replies that loop: gemini-3-pro spelling
``msubsup`` over and over (159,056 characters)."""


def stream_cut(text: str, piece: int) -> int | None:
    """Where the stream of ``text`` in ``piece``-character pieces is cut (None: it streams whole)."""
    feed = StreamText()
    return next((i + piece for i in range(0, len(text), piece) if feed.add(text[i:i + piece])), None)


def replies(path: Path) -> Iterator[tuple[str, bool]]:
    """(text, loops) of every assistant text in a trajectory file (τ-bench's or the coding format)."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    for run in data if isinstance(data, list) else data["simulations"]:
        name = str(run.get("id", run.get("task_id")))
        for i, message in enumerate(run.get("traj") or run.get("messages") or ()):
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                yield message["content"], (path.name, name, i) in LOOPS


def main(argv: list[str] | None = None) -> int:
    """Measure every source; print one table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.text_loops",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="a directory of trajectory files (.json.gz)")
    parser.add_argument("--piece", type=int, default=7, help="characters per streamed piece (default 7)")
    args, started, rows = parser.parse_args(argv), time.perf_counter(), []
    corpus = [(a["text"], a["loop"]) for a in json.loads(CORPUS.read_text())["answers"]]
    sources = [(p.name, list(replies(p))) for p in sorted(args.data.glob("*.json.gz"))]
    for name, texts in [*sources, (f"{CORPUS.name} (written for these tests)", corpus)]:
        clock = time.perf_counter()
        cuts = [(stream_cut(text, args.piece), text, loops) for text, loops in texts if text]
        fires = sum(cut is not None for cut, _, loops in cuts if not loops)
        looping = [(cut, len(text)) for cut, text, loops in cuts if loops]
        spared = [1 - cut / size for cut, size in looping if cut is not None]
        rows.append([name, len(cuts), len(cuts) - len(looping), fires, len(looping), len(spared),
                     f"{len(spared) / len(looping):.0%}" if looping else "–",
                     f"{sum(spared) / len(spared):.0%}" if spared else "–",
                     f"{time.perf_counter() - clock:.1f}"])
    print(table(f"### The text rule, replies streamed in {args.piece}-character pieces", [
        "source", "replies", "not loops", "cut (not loops)", "looping", "cut (looping)", "looping spared",
        "their text spared (mean)", "seconds"], rows))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
