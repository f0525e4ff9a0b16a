"""Graph pictures that render offline: Mermaid text always, PNG via mermaidx or graphviz.

Example:
    >>> source = mermaid(example_agent())
    >>> "loop_detector" in source and "respond(respond)" in source
    True
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from langgraph_loop.app.agent import GATED_TOOLS, TOOLS
from langgraph_loop.app.env import UsageError
from langgraph_loop.builder import create_loop_agent
from langgraph_loop.core.config import Approval, Compaction, Iterations, Judge
from langgraph_loop.scripted import ScriptedChatModel

__all__ = ["PICTURE", "Report", "example_agent", "mermaid", "png_bytes", "render_png", "write_picture"]


class Report(BaseModel):
    """The example agent's structured answer (``response_format``, read by ``respond``)."""

    answer: str


def example_agent() -> Any:
    """A loop agent with every optional node (judge, approval, compaction, respond), for
    pictures."""
    return create_loop_agent(ScriptedChatModel(), TOOLS,
                             iterations=Iterations(judge=Judge(model=ScriptedChatModel())),
                             approval=Approval(tools=GATED_TOOLS),
                             compaction=Compaction(max_tokens=8000), response_format=Report)


def mermaid(agent: Any) -> str:
    """The graph as Mermaid text."""
    return str(agent.get_graph().draw_mermaid())


def png_bytes(agent: Any, source: str | None = None) -> bytes:
    """The graph as PNG bytes, rendered offline (mermaidx from the Mermaid ``source``,
    default ``mermaid(agent)``; else pygraphviz from the graph)."""
    try:  # optional (the [png] extra): imported only when a PNG is asked for
        import mermaidx  # noqa: PLC0415
    except ImportError:
        mermaidx = None
    if mermaidx is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "graph.png"
            mermaidx.render(mermaid(agent) if source is None else source).save(str(out))
            return out.read_bytes()
    try:
        return bytes(agent.get_graph().draw_png())
    except ImportError as exc:
        raise UsageError("no PNG renderer is installed",
                         hint="pip install 'langgraph-loop[png]' (mermaidx, or pygraphviz), or "
                              "run `langgraph-loop graph` without --png for Mermaid text") from exc


def render_png(agent: Any, path: Path) -> None:
    """Write the graph's PNG to ``path``."""
    path.write_bytes(png_bytes(agent))


PICTURE = Path("notebooks") / "graph"
"""The committed picture: ``graph.mmd`` (the Mermaid source) and ``graph.png`` drawn from it."""


def write_picture(base: Path = PICTURE) -> tuple[Path, Path]:
    """Write ``<base>.mmd`` (what the current graph draws) and ``<base>.png`` rendered from it
    (``make picture`` runs this for ``notebooks/graph``)."""
    agent = example_agent()
    source = mermaid(agent)
    mmd, png = base.with_suffix(".mmd"), base.with_suffix(".png")
    mmd.write_text(source)
    png.write_bytes(png_bytes(agent, source))
    return mmd, png
