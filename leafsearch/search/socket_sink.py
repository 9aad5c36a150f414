"""A response written to the client's socket by the process that renders it (a search worker,
or the server process), instead of being relayed through the HTTP server.

Why: relayed, a page rendered by a search worker crossed a pipe and four threads of the server
process (the pipe's reader, the request's thread, the event loop, the socket write), which cost
the server process about as much CPU as rendering the page cost the worker (0.8 to 0.9 ms per
1,000 documents): two slices read at once were no faster than one stream (bench/RESULTS.md,
"Streaming export"). Written by the renderer, a page costs the server process its request and
two small messages. The HTTP layer lends the socket (a duplicate of its descriptor, sent to a
worker with the task by SCM_RIGHTS) only over plain TCP, with nothing pending on it, and takes
the connection back when the task returns, before it answers the next request on it.

Two uses, one writer (`send_all`): `_export`'s chunks after its first page (export_pages.py:
the HTTP server sent the head), and a whole response of one page (`write_response`: a PIT page
or a scroll batch), whose head the server process composed (status and headers, all but the
length) and the renderer completes with the body's `Content-Length` once it is rendered, so
the response is the relayed one byte for byte, and a page that fails before its first byte is
the server process's usual error response (the worker wrote nothing). After the first byte,
a client that goes away or a cancelled task ends the write (`Written.complete` false) and the
server closes the connection; a worker that dies meanwhile is `ResponseCut` (what reached the
client is unknown): the connection is closed too.

The socket is non-blocking (it is the event loop's): a full socket is waited for with `poll`, a
tenth of a second at a time, so a write stops within that once its task is cancelled.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from leafsearch.common.rawjson import RawJSON, fragment

#: How long a write waits for room in the socket before it looks whether it was cancelled.
_POLL_MILLIS = 100


@dataclass(frozen=True, slots=True)
class ParkOffer:
    """What a worker needs to keep the connection after the response it writes and serve the
    walk's next page (a scroll's next batches) itself (search/workers/parking.py): made by the
    HTTP layer (the request's bytes, exactly as received, and the security state it was
    authorized in), completed by the search (the reader context's keep-alive)."""

    #: The number the server process knows the parked connection by.
    park_id: int
    #: The request as the client sent it (request line, headers, body), at most `MAX_REQUEST`.
    request: bytes
    #: How long a parked connection may stay idle (the HTTP keep-alive timeout), in seconds.
    idle_seconds: float
    #: The state the request was authorized in (`security_stamp`): the shared generations the
    #: server moves on every change to users or API keys and on every reader context freed, and
    #: the users file's stamp.
    security: tuple[int, int, tuple[int, int] | None]
    #: The users file (users and their roles), whose stamp a continuation must still find.
    users_file: str
    #: The reader context's keep-alive after this page, in seconds (0: not known, no park).
    keep_alive: float = 0.0
    #: The context's number: what a `forget` of the context hands back.
    ctx_id: int = -1
    #: When the credentials stop being valid (an API key's expiration, `time.time()` seconds).
    until: float | None = None


def file_stamp(path: str) -> tuple[int, int] | None:
    """A file's modification time and size (None: missing), as the users file is re-read."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


def security_stamp(shared: Any, users_file: str) -> tuple[int, int, tuple[int, int] | None]:
    """The state a parked connection's request must still find (search/workers/parking.py): the
    shared generations (security changes, contexts freed) and the users file's stamp."""
    return int(shared[0]), int(shared[1]), file_stamp(users_file)


#: Slots of the shared generations counting a scroll's batches served on the general path (the
#: server process's), after the two of `security_stamp`: a context's is `2 + ctx_id % SLOTS`.
SCROLL_SLOTS = 4096


def scroll_moves(shared: Any, ctx_id: int) -> int:
    """How many times the general path served a batch of the scroll `ctx_id` (or of one sharing
    its slot): a kept connection's continuation is served only when this did not move since."""
    return int(shared[2 + ctx_id % SCROLL_SLOTS])


#: A request larger than this is never a parked connection's: the general path reads it.
MAX_REQUEST = 64 << 10


@dataclass(frozen=True, slots=True)
class Sink:
    """The client's socket, lent for one response (or the rest of an export's)."""

    #: A descriptor of the socket in the process running the task (the server process passes a
    #: duplicate of its own; a worker receives one with the task); its owner closes it.
    fd: int
    #: A whole response's head around its Content-Length value: what comes before the digits
    #: (ending `content-length: `) and after them (from the line end to the blank line). None:
    #: the head was sent, chunks follow (an export).
    head: tuple[bytes, bytes] | None = None
    #: The renderer asks the server process before writing (`Confirm`): a scroll batch, whose
    #: context moves and is recorded before the response naming its next id goes out.
    confirm: bool = False
    #: The connection may stay with the worker after this response (a PIT page, a scroll batch;
    #: see `ParkOffer`).
    park: ParkOffer | None = None


#: What the HTTP layer offers a request that may have its response written by its renderer: a
#: call lending the socket (None when it cannot: the connection went away meanwhile).
Lend = Callable[[], Sink | None]
#: Called by the renderer with what the server process must know of a rendered response before
#: it is written (a scroll batch's cursor, total and took); False: write nothing; anything true:
#: write (a scroll's `execution.ScrollAhead` when its connection may be kept).
Confirm = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Written:
    """A response written to the socket: its body's length, whether all of it went out (else the
    client went away, or the task was cancelled), and what the server process keeps of it (the
    scroll's replay, the slow log): `took` and the hits' total as rendered."""

    length: int
    complete: bool
    took: int
    total: Any = None
    #: The pid of the worker that kept the connection after writing (search/workers/parking.py):
    #: the server process must not read it until the worker hands it back.
    parked: int | None = None

    def summary(self) -> dict[str, Any]:
        """The parts of the response body the slow log reads."""
        return {"took": self.took, "hits": {"total": self.total}}


class ParkedConnections(Protocol):
    """The HTTP layer's side of parked connections (rest/connections.py), told by the worker
    pool what the workers did with them (from its reader threads)."""

    def served(self, park_id: int, request_bytes: int, requests: int) -> None:
        """A worker served `requests` requests (of `request_bytes` in all) on the parked
        connection (the HTTP client's stats)."""

    def handed_back(self, park_id: int, reason: str) -> None:
        """The worker gave the connection back: `other` (read it on), `idle` (close it as an
        idle keep-alive connection) or `cut` (what reached the client is unknown: close it)."""


class ResponseCut(Exception):
    """The process writing a response to the client's socket died: what reached the client is
    unknown, so the connection must be closed rather than answered."""


class Gone(Exception):
    """The client went away, or the write was cancelled."""


def write_response(
    sink: Sink,
    body: dict[str, Any],
    cancelled: threading.Event | None,
    confirm: Callable[[], bool] | None = None,
) -> Written:
    """A response body rendered as the REST layer renders it (JSON, sources spliced) and written
    with its head, in one `writev` when the socket has room (no copy of the page); `confirm`
    first, when given: its False writes nothing (`Written.complete` false, length 0)."""
    assert sink.head is not None
    data = _encoded(body)
    length = sum(map(len, data))
    if confirm is not None and not confirm():
        return Written(0, False, body["took"])
    before, after = sink.head
    try:
        send_all(sink.fd, [before, b"%d" % length, after, *data], cancelled)
        complete = True
    except Gone:
        complete = False
    return Written(length, complete, body["took"], body.get("hits", {}).get("total"))


#: Where a page's hits go in the encoding of the rest of its body: a byte JSON never holds raw.
_HITS_MARK = b"\x00"


def _encoded(body: dict[str, Any]) -> list[bytes]:
    """The body's JSON as the REST layer renders it, in pieces: a page of hits rendered as bytes
    (`RawJSON`, hundreds of KB) is written as it is, not copied into the encoding of the rest."""
    found = body.get("hits")
    hits = found.get("hits") if isinstance(found, dict) else None
    if not isinstance(hits, RawJSON):
        return [orjson.dumps(body, default=fragment)]
    rest = orjson.dumps({**body, "hits": {**found, "hits": orjson.Fragment(_HITS_MARK)}}, default=fragment)
    head, tail = rest.split(_HITS_MARK, 1)
    return [head, hits.data, tail]


def send_all(fd: int, pieces: list[bytes], cancelled: threading.Event | None) -> None:
    """`pieces` written whole, in order, to the socket `fd` (non-blocking), waiting for room in
    it; `Gone` when the client went away or the write was cancelled meanwhile. Written on the
    descriptor itself (`writev`): no duplicate and socket object made and closed per response,
    ~11 us of a kept scroll's batch (bench/RESULTS.md, session 25)."""
    parts = [memoryview(piece) for piece in pieces if piece]
    poller: select.poll | None = None
    while parts:
        if cancelled is not None and cancelled.is_set():
            raise Gone
        try:
            sent = os.writev(fd, parts)
        except BlockingIOError:
            sent = 0
        except OSError:
            raise Gone from None
        while sent:
            if sent >= len(parts[0]):
                sent -= len(parts.pop(0))
            else:
                parts[0], sent = parts[0][sent:], 0
        if parts:
            if poller is None:
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
            events = poller.poll(_POLL_MILLIS)
            if any(flags & (select.POLLERR | select.POLLHUP) for _, flags in events):
                raise Gone
