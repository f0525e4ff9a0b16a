"""Load the tools of the test MCP server (``tests/support/mcp_server.py``) over stdio through
``langchain-mcp-adapters``, holding one session open for the whole test.

The session is entered and left inside one background task, so the caller (e.g. a pytest
fixture whose set-up and tear-down run in different tasks) never crosses an anyio cancel scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_NAME = "tests"


def connection(notes: Path) -> dict[str, object]:
    """The stdio connection that starts ``python -m tests.support.mcp_server``."""
    env = {**os.environ, "MCP_NOTES_FILE": str(notes), "PYTHONPATH": str(REPO_ROOT)}
    return {"transport": "stdio", "command": sys.executable, "args": ["-m", "tests.support.mcp_server"],
            "cwd": str(REPO_ROOT), "env": env}


@contextlib.asynccontextmanager
async def mcp_session_tools(notes: Path) -> AsyncIterator[list[BaseTool]]:
    """The server's tools as LangChain tools, bound to one live stdio session."""
    client = MultiServerMCPClient({SERVER_NAME: connection(notes)})  # type: ignore[dict-item]
    loaded: asyncio.Future[list[BaseTool]] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with client.session(SERVER_NAME) as session:
                loaded.set_result(await load_mcp_tools(session, server_name=SERVER_NAME))
                await stop.wait()
        except BaseException as exc:
            if not loaded.done():
                loaded.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await loaded
    finally:
        stop.set()
        await task
