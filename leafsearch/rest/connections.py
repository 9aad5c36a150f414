"""The HTTP connection protocol: connections counted where they open and close (`http` of
`_nodes/stats`), and each request's head held to `http.max_header_size` while it is read.

Elasticsearch counts channels (`current_open`, `total_opened`), not requests: a keep-alive
connection carries many requests and an idle one still counts as open. An ASGI middleware sees
only requests (the `http` scope of each), so the count is taken one level lower, in uvicorn's
protocol object, which exists exactly as long as its TCP connection: uvicorn is given a subclass
of its httptools protocol (the one it picks itself: httptools is a dependency) whose
`connection_made`/`connection_lost` count into the node's `HttpConnections`, which also keeps
each connection's `http.clients` entry (addresses, agent, last URI, request count and bytes, as
Elasticsearch's HttpStats.ClientStats). (uvicorn's own
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
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from leafsearch.errors import ElasticError
from leafsearch.search.socket_sink import MAX_REQUEST, ParkOffer, Sink, Written

#: `http.max_header_size`'s default, as in Elasticsearch.
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
#: The request line's method, version and line ends, beside its URL: not header bytes.
_REQUEST_LINE_SLACK = 64
#: What a refused head's connection still reads and drops before it closes, at most.
_LINGER_BYTES = 8 << 20
_LINGER_SECONDS = 2.0


#: How many closed connections `http.clients` still lists, and for how long (Elasticsearch's
#: `http.client_stats.closed_channels.max_count` and `.max_age` defaults).
CLOSED_CLIENTS_MAX_COUNT = 10_000
CLOSED_CLIENTS_MAX_AGE_MILLIS = 5 * 60 * 1000


@dataclass(slots=True)
class HttpClient:
    """One HTTP connection as `_nodes/stats` lists it under `http.clients` (HttpStats.ClientStats):
    updated by the event loop as its requests arrive, read by a stats request."""

    id: int
    local_address: str | None
    remote_address: str | None
    opened_time_millis: int
    agent: str | None = None
    last_uri: str | None = None
    x_forwarded_for: str | None = None
    x_opaque_id: str | None = None
    closed_time_millis: int = -1
    last_request_time_millis: int = -1
    request_count: int = 0
    request_size_bytes: int = 0

    def request(self, uri: bytes, headers: list[tuple[bytes, bytes]], now_millis: int) -> None:
        """A request's head arrived (headers as the parser gives them, names in lower case)."""
        self.last_uri = uri.decode("latin-1")
        self.last_request_time_millis = now_millis
        self.request_count += 1
        for name, value in headers:
            if name == b"user-agent":
                self.agent = value.decode("latin-1")
            elif name == b"x-forwarded-for":
                self.x_forwarded_for = value.decode("latin-1")
            elif name == b"x-opaque-id":
                self.x_opaque_id = value.decode("latin-1")

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        for key in ("agent", "local_address", "remote_address", "last_uri", "x_forwarded_for", "x_opaque_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["opened_time_millis"] = self.opened_time_millis
        if self.closed_time_millis != -1:
            out["closed_time_millis"] = self.closed_time_millis
        out["last_request_time_millis"] = self.last_request_time_millis
        out["request_count"] = self.request_count
        out["request_size_bytes"] = self.request_size_bytes
        return out


def _address(sockaddr: Any) -> str | None:
    """`host:port` as Elasticsearch's NetworkAddress prints it (`[::1]:9200` for IPv6)."""
    if not isinstance(sockaddr, tuple) or len(sockaddr) < 2:
        return None
    host, port = sockaddr[0], sockaddr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class HttpConnections:
    """Open and ever opened HTTP connections of one node, and the clients `http.clients` lists
    (the open ones, and those closed in the last 5 minutes, at most 10,000): the event loop and
    readers share it."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.current_open = 0
        self.total_opened = 0
        self._open: dict[int, HttpClient] = {}
        self._closed: deque[HttpClient] = deque(maxlen=CLOSED_CLIENTS_MAX_COUNT)
        #: Connections lent with a park offer, or parked with a search worker (park id -> its
        #: protocol; search/workers/parking.py). Touched by the event loop only.
        self._parks: dict[int, Any] = {}
        self._park_ids = itertools.count(1)
        #: Set by the node when it has search workers: the security generation now, and how a
        #: parked connection the server closed is dropped by its worker.
        self.security_stamp: Callable[[], tuple[Any, str]] | None = None
        self.unpark: Callable[[int], None] | None = None

    def now_millis(self) -> int:
        return int(self._clock() * 1000)

    def opened(self, local: Any = None, remote: Any = None) -> HttpClient:
        with self._lock:
            self.current_open += 1
            self.total_opened += 1
            client = HttpClient(self.total_opened, _address(local), _address(remote), self.now_millis())
            self._open[client.id] = client
            return client

    def closed(self, client: HttpClient) -> None:
        with self._lock:
            self.current_open -= 1
            if self._open.pop(client.id, None) is not None:
                client.closed_time_millis = self.now_millis()
                self._closed.append(client)

    # ---- parked connections (search/workers/parking.py) -----------------------------------

    def offer_park(self, protocol: Any) -> int:
        """A park id for a connection lent with a park offer (the event loop's)."""
        park_id = next(self._park_ids)
        self._parks[park_id] = protocol
        return park_id

    def park_ended(self, park_id: int, *, closed: bool) -> None:
        """The connection is no longer lent or parked (`closed`: it closed; its worker drops it)."""
        if self._parks.pop(park_id, None) is not None and closed and self.unpark is not None:
            self.unpark(park_id)

    def served(self, park_id: int, request_bytes: int, requests: int) -> None:
        """(socket_sink.ParkedConnections, from a worker pool's reader thread.)"""
        protocol = self._parks.get(park_id)
        if protocol is not None:
            protocol.loop.call_soon_threadsafe(protocol.served_parked, park_id, request_bytes, requests)

    def handed_back(self, park_id: int, reason: str) -> None:
        """(socket_sink.ParkedConnections, from a worker pool's reader thread.)"""
        protocol = self._parks.get(park_id)
        if protocol is not None:
            protocol.loop.call_soon_threadsafe(protocol.handed_back, park_id, reason)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            oldest = self.now_millis() - CLOSED_CLIENTS_MAX_AGE_MILLIS
            while self._closed and self._closed[0].closed_time_millis < oldest:
                self._closed.popleft()
            clients = [c.body() for c in (*self._open.values(), *self._closed)]
            return {"current_open": self.current_open, "total_opened": self.total_opened, "clients": clients}


#: The scope key of the request's transport (a streamed response writes to its socket).
TRANSPORT = "leafsearch.transport"
#: The scope key of the connection's protocol (a lent response's connection may be parked).
PROTOCOL = "leafsearch.protocol"
#: The scope key of the request's uvicorn response cycle, which a response written by the
#: process that renders it ends (`SocketLoan`).
CYCLE = "leafsearch.cycle"


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
        #: The bytes of the request arriving, while it started a read and fits a park
        #: (`ParkOffer`); the last complete request's, while nothing came after it.
        _raw: list[bytes] | None = None
        _raw_size = 0
        _begun = 0
        _in_message = False
        _raw_request: list[bytes] | None = None
        #: The park id of the connection while it is lent with a park offer or parked, and
        #: whether its worker parked it (None: lent), or gave it back early (the reason).
        _park_id: int | None = None
        _parked: bool | str | None = None

        def connection_made(self, transport: Any) -> None:
            self._client = connections.opened(
                transport.get_extra_info("sockname"), transport.get_extra_info("peername")
            )
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            connections.closed(self._client)
            if self._park_id is not None:
                connections.park_ended(self._park_id, closed=True)
                self._park_id = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._lingering is not None:
                self._lingering -= len(data)
                if self._lingering <= 0:
                    self.transport.close()
                return
            if not self._in_message:  # a request starts this read: its bytes may park (`park_offer`)
                self._raw, self._raw_size, self._begun, self._raw_request = [data], len(data), 0, None
            elif self._raw is not None:
                self._raw_size += len(data)
                self._raw = None if self._raw_size > MAX_REQUEST else [*self._raw, data]
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

        def _unsupported_upgrade_warning(self) -> None:
            """An `Upgrade` header (`serve` runs uvicorn without WebSockets) is ignored and the
            request answered as HTTP, as Elasticsearch does: no warning (uvicorn's says to
            install a WebSocket library), which any client could repeat into the log."""

        def on_message_begin(self) -> None:
            self._header_bytes = 0
            self._in_message = True
            self._begun += 1
            if self._begun > 1:  # pipelined: neither this request nor the one before parks
                self._raw = self._raw_request = None
            super().on_message_begin()
            # A streamed response hands its plain socket to the process that renders it (app.py).
            self.scope[TRANSPORT] = self.transport  # type: ignore[literal-required]
            self.scope[PROTOCOL] = self  # type: ignore[literal-required]

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
            self._client.request(self.url, self.headers, connections.now_millis())
            super().on_headers_complete()
            # The cycle of this request (a pipelined one's replaces `self.cycle` before it runs).
            self.scope[CYCLE] = self.cycle  # type: ignore[literal-required]

        def on_body(self, body: bytes) -> None:
            self._client.request_size_bytes += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._head_bytes = 0  # what comes next is the next request's head
            self._in_message = False
            if self._raw is not None and self._begun == 1 and self._raw_size <= MAX_REQUEST:
                self._raw_request = self._raw  # (the chunks read: joined only for a park offer)
            self._raw = None
            super().on_message_complete()

        def on_response_complete(self) -> None:
            # Nothing of an answered request stays with the connection; a request that arrived
            # whole meanwhile (the client read a response its renderer wrote before this loop
            # ended it), queued alone, is answered next and keeps its bytes.
            if len(self.pipeline) != 1:
                self._raw_request = None
            super().on_response_complete()

        # ---- parking (search/workers/parking.py) ------------------------------------------

        def park_offer(self) -> ParkOffer | None:
            """Lend the connection with a park offer, when its request came alone and whole and
            the node has search workers: reading stops until the response ends (the worker, not
            this loop, reads the next request if it keeps the connection); None: no offer."""
            raw, stamp = self._raw_request, connections.security_stamp
            if (
                raw is None
                or stamp is None
                or self.pipeline
                or self.cycle is None
                or not self.cycle.keep_alive
            ):
                return None
            self._raw_request = None
            self.flow.pause_reading()
            self._park_id = connections.offer_park(self)
            self._parked = None
            security, users_file = stamp()
            return ParkOffer(
                self._park_id, b"".join(raw), float(self.timeout_keep_alive), security, users_file
            )

        def park_end(self, parked: bool) -> bool:
            """The lent response ended; `parked`: its worker kept the connection. True when it
            stays parked (uvicorn's cycle must not go on reading); False: read on (or closed)."""
            park_id, early = self._park_id, self._parked
            if park_id is None:
                return False
            if parked and early is None:
                self._parked = True
                self.server_state.total_requests += 1
                return True
            connections.park_ended(park_id, closed=False)
            self._park_id = None
            self.flow.resume_reading()
            if early in ("idle", "cut"):
                self.transport.close()
            return False

        def handed_back(self, park_id: int, reason: str) -> None:
            """The worker gave the connection back: read it on (the request it left in the kernel
            is answered as any), or close it (idle, or cut)."""
            if park_id != self._park_id or self.transport.is_closing():
                return
            if self._parked is None:  # before the response's end reached this loop
                self._parked = reason
                return
            connections.park_ended(park_id, closed=False)
            self._park_id = self._parked = None
            if reason == "other":
                self.flow.resume_reading()
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )
            else:
                self.transport.close()

        def served_parked(self, park_id: int, request_bytes: int, requests: int) -> None:
            """The worker served requests on the parked connection: counted as this loop would."""
            if park_id == self._park_id:
                self.server_state.total_requests += requests
                self._client.request(self.url, self.headers, connections.now_millis())
                self._client.request_count += requests - 1  # (each the same request line)
                self._client.request_size_bytes += request_bytes

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


def plain_socket(transport: Any) -> int | None:
    """A duplicate of the connection's socket when it is plain TCP (not TLS) and open, else None."""
    if transport is None or transport.is_closing() or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    return None if sock is None else os.dup(sock.fileno())


async def drained(transport: Any) -> None:
    """Wait until the transport has handed everything written so far to the socket."""
    while transport.get_write_buffer_size() and not transport.is_closing():
        await asyncio.sleep(0.001)


class SocketLoan:
    """The connection's socket lent for one response, which the process rendering it writes
    whole, head included (search/socket_sink.py), instead of uvicorn: made by the event loop
    (`of`) with nothing pending on the socket, lent by the request's thread (`lend`), ended by
    the event loop (`end`) before the next request on the connection is answered.

    The head is the one uvicorn's `send` would write for the same status and headers (its
    default headers first, `connection: close` when the connection is not kept alive), so a
    lent response is the relayed one byte for byte; `end` then completes uvicorn's cycle as
    its `send` completes it (keep-alive, the next pipelined request), or closes the connection
    when the body did not go out whole. Lent with a park offer (`park`), the connection is not
    read meanwhile, and stays unread once its worker kept it (search/workers/parking.py) until
    the worker gives it back."""

    def __init__(
        self,
        transport: Any,
        cycle: Any,
        fd: int,
        head: tuple[bytes, bytes],
        protocol: Any,
        offer: ParkOffer | None,
    ) -> None:
        self._transport = transport
        self._cycle = cycle
        self._fd = fd
        self._head = head
        self._protocol = protocol
        self.offer = offer

    @classmethod
    async def of(
        cls, scope: Any, media_type: str, headers: dict[str, str], *, park: bool = False
    ) -> SocketLoan | None:
        """A loan for a 200 response of `media_type` with `headers` after uvicorn's and the
        product header (None over TLS, or outside this module's protocol), once the socket has
        taken what earlier responses left in the transport; `park`: with a park offer when the
        request allows it."""
        transport, cycle, protocol = scope.get(TRANSPORT), scope.get(CYCLE), scope.get(PROTOCOL)
        if transport is None or cycle is None:
            return None
        await drained(transport)
        fd = plain_socket(transport)
        if fd is None:
            return None
        fields = [(b"content-type", media_type.encode()), (b"content-length", b"#"), _PRODUCT]
        fields += [(k.encode(), v.encode()) for k, v in headers.items()]
        before, after = _head(cycle, 200, fields).split(b"content-length: #", 1)
        offer = protocol.park_offer() if park and protocol is not None else None
        return cls(transport, cycle, fd, (before + b"content-length: ", after), protocol, offer)

    def lend(self) -> Sink | None:
        """The socket and the head, for the process that renders the response."""
        return Sink(self._fd, self._head, park=self.offer)

    def end(self, written: Written | None) -> None:
        """The lent response ended: written whole (the cycle completes, or the connection stays
        with the worker that parked it), or cut (`written` None or incomplete: the connection
        closes). Closes the duplicate."""
        os.close(self._fd)
        cycle = self._cycle
        cycle.response_started = True
        cycle.message_event.set()
        complete = written is not None and written.complete
        if self.offer is not None and self._protocol.park_end(complete and written.parked is not None):
            cycle.response_complete = True
            return
        if complete:
            cycle.response_complete = True
            if not cycle.keep_alive:
                self._transport.close()
            cycle.on_response()
        else:
            cycle.disconnected = True
            self._transport.close()

    def release(self) -> None:
        """Not lent, or lent and nothing written (an error answered as usual): close the duplicate."""
        os.close(self._fd)
        if self.offer is not None:
            self._protocol.park_end(False)


_PRODUCT = (b"x-elastic-product", b"Elasticsearch")


def _head(cycle: Any, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The response head uvicorn's httptools cycle writes for `headers` (its `send`)."""
    content = [STATUS_LINE[status]]
    closes = False
    for name, value in [*cycle.default_headers, *headers]:
        name = name.lower()
        if name == b"connection" and b"close" in [token.lower().strip() for token in value.split(b",")]:
            closes = True
        content.extend([name, b": ", value, b"\r\n"])
    if not cycle.keep_alive and not closes:
        content.append(b"connection: close\r\n")
    content.append(b"\r\n")
    return b"".join(content)
