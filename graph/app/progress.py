"""Live progress for ``langgraph-loop run``: iteration, model calls, tool calls, tokens, warnings.

Example:
    >>> p = Progress()
    >>> p.feed(("updates", {"model": {"messages": [], "usage": {"total_tokens": 12}}}))
    >>> p.line()
    'iteration 1 · model calls 1 · tool calls 0 · tokens 12 · warnings 0'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live

__all__ = ["Progress", "run_with_progress"]


@dataclass
class Progress:
    """Counters updated from ``stream_mode=["updates", "custom"]`` parts."""

    iterations: int = 1
    model_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    warnings: int = 0

    def feed(self, part: tuple[str, Any]) -> None:
        """Update the counters from one streamed part."""
        mode, data = part
        if mode == "custom" and isinstance(data, dict):
            self.warnings += data.get("event") == "loop_warning"
            self.tool_calls += data.get("event") == "tool_call"
            return
        if mode != "updates" or not isinstance(data, dict):
            return
        for node, update in data.items():
            if not isinstance(update, dict):
                continue
            if node == "model" and "messages" in update:
                self.model_calls += 1
                self.tokens = (update.get("usage") or {}).get("total_tokens", self.tokens)
            if "iteration" in update:
                self.iterations = update["iteration"]

    def line(self) -> str:
        """The one-line summary."""
        return (f"iteration {self.iterations} · model calls {self.model_calls} · tool calls "
                f"{self.tool_calls} · tokens {self.tokens} · warnings {self.warnings}")


def run_with_progress(agent: Any, inputs: Any, config: Any, console: Console,
                      progress: Progress | None = None, context: Any = None) -> dict[str, Any]:
    """Stream a run, showing a live progress line; returns the final state.

    The live line is redrawn in place on a terminal; the final counts are printed once
    when the run ends (also when the output is not a terminal). A run resumed after an
    approval pause passes the ``progress`` of its first part, so the counts go on from
    there instead of starting again at zero. ``context``: the run's per-run overrides.
    """
    progress = progress if progress is not None else Progress()
    with Live(progress.line(), console=console, transient=True, refresh_per_second=8) as live:
        for part in agent.stream(inputs, config, stream_mode=["updates", "custom"], context=context):
            progress.feed(part)
            live.update(progress.line())
    console.print(progress.line(), style="dim", markup=False, highlight=False)
    return dict(agent.get_state(config).values)
