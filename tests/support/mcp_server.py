"""A real MCP server for tests (the ``mcp`` package's FastMCP), served over stdio.

Run as ``python -m tests.support.mcp_server`` from the repository root; the
``mcp_tools`` fixture in ``tests/conftest.py`` starts it and loads its tools through
``langchain-mcp-adapters``. Tools:

- ``lookup(key)``: read-only (``readOnlyHint=True``): the same answer for the same key.
- ``search_blocks(query)``: returns three text content blocks (the adapter gives each
  block a fresh random ``id``, so identical results differ unless normalised).
- ``big_output(size=200000)``: one text block of ``size`` characters.
- ``record_note(note)``: a side effect: appends the note to the file named by
  ``$MCP_NOTES_FILE`` and confirms it.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import TextContent, ToolAnnotations

server = FastMCP("langgraph-loop-tests", log_level="WARNING")

FACTS = {"capital": "Paris", "river": "Seine"}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def lookup(key: str) -> str:
    """Look a fact up by key (read-only)."""
    return FACTS.get(key, f"no fact for {key!r}")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def search_blocks(query: str) -> list[TextContent]:
    """Search: the hits come back as separate text blocks."""
    return [TextContent(type="text", text=f"hit {i} for {query}") for i in (1, 2, 3)]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def big_output(size: int = 200_000) -> str:
    """Return a very large text."""
    return ("0123456789" * (size // 10 + 1))[:size]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def record_note(note: str) -> str:
    """Record a note (a side effect on disk)."""
    path = Path(os.environ["MCP_NOTES_FILE"])
    with path.open("a", encoding="utf-8") as handle:
        handle.write(note + "\n")
    return f"recorded: {note}"


if __name__ == "__main__":
    server.run("stdio")
