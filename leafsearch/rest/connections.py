"""HTTP connections counted where they open and close: `http` of `_nodes/stats`.

Elasticsearch counts channels (`current_open`, `total_opened`), not requests: a keep-alive
connection carries many requests and an idle one still counts as open. An ASGI middleware sees
only requests (the `http` scope of each), so the count is taken one level lower, in uvicorn's
protocol object, which exists exactly as long as its TCP connection: uvicorn is given a subclass
of the protocol it would pick itself whose `connection_made`/`connection_lost` count into the
node's `HttpConnections`. (uvicorn's own `server_state.connections` holds the open ones but no
running total, and belongs to the server object, which the app does not see.)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string


class HttpConnections:
    """Open and ever opened HTTP connections of one node (the event loop and readers share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current_open = 0
        self.total_opened = 0

    def opened(self) -> None:
        with self._lock:
            self.current_open += 1
            self.total_opened += 1

    def closed(self) -> None:
        with self._lock:
            self.current_open -= 1

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"current_open": self.current_open, "total_opened": self.total_opened, "clients": []}


def counting_protocol(connections: HttpConnections, http: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class `http` (its `--http` choice), counting into `connections`;
    pass it as `uvicorn.Config(http=...)`."""
    base: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS[http])

    class Counting(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: Any) -> None:
            connections.opened()
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            connections.closed()
            super().connection_lost(exc)

    return Counting
