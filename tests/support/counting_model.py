"""The loopback model for the Aegra scale-out tests: scripted by the user's message, logged.

``python -m tests.support.counting_model --port N --dir DIR`` serves the OpenAI Chat
Completions API (:class:`tests.support.openai_server.OpenAIServer`) and appends one
JSON line per request to ``DIR/model.jsonl``: ``{"scenario", "thread", "n_messages",
"last_role", "server"}`` (``server``: the request's ``user`` field). Replies:

- ``"crash N tools"``: two parallel calls, ``step(N:quick)`` and the gated
  ``step(N:slow)``; after the results, ``"Done."``;
- ``"crash N model"``: two quick parallel steps; the answer after them waits until
  ``DIR/gate`` exists (so the run is held inside a model call);
- ``"approve N"``: one call of the approval-gated ``notify(N:notify)``, then ``"Done."``;
- anything else: :func:`tests.support.openai_server.auto_reply`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.openai_server import JSON, OpenAIServer, Reply, auto_reply, text, tool_calls

SCENARIO = re.compile(r"^(crash|approve) (\d+)(?: (tools|model))?")
GATE_TIMEOUT_S = 300.0


def scenario(body: JSON) -> tuple[str, int, str] | None:
    """``(kind, thread number, mode)`` named by the first user message, if any."""
    first = next((m for m in body.get("messages") or [] if m.get("role") == "user"), None)
    found = SCENARIO.match(str((first or {}).get("content") or ""))
    return (found[1], int(found[2]), found[3] or "") if found else None


def reply(body: JSON, gate: Path) -> Reply:
    """The scripted answer for one request (see the module docstring)."""
    named = scenario(body)
    if named is None:
        return auto_reply(body)
    kind, n, mode = named
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        if mode == "model":
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return text("Done.")
    if kind == "approve":
        return tool_calls([("notify", {"label": f"{n}:notify"})])
    if mode == "tools":
        return tool_calls([("step", {"label": f"{n}:quick"}),
                           ("step", {"label": f"{n}:slow", "gated": True})])
    return tool_calls([("step", {"label": f"{n}:a"}), ("step", {"label": f"{n}:b"})])


class CountingModel(OpenAIServer):
    """An :class:`OpenAIServer` that logs every request to ``DIR/model.jsonl``."""

    def __init__(self, directory: Path, **kwargs: Any) -> None:
        super().__init__(default=lambda body: reply(body, directory / "gate"), **kwargs)
        self.log = directory / "model.jsonl"
        self._log_lock = threading.Lock()

    def _next(self, body: JSON) -> tuple[int, Reply]:
        named = scenario(body)
        messages = body.get("messages") or []
        line = {"scenario": named[0] if named else None, "thread": named[1] if named else None,
                "n_messages": len(messages),
                "last_role": messages[-1].get("role") if messages else None,
                "server": body.get("user"),
                "t": time.time()}
        with self._log_lock, self.log.open("a") as out:
            out.write(json.dumps(line) + "\n")
        return super()._next(body)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description="scripted, logging loopback model")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    server = CountingModel(args.dir, port=args.port)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(lambda url: print(f"counting model on {url}", flush=True))


if __name__ == "__main__":
    main()
