"""The HTTP connection protocol: connections counted where they open and close (`http` of
`_nodes/stats`), and each request's head held to `http.max_header_size` while it is read.

Elasticsearch counts channels (`current_open`, `total_opened`), not requests: a keep-alive
connection carries many requests and an idle one still counts as open. An ASGI middleware sees
only requests (the `http` scope of each), so the count is taken one level lower, in uvicorn's
protocol object, which exists exactly as long as its TCP connection: uvicorn is given a subclass
of its httptools protocol (the one it picks itself: httptools is a dependency) whose
`connection_made`/`connection_lost` count into the node's `HttpConnections`. (uvicorn's own
`server_state.connections` holds the open ones but no running total, and belongs to the server
object, which the app does not see.)

**Header size.** httptools keeps no limit of its own: it gathers a header's value whatever its
length before uvicorn sees it, so a 1 MiB header was read, kept and answered. Here the bytes of a
request's head (beyond its URL) are counted as the socket delivers them: once past
`http.max_header_size` (16kb, as in Elasticsearch) the parser is given no more, the request is
answered as Elasticsearch's netty transport answers it, 400 `too_long_http_header_exception`
("HTTP header is larger than 16384 bytes."), and the connection is closed (what follows the head
cannot be read as a request). So a head holds at most the limit and one read of the socket.
Before closing, what the client is still sending is read and dropped for a moment (a lingering
close, bounded in bytes and time): closed at once, the socket would answer the rest with a
reset, which can destroy the answer before the client reads it.
"""

from __future__ import annotations

import asyncio
import threading
from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from leafsearch.errors import ElasticError

#: `http.max_header_size`'s default, as in Elasticsearch.
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
#: The request line's method, version and line ends, beside its URL: not header bytes.
_REQUEST_LINE_SLACK = 64
#: What a refused head's connection still reads and drops before it closes, at most.
_LINGER_BYTES = 8 << 20
_LINGER_SECONDS = 2.0


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


#: The scope key of the request's transport (a streamed response writes to its socket).
TRANSPORT = "leafsearch.transport"


def counting_protocol(
    connections: HttpConnections, max_header_size: int = DEFAULT_MAX_HEADER_SIZE
) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol class, counting into `connections` and refusing request heads
    whose headers pass `max_header_size` bytes; pass it as `uvicorn.Config(http=...)`."""

    class Counting(HttpToolsProtocol):
        #: Bytes of the current request's head read so far; None while its body is read.
        _head_bytes: int | None = 0
        #: Bytes of the current request's header lines, as netty counts them (name: value).
        _header_bytes = 0
        #: Once a head is refused: how much more of what the client sends is read and dropped.
        _lingering: int | None = None

        def connection_made(self, transport: Any) -> None:
            connections.opened()
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            connections.closed()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._lingering is not None:
                self._lingering -= len(data)
                if self._lingering <= 0:
                    self.transport.close()
                return
            if self._head_bytes is not None:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._head_bytes is None or self._lingering is not None or self.transport.is_closing():
                return
            # A header still arriving, which the parser gathers whatever its length before
            # `on_header` sees it: the head read so far (beyond the URL) is bounded too.
            url = len(getattr(self, "url", b""))
            if self._head_bytes - url > max_header_size + _REQUEST_LINE_SLACK:
                self._refuse_head()

        def on_message_begin(self) -> None:
            self._header_bytes = 0
            super().on_message_begin()
            # A streamed response hands its plain socket to the process that renders it (app.py).
            self.scope[TRANSPORT] = self.transport  # type: ignore[literal-required]

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_bytes += len(name) + 2 + len(value)
            if self._header_bytes > max_header_size:
                # Stops the parser, and uvicorn answers its failure with `send_400_response`.
                raise _HeaderTooLarge
            super().on_header(name, value)

        def send_400_response(self, msg: str) -> None:
            if self._header_bytes > max_header_size:
                self._refuse_head()
            else:
                super().send_400_response(msg)

        def on_headers_complete(self) -> None:
            self._head_bytes = None
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._head_bytes = 0  # what comes next is the next request's head
            super().on_message_complete()

        def _refuse_head(self) -> None:
            """Answer 400 as netty's decoder failure is answered, then close after a lingering
            read; if an earlier pipelined request is still being answered (a reply now would
            overtake it), or the connection cannot be half closed (TLS), close at once."""
            if self.cycle is not None and not self.cycle.response_complete:
                self.transport.close()
                return
            error = ElasticError(
                f"HTTP header is larger than {max_header_size} bytes.",
                status=400,
                error_type="too_long_http_header_exception",
            )
            self.transport.write(_response(error, self.server_state.default_headers))
            if not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()
            self._lingering = _LINGER_BYTES
            self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    return Counting


class _HeaderTooLarge(Exception):
    """Raised in the parser's header callback once the headers pass the limit: the parser stops."""


def _response(error: ElasticError, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    body = orjson.dumps(error.body())
    head = [b"HTTP/1.1 %d %s\r\n" % (error.status, HTTPStatus(error.status).phrase.encode())]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"x-elastic-product: Elasticsearch\r\n",
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body
