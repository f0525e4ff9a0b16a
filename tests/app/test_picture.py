"""The committed graph picture is what the current graph draws.

``notebooks/graph.mmd`` is the Mermaid source of ``notebooks/graph.png`` (the README's
picture); ``make picture`` rewrites both after a change to the graph.
"""

from __future__ import annotations

import struct
from pathlib import Path

from langgraph_loop.app.picture import example_agent, mermaid

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_the_committed_mermaid_source_is_what_the_graph_draws() -> None:
    committed = (NOTEBOOKS / "graph.mmd").read_text()
    assert committed == mermaid(example_agent()), (
        "notebooks/graph.mmd is stale: run `make picture` and commit graph.mmd and graph.png")
    edges = {line.strip() for line in committed.splitlines() if "--" in line}
    assert "tools --> router;" not in edges
    routes = {line.strip() for line in committed.splitlines() if "-.->" in line}
    assert {"model -.-> respond;", "respond -.-> judge;", "respond -.-> tools;"} <= routes  # response_format
    assert {"tools -.-> compaction;", "tools -.-> judge;"} <= routes  # a reply that also answered ends


def test_the_png_next_to_it_is_a_rendered_picture() -> None:
    data = (NOTEBOOKS / "graph.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 200 and height > 300
