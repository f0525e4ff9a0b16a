"""Cut the vendored excerpts of mini-swe-agent runs (MIT) from ``../shared/data/``.

``benchmarks/data/minisweagent_gemini-3-pro_excerpts.json.gz`` holds a few replies of four
gemini-3-pro runs of ``minisweagent_gemini-3-pro_swebench-verified_dev.json.gz`` (see
``benchmarks/data/README.md``): each excerpt keeps the run's messages of replies ``first`` to
``last`` (inclusive) byte for byte, after its task prompt cut to its first line. The tests in
``tests/e2e/test_real_traces.py`` replay them.

Usage: ``python -m benchmarks.excerpts [SOURCE]`` rewrites the file.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["EXCERPTS", "OUT", "cut"]

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "data" / (
    "minisweagent_gemini-3-pro_swebench-verified_dev.json.gz")
OUT = Path(__file__).parent / "data" / "minisweagent_gemini-3-pro_excerpts.json.gz"

EXCERPTS: dict[str, tuple[int, int, str]] = {
    "astropy__astropy-13398": (16, 29, "failed: the same script, byte-identical output 3 times"
                               " between edits it never sees"),
    "django__django-13568": (0, 16, "solved: a file read 3 times alike, then again after a"
                             " write that names it"),
    "django__django-16100": (5, 17, "solved: edit and rerun, the script's output changes"),
    "sympy__sympy-15976": (17, 36, "solved: a no-op sed 4 times, the model's text loops, a test"
                           " failing alike 3 times before the real fix"),
}


def cut(simulation: dict[str, Any], first: int, last: int) -> dict[str, Any]:
    """The simulation with its task prompt's first line and replies ``first``..``last``."""
    messages = simulation["messages"]
    user = dict(messages[0])
    user["content"] = str(user["content"]).split("\n", 1)[0] + "\n[task prompt cut]"
    kept, reply = [user], -1
    for message in messages[1:]:
        if message["role"] == "assistant":
            reply += 1
        if first <= reply <= last:
            kept.append(message)
    return {**{k: v for k, v in simulation.items() if k != "messages"},
            "id": f"{simulation['id']} replies {first}-{last}", "messages": kept}


def main(argv: list[str] | None = None) -> int:
    """Write the excerpts file from the source file."""
    args = sys.argv[1:] if argv is None else argv
    source = Path(args[0]) if args else SOURCE
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    by_id = {s["id"]: s for s in data["simulations"]}
    header = {k: v for k, v in data["source"].items() if k != "files"}
    header["excerpts"] = {k: {"replies": [a, b], "why": why} for k, (a, b, why) in EXCERPTS.items()}
    header["files"] = [f for f in data["source"]["files"]
                       if any(f"/{k}/" in f["path"] for k in EXCERPTS)]
    out = {"source": header,
           "simulations": [cut(by_id[k], a, b) for k, (a, b, _) in EXCERPTS.items()]}
    with gzip.GzipFile(OUT, "wb", mtime=0) as handle:
        handle.write((json.dumps(out, indent=1, ensure_ascii=False) + "\n").encode())
    print(f"{OUT}: {OUT.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
