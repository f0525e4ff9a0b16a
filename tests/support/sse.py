"""What the loopback model servers share: streaming server-sent events, recording how each
stream ended, and a threading server that stays quiet when a client hangs up.

Example:
    >>> log = StreamLog(request_no=1, total=3)
    >>> log.sent, log.closed_by_client
    (0, False)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "StreamLog", "send_events"]


@dataclass
class StreamLog:
    """One streamed answer: how many of its events were sent, and whether the client closed
    the connection before the last one."""

    request_no: int
    total: int
    sent: int = 0
    closed_by_client: bool = False


def send_events(handler: BaseHTTPRequestHandler, events: Sequence[bytes], log: StreamLog,
                delay: float, headers: Sequence[tuple[str, str]] = ()) -> None:
    """Send ``events`` as an event stream (``delay`` seconds apart) and close the connection,
    counting them in ``log`` and noting when the client closed the stream first."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    handler.close_connection = True
    for event in events:
        if delay and log.sent:
            time.sleep(delay)
        try:
            handler.wfile.write(event)
            handler.wfile.flush()
        except ConnectionError:  # the client closed the stream
            log.closed_by_client = True
            return
        log.sent += 1


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server that knows the scripted server object owning it (``owner``)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], owner: Any,
                 handler: type[BaseHTTPRequestHandler]) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client disconnects mid-response; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
