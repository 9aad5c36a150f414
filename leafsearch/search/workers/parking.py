"""A walk's connection parked with the search worker that holds the walk, between its pages: a
PIT walk's, or a scroll's.

Why: a PIT walk's page costs a request's fixed path twice, in the server process (HTTP parsing,
authentication, routing, the context) and in the worker (the task's message, its threads), as
much as rendering the page itself (bench/RESULTS.md, "Walks"). After a PIT page the worker wrote
to the client's socket (socket_sink.py), the server process stops reading the connection and the
worker keeps a descriptor of it here, watched by one selector thread for all its parked
connections. When the next request arrives it is read with `MSG_PEEK` only, and served here only
when it is the walk's continuation, byte for byte the request that parked it but for the
`search_after` (which must be the cursor the page ended at) and the `Content-Length`:

- the same request line (method, path, query string) and header lines in the same order, so the
  response head the server composed stays right and the credentials are the bytes the server
  verified, in the same state (`ParkOffer.security`: generations the server process moves on
  every change to users, roles or API keys and on every reader context freed, shared with the
  workers, and the users file's stamp; an API key's expiration goes with the park);
- the same body but for `search_after`, `pit.id` and `pit.keep_alive` equal;
- nothing after it on the socket (a pipelined request is not the worker's);
- the context alive (not forgotten, its snapshots held, its keep-alive not about to end).

The request is compared as bytes to the one expected (`_Parked.template`: the last request with
the cursor its page ended at, as orjson writes it, and the Content-Length to match; built after
the page went out, once that comparison passed the parsed one: `_cursor_frame`), else parsed
(another spacing, another order): the selector thread's look at a continuation costs ~6 us,
not ~18, and a body that came after its head is awaited without parsing either (bench/RESULTS.md,
session 24).

A scroll's continuation is `POST|GET /_search/scroll` with the body `{"scroll", "scroll_id"}` as
the official clients send it: the same request line and header lines as the request that parked
it, the same body but for `scroll_id`, which must be the id just answered. The worker serves only
the batches the context's record names already (`execution.ScrollAhead`, the server's answer to
the batch it recorded: their ends and ids), so no batch goes out before a record naming its
position is on disk. Halfway through them it asks the server process to extend the record with
the next ones (`_serve_batch`: written and fsynced off the stream's way, workers/records_ahead.py)
and serves those once the answer came; without an answer, the request after the last one named is
handed back for the server to write a new record. Nor when the server process served a batch of
the scroll since, or freed it (`socket_sink.scroll_moves`, the scroll's own generation: it does
not look at the one of every context freed, so a scan clearing its scroll sends no other
scroll's connection back).
The thread that wrote a scroll's batch renders the next one at once (the client reads meanwhile)
and looks at the connection for the next request for a moment (`_FOLLOW_SECONDS`) before the
selector thread watches it: a client reading as fast as the worker writes is served by one thread,
with no hand-off per batch.

Then the request's bytes are consumed, the page is written with the head (by a writer thread, or by
the thread that finds the PIT page read ahead ready — the selector thread, or the read-ahead's when
the request came first — if the socket has room for it twice over: one thread hand-off less on the
page's way, and a write that cannot wait for the client), and the server process gets a note (not
waited for) with what it counts: the context's keep-alive, the search stats, the HTTP client's
request, a scroll's position (the note moves the context, `ReaderContext.note`). Notes are told
together (`_Notes`): within `_NOTES_DELAY` of the first held (the selector thread sends them),
before anything else of the connection reaches the server process (a hand-back, a scroll's
connection watched by the selector, statistics), and when a request of a scroll arrives on another
connection (`WorkerPool.scroll_told`), so the general path finds the scroll where its client is.

Anything else — another request, EOF, bytes that do not complete a request within the idle
time, the context forgotten, a security change — consumes nothing and hands the connection
back: the server process resumes reading it and answers on the general path what the kernel
still holds. Nothing is re-injected, and nothing is answered here that the
general path would answer differently.

Bounds: at most `MAX_PARKED` connections per worker (beyond, no park), no thread per connection,
and a parked connection's descriptor is closed when it is handed back, dropped or closed.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import select
import selectors
import socket
import struct
import termios
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson

from leafsearch.common.wire_pickle import evolve
from leafsearch.search import walks
from leafsearch.search.execution import RECORDED_AHEAD, Park, PitTask, ScrollAhead, ScrollTask
from leafsearch.search.read_ahead import after_block, after_reply
from leafsearch.search.socket_sink import MAX_REQUEST, Confirm, Written, scroll_moves, security_stamp
from leafsearch.search.targets import release_targets

log = logging.getLogger("leafsearch.search_workers")

#: Parked connections one worker keeps at most.
MAX_PARKED = 256
#: A context whose keep-alive ends sooner than this is not served here (the server's may end).
_KEEP_ALIVE_MARGIN = 1.0
#: How soon a request that arrived in part is looked at again, first and at most (doubling in
#: between): the official Python client sends a request's head and body in two writes, its body
#: follows within microseconds; a slow client is looked at less and less often.
_PARTIAL_FIRST = 0.00005
_PARTIAL_MAX = 0.005
#: A look at what a parked connection holds, leaving it there.
_PEEK = socket.MSG_PEEK | socket.MSG_DONTWAIT
#: How long the selector thread waits for the body of a request whose head came alone.
_BODY_WAIT = 0.001
#: Contexts forgotten lately: a page being served when its context was forgotten does not park.
_FORGOTTEN = 1024
#: How long the thread that served a kept scroll's batch, and rendered the next one after it
#: (`read_ahead.after_reply(inline=True)`), looks at the connection for the next request before
#: the selector thread watches it: a client reading as fast as the worker writes has sent it by
#: then, and the same thread serves it with no hand-off (bench/RESULTS.md, session 17).
_FOLLOW_SECONDS = 0.002

#: A kept scroll asks for its record to be extended (`Parking._serve_batch`) once this many of
#: the batches it names are left to serve (half of them): its write and `fdatasync` in the server
#: process (`scroll_pit.extend_record`) take 3-8 ms, served batches ~1 ms each.
_EXTEND_AT = RECORDED_AHEAD // 2
#: How long the batch that is the last its record names waits for an extension asked for: the
#: general path would write it with the batch after (hand-back, parsing, the record, a task).
_EXTENSION_WAIT = 1.0

#: Given a parked PIT walk's task, its next page's cursor key and a call: the call is made with
#: the page's bytes (None: its preparation failed) once the page read ahead for that key is ready,
#: at once when it is, else by the thread that prepares it (`ReadAhead.when_ready`); False: no
#: page is being prepared for it (none, or not started).
WhenReady = Callable[[PitTask, bytes, Callable[["int | None"], None]], bool]
#: Room kept beside a page for its response's head and the rest of its body.
_HEAD_ROOM = 4096
#: How long the notes of pages and batches served here wait to go to the server process as one
#: (`_hold`): one message, and one wake of the server's threads, per this time rather than per
#: page (0.15-0.25 ms of its CPU per page of 1,000 hits, on cores the walk's client shares); a
#: context's keep-alive there counts from its last note, so well within `_KEEP_ALIVE_MARGIN`.
_NOTES_DELAY = 0.02

#: Runs a PIT page or scroll batch (execution.run with this module's `park` and the confirm
#: given), timing its phases into the list given: what execution.run returns.
Execute = Callable[[PitTask | ScrollTask, Park, Confirm | None, list[tuple[str, float]]], Any]

#: While a kept scroll's batch is served (`Parking._serve`): where `park` leaves the connection
#: parked again, for the serving thread to look at first (`Parking._followed`).
_FOLLOWED: ContextVar[list[_Parked] | None] = ContextVar("leafsearch_parking_followed", default=None)


@dataclass(slots=True)
class _Parked:
    park_id: int
    #: The connection (a duplicate of the server's descriptor, kept while the walk is parked
    #: here and the pages served here go on) and its descriptor.
    conn: socket.socket
    fd: int
    #: A PIT walk's next page (from the cursor its page ended at, written to `fd`); a scroll's
    #: batch last served.
    task: PitTask | ScrollTask
    #: The request line and header lines but Content-Length's, and the body, as parked.
    lines: list[bytes]
    body: dict[str, Any]
    #: What the next request must ask for: a PIT page's cursor key, a scroll's id.
    expected: bytes | str
    #: A PIT page's cursor; a scroll's next batches, each (its end, its id), as recorded.
    following: list[Any]
    idle_until: float
    ctx_until: float
    #: A scroll's: its batch last answered, and its `scroll_moves` when parked.
    seq: int = 0
    moves: int = 0
    #: While a request arrives in pieces: when it is looked at again, and the wait before that.
    retry: float = 0.0
    backoff: float = 0.0
    #: The request it last served, and its continuation byte for byte (a scroll's: `_following`;
    #: a PIT walk's: `frame` around the cursor expected, `_framed`).
    request: bytes = b""
    template: bytes | None = None
    #: A PIT walk's request around its cursor (`_cursor_frame`), once its continuation framed so
    #: passed the whole comparison (`Parking._same_request`).
    frame: tuple[bytes, bytes, bytes, bytes] | None = None

    def wait_more(self) -> None:
        """Its request is not whole yet: looked at again a little later than the last time."""
        self.backoff = min(max(2 * self.backoff, _PARTIAL_FIRST), _PARTIAL_MAX)
        self.retry = time.monotonic() + self.backoff


@dataclass(slots=True)
class _Extension:
    """A kept scroll's ask for its record to name more batches (`Parking._serve_batch`), and
    the server's answer once it came (`answer`: the ends and ids it recorded; None: nothing)."""

    came: threading.Event = field(default_factory=threading.Event)
    answer: ScrollAhead | None = None


@dataclass(slots=True)
class _Notes:
    """The pages or batches served on a kept connection that the server process was not told of
    yet: told together (`Parking._tell`), before anything else of the connection."""

    request_bytes: int = 0
    requests: int = 0
    phases: list[tuple[str, float]] = field(default_factory=list)
    #: Each batch's (seq, public id, cursor, took): `ReaderContext.note`.
    scroll: list[tuple[int, str, list | None, int]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        return {
            "request_bytes": self.request_bytes,
            "requests": self.requests,
            "phases": self.phases,
            "scroll": self.scroll,
        }


def _peek(conn: socket.socket) -> bytes | None:
    """What the socket holds, unread (b"" at its end or on an error); None: nothing yet."""
    try:
        return conn.recv(MAX_REQUEST + 1, _PEEK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _following(served: bytes, served_id: str, expected: str) -> bytes | None:
    """A scroll's continuation byte for byte as its client sends it: the request it served with
    `expected` for its id (of the same length, there once); None: not known this way (the whole
    request is compared then, `Parking._same_request`)."""
    old, new = b'"%s"' % served_id.encode(), b'"%s"' % expected.encode()
    if len(old) != len(new) or served.count(old) != 1:
        return None
    return served.replace(old, new)


#: A request head's Content-Length value (the head's first line is the request line).
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_SEARCH_AFTER = b'"search_after":'


def _cursor_frame(served: bytes, cursor: bytes) -> tuple[bytes, bytes, bytes, bytes] | None:
    """A PIT walk's request around its cursor, as its client wrote it: the head before and after
    its Content-Length value, the body before and after its `search_after` value (`cursor`, as
    the client wrote it: there once); None: not found so (the whole request is compared then)."""
    end = served.find(b"\r\n\r\n") + 4
    head, body = served[:end], served[end:]
    key = _SEARCH_AFTER + cursor
    length = _CONTENT_LENGTH.search(head) if end >= 4 else None
    if length is None or body.count(key) != 1:
        return None
    at = body.index(key) + len(_SEARCH_AFTER)
    return head[: length.start(1)], head[length.end(1) :], body[:at], body[at + len(cursor) :]


def _framed(frame: tuple[bytes, bytes, bytes, bytes], cursor: bytes) -> bytes:
    """The request of `frame` (`_cursor_frame`) with this cursor, its Content-Length to match."""
    before, after, prefix, suffix = frame
    return b"%s%d%s%s%s%s" % (before, len(prefix) + len(cursor) + len(suffix), after, prefix, cursor, suffix)


def _body_length(request: bytes) -> int:
    return len(request) - request.find(b"\r\n\r\n") - 4


def _split(request: bytes) -> tuple[list[bytes], int, int] | None:
    """The head's lines without Content-Length's, the head's length and the declared body
    length; None when it is no plain request with a length (chunked, `Expect`) or incomplete."""
    end = request.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = request[:end].split(b"\r\n")
    kept: list[bytes] = []
    length = None
    for line in lines[1:]:
        name = line.split(b":", 1)[0].strip().lower()
        if name == b"content-length":
            value = line.split(b":", 1)[1].strip() if b":" in line else b""
            if length is not None or not value.isdigit():
                return None
            length = int(value)
            continue
        if name in (b"transfer-encoding", b"expect"):
            return None
        kept.append(line)
    if length is None:
        return None
    return [lines[0], *kept], end + 4, length


def _body_awaited(conn: socket.socket, peeked: bytes) -> bool:
    """Whether the rest of a request whose head came whole arrived within `_BODY_WAIT`: the
    official Python clients (http.client) send a request's head and body in two writes, the body
    microseconds behind, and the head alone wakes the selector thread. Its wait is on the socket
    (its receive low-water mark, the whole request's size, for that wait only): no second look
    after a timer, which a loaded machine made 1 ms late (bench/RESULTS.md, session 17). Only a
    request's first look waits: a slow client holds the selector thread 1 ms a request at most."""
    split = _split(peeked)
    if split is None or not len(peeked) < split[1] + split[2] <= MAX_REQUEST:
        return False
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, split[1] + split[2])
        try:
            poller = select.poll()
            poller.register(conn, select.POLLIN)
            return bool(poller.poll(_BODY_WAIT * 1000))
        finally:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
    except OSError:
        return False


def _room(conn: socket.socket) -> int:
    """Bytes the socket's send buffer takes now without waiting: its size less what it holds."""
    try:
        held = struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        return conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) - held
    except OSError:
        return 0


class Parking:
    """A worker's parked connections; see the module docstring."""

    def __init__(
        self,
        execute: Execute,
        start: Callable[[Callable[[], Any]], None],
        send: Callable[[tuple], None],
        security: Any,
        limit: int = MAX_PARKED,
        follow_seconds: float = _FOLLOW_SECONDS,
        when_ready: WhenReady | None = None,
        notes_delay: float = _NOTES_DELAY,
    ) -> None:
        self._execute = execute
        self._when_ready = when_ready
        self._notes_delay = notes_delay
        self._start = start
        self._send = send
        self._security = security
        self.limit = limit
        self.follow_seconds = follow_seconds
        self._lock = threading.Lock()
        self._parked: dict[int, _Parked] = {}  # park id -> parked (watched or being looked at)
        self._commands: deque[tuple[str, Any]] = deque()
        self._forgotten: OrderedDict[int, None] = OrderedDict()
        #: Park ids the server closed while their page was served.
        self._dropped: OrderedDict[int, bool] = OrderedDict()
        #: Pages and batches served here not told yet, by park id, and when the selector thread
        #: tells them (`_hold`); `_telling` keeps them in order.
        self._notes: dict[int, _Notes] = {}
        self._notes_due = 0.0
        #: A kept scroll's extension of its record, by park id: one at a time (`_serve_batch`).
        self._extensions: dict[int, _Extension] = {}
        self._telling = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._closed = False

    # ---- called by other threads -------------------------------------------------------------

    def park(self, task: PitTask | ScrollTask, following: Any) -> int | None:
        """Keep the connection of a PIT page or scroll batch written whole (`execution.Park`;
        `following`: the PIT page's cursor, the scroll's `ScrollAhead`): this worker's pid, or
        None when it cannot be kept (the server process reads it on)."""
        sink = task.sink
        assert sink is not None and sink.park is not None
        offer = sink.park
        scroll = isinstance(task, ScrollTask)
        with self._lock:
            before = self._parked.get(offer.park_id)
        again = before is not None and before.task.sink.park is offer  # type: ignore[union-attr]
        if again:  # parked again after a page served here (on its connection: kept)
            lines, body, moves = before.lines, before.body, before.moves
            served = (before.request, before.expected)
        else:
            split = _split(offer.request)
            if (
                split is None
                or len(offer.request) != sum(split[1:])
                or offer.keep_alive < 2 * _KEEP_ALIVE_MARGIN
            ):
                return None
            try:
                body = orjson.loads(offer.request[split[1] :])
            except orjson.JSONDecodeError:
                return None
            if not isinstance(body, dict) or not (
                isinstance(body.get("scroll_id"), str) if scroll else isinstance(body.get("pit"), dict)
            ):
                return None
            lines = split[0]
            cursor = body.get("scroll_id") if scroll else walks.cursor_key(body.get("search_after"))
            served = (offer.request, cursor)
            moves = scroll_moves(self._security, task.ctx_id) if scroll and self._security is not None else 0
            if not scroll:  # the walk's pages served here are one walk: its identity is taken once
                task = evolve(task, walk=walks.identity(task.request))
        if scroll:
            assert isinstance(following, ScrollAhead)
            expected, after, seq = task.public_id, list(following.ends), following.seq
            if not again:  # parked by the general path: the ends are its record's
                with self._lock:
                    self._extensions.pop(offer.park_id, None)
        else:
            expected, after, seq = walks.cursor_key(following), following, 0
        with self._lock:
            held = len(self._parked) - (offer.park_id in self._parked)  # (parked again: replaces)
            if self._closed or held >= self.limit or task.ctx_id in self._forgotten:
                return None
            now = time.monotonic()
            kept = again and before.fd == sink.fd  # type: ignore[union-attr]
            conn = before.conn if kept else socket.socket(fileno=os.dup(sink.fd))  # type: ignore[union-attr]
            parked = _Parked(
                offer.park_id,
                conn,
                conn.fileno(),
                task,
                lines,
                body,
                expected,
                after,
                now + offer.idle_seconds,
                now + offer.keep_alive,
                seq,
                moves,
                template=_following(*served, expected) if scroll else None,  # type: ignore[arg-type]
            )
            self._parked[offer.park_id] = parked
            self._ensure_thread()
        if not scroll:  # (not watched yet: no other thread looks at it)
            # The next page's task, made now that this page went out, not once its request came.
            request = evolve(task.request, search_after=after)
            parked.task = evolve(task, request=request, elapsed=0.0, sink=evolve(sink, fd=parked.fd))
            self._frame(parked, before if again else None, *served)  # type: ignore[arg-type]
        followed = _FOLLOWED.get() if scroll else None
        if followed is not None:  # a batch served here: its thread looks first (`_followed`)
            followed.append(parked)
        else:
            # Watched once the reply of the task that wrote the page went out
            # (read_ahead.after_reply): the server process learns of the park before it can be
            # handed back.
            after_block(lambda: self._command("watch", parked))
        return os.getpid()

    def _frame(self, parked: _Parked, before: _Parked | None, served: bytes, cursor: bytes) -> None:
        """A parked PIT walk's continuation byte for byte (`_Parked.template`): the request it
        served (`cursor` its `search_after` as the walk's key) with the cursor its page ended at,
        in the frame of the request before when that was its continuation so, else in the frame
        of this request once its continuation framed so passes the whole comparison. Made after
        the page went out; its request compares as bytes, not parsed."""
        if before is not None and before.frame is not None and served == before.template:
            parked.frame = before.frame
        else:
            frame = None if cursor == parked.expected else _cursor_frame(served, cursor)
            if frame is None:
                return
            template = _framed(frame, parked.expected)
            if self._same_request(parked, template) != len(template):
                return
            parked.frame = frame
        parked.template = _framed(parked.frame, parked.expected)  # type: ignore[arg-type]

    def extended(self, park_id: int, answer: ScrollAhead | None) -> None:
        """The server process's answer to a kept scroll's ask for its record to name more
        batches (`_serve_batch`): used by the batch served next."""
        with self._lock:
            extension = self._extensions.get(park_id)
        if extension is not None:
            extension.answer = answer
            extension.came.set()

    def forget(self, ctx_id: int) -> None:
        """A context ended: its parked connections go back (the general path answers 404)."""
        with self._lock:
            self._forgotten[ctx_id] = None
            while len(self._forgotten) > _FORGOTTEN:
                self._forgotten.popitem(last=False)
        self._command("forget", ctx_id)

    def tell_all(self) -> None:
        """Tell the server process of every page and batch served here that it was not told of
        yet (before a reply that must follow them: statistics, or a scroll's request it serves)."""
        with self._lock:
            parks = list(self._notes)
        for park_id in parks:
            self._tell(park_id)

    def handback_all(self) -> None:
        self._command("all", None)

    def drop(self, park_id: int) -> None:
        """The server process closed the connection: the descriptor goes, nothing is sent (one
        being served is dropped when the server hears of its page)."""
        self._command("drop", park_id)

    def close(self) -> None:
        self.tell_all()
        with self._lock:
            self._closed = True
            parked = list(self._parked.values())
            self._parked.clear()
            thread = self._thread
        if thread is not None:
            self._command("stop", None)
            thread.join(timeout=5)
            os.close(self._wake_r)
            os.close(self._wake_w)
        for each in parked:
            each.conn.close()

    def count(self) -> int:
        with self._lock:
            return len(self._parked)

    def _command(self, kind: str, arg: Any) -> None:
        """Have the selector thread apply a command: woken, unless it is the caller (it applies
        the commands after each look, before it waits again: no write and no wake of its own)."""
        with self._lock:
            if self._thread is None:
                return
            self._commands.append((kind, arg))
        if threading.current_thread() is not self._thread:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def _ensure_thread(self) -> None:
        """(lock held)"""
        if self._thread is None:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            self._thread = threading.Thread(target=self._watch, name="leafsearch-worker-parking", daemon=True)
            self._thread.start()

    # ---- the selector thread -----------------------------------------------------------------

    def _watch(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ)
        watched: dict[int, _Parked] = {}  # fd -> parked
        partial: dict[int, _Parked] = {}
        try:
            while True:
                now = time.monotonic()
                deadlines = [p.idle_until for p in watched.values()]
                deadlines += [p.retry for p in partial.values()]
                if self._notes:
                    deadlines.append(self._notes_due)
                timeout = max(0.0, min(deadlines) - now) if deadlines else None
                ready = selector.select(timeout)
                for key, _ in ready:
                    if key.fd == self._wake_r:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        continue
                    parked = watched.pop(key.fd)
                    selector.unregister(key.fd)
                    self._look(parked, partial)
                now = time.monotonic()
                for fd, parked in list(partial.items()):  # a request arriving in pieces
                    if now >= parked.retry:
                        del partial[fd]
                        self._look(parked, partial)
                if not self._apply(selector, watched, partial):
                    return
                now = time.monotonic()
                if self._notes and now >= self._notes_due:
                    self.tell_all()
                for fd, parked in list(watched.items()):
                    if now >= parked.idle_until:
                        del watched[fd]
                        selector.unregister(fd)
                        self._hand_back(parked, "idle")
                for fd, parked in list(partial.items()):
                    if now >= parked.idle_until:
                        del partial[fd]
                        self._hand_back(parked, "idle")
        except Exception:  # noqa: BLE001 - never silent: the connections go back to the server
            log.exception("the parked connections' thread failed; this worker parks no more")
            with self._lock:
                self._closed = True
                every = list(self._parked.values())
            for parked in every:
                self._hand_back(parked, "other")
        finally:
            selector.close()

    def _apply(self, selector: Any, watched: dict[int, _Parked], partial: dict[int, _Parked]) -> bool:
        """Apply the other threads' commands; False: stop."""
        while True:
            with self._lock:
                if not self._commands:
                    return True
                kind, arg = self._commands.popleft()
            if kind == "stop":
                return False
            if kind == "notes":  # (notes held: their time is among the deadlines)
                continue
            if kind == "watch":
                with self._lock:
                    dropped = self._dropped.pop(arg.park_id, False)
                if dropped:  # closed by the server meanwhile
                    self._release(arg)
                elif self._parked.get(arg.park_id) is arg:
                    watched[arg.fd] = arg
                    selector.register(arg.fd, selectors.EVENT_READ)
                continue
            chosen = [
                p
                for p in [*watched.values(), *partial.values()]
                if kind == "all"
                or (kind == "forget" and p.task.ctx_id == arg)
                or (kind == "drop" and p.park_id == arg)
            ]
            if kind == "drop" and not chosen:  # being served: dropped when it would be watched
                with self._lock:
                    self._dropped[arg] = True
                    while len(self._dropped) > _FORGOTTEN:
                        self._dropped.popitem(last=False)
            for parked in chosen:
                if watched.pop(parked.fd, None) is not None:
                    selector.unregister(parked.fd)
                partial.pop(parked.fd, None)
                if kind == "drop":
                    self._tell(parked.park_id)  # (a scroll is past the batches its client holds)
                    self._release(parked)
                else:
                    self._hand_back(parked, "other")

    def _look(self, parked: _Parked, partial: dict[int, _Parked]) -> None:
        """The parked connection has bytes (or EOF): serve its walk's next page, wait for the
        rest of a request, or hand it back."""
        peeked = _peek(parked.conn)
        verdict = None if peeked is None else self._continuation(parked, peeked)
        if verdict is None and peeked and not parked.backoff and _body_awaited(parked.conn, peeked):
            verdict = self._continuation(parked, _peek(parked.conn) or b"")  # (its first look)
        if verdict is None:
            parked.wait_more()
            partial[parked.fd] = parked
        elif verdict is False:
            self._hand_back(parked, "other")
        elif not self._page_awaited(parked, verdict):
            self._start(lambda: self._serve(parked, verdict))

    def _page_awaited(self, parked: _Parked, request: int) -> bool:
        """Whether a parked PIT walk's page is read ahead: served by `_ready` once it is ready."""
        if self._when_ready is None or not isinstance(parked.task, PitTask):
            return False
        key: bytes = parked.expected  # type: ignore[assignment]  # (a PIT walk's cursor key)
        return self._when_ready(parked.task, key, lambda size: self._ready(parked, request, size))

    def _ready(self, parked: _Parked, request: int, size: int | None) -> None:
        """A parked PIT walk's page read ahead is ready (`size` bytes; None: its preparation
        failed), called in this thread or the one that prepared it: that thread writes it when
        the socket's send buffer has room for it twice over (the write cannot wait for the
        client, so a client that stops reading holds no thread), else a writer thread does."""
        if size is not None and _room(parked.conn) >= 2 * (size + _HEAD_ROOM):
            self._serve(parked, request)
        else:
            self._start(lambda: self._serve(parked, request))

    def _continuation(self, parked: _Parked, peeked: bytes) -> int | bool | None:
        """The size of the continuation the socket holds; None: incomplete, wait; False: not one."""
        if not peeked or len(peeked) > MAX_REQUEST:
            return False
        template = parked.template
        if template is not None and len(peeked) < len(template) and template.startswith(peeked):
            return None  # (the start of the continuation: what the whole comparison finds too)
        size = len(peeked) if peeked == template else self._same_request(parked, peeked)
        if size is None or size is False:
            return size
        if isinstance(parked.task, ScrollTask) and (
            self._security is None or scroll_moves(self._security, parked.task.ctx_id) != parked.moves
        ):
            return False  # the server served a batch of it since (another connection)
        offer = parked.task.sink.park  # type: ignore[union-attr]
        if self._security is None:
            return False
        now, then = security_stamp(self._security, offer.users_file), offer.security
        if (now[0], now[2]) != (then[0], then[2]) or (now[1] != then[1] and isinstance(parked.task, PitTask)):
            return False
        if offer.until is not None and time.time() >= offer.until:
            return False
        if time.monotonic() > parked.ctx_until - _KEEP_ALIVE_MARGIN:
            return False
        with self._lock:
            if parked.task.ctx_id in self._forgotten or self._parked.get(parked.park_id) is not parked:
                return False
        return size

    @staticmethod
    def _same_request(parked: _Parked, peeked: bytes) -> int | bool | None:
        """The size of the request the socket holds when it is the one that parked but for the
        cursor (`_continuation`); None: incomplete, wait; False: another request."""
        split = _split(peeked)
        if split is None:
            complete = b"\r\n\r\n" in peeked
            return (
                False if complete or not parked.lines[0].startswith(peeked[: len(parked.lines[0])]) else None
            )
        lines, head, length = split
        if lines != parked.lines:
            return False
        if len(peeked) < head + length:
            return None
        if len(peeked) > head + length:  # pipelined behind it
            return False
        try:
            body = orjson.loads(peeked[head:])
        except orjson.JSONDecodeError:
            return False
        if not isinstance(body, dict) or body.keys() != parked.body.keys():
            return False
        if isinstance(parked.task, ScrollTask):
            if body["scroll_id"] != parked.expected or any(
                body[k] != v for k, v in parked.body.items() if k != "scroll_id"
            ):
                return False
        elif (
            body.get("pit") != parked.body["pit"]
            or any(body[k] != v for k, v in parked.body.items() if k != "search_after")
            or walks.cursor_key(body.get("search_after")) != parked.expected
        ):
            return False
        return head + length

    def _serve(self, parked: _Parked | None, size: int | None) -> None:
        """Consume the continuation and write its page (a writer thread, or the thread that saw
        a PIT page ready: `_ready`); parked again after. A scroll's next batch is rendered by
        this thread once its batch went out, and the next request that arrives meanwhile served
        by it too (`_followed`)."""
        while parked is not None and size is not None:
            parked = self._serve_one(parked, size)
            size = None if parked is None else self._followed(parked)

    def _serve_one(self, parked: _Parked, size: int) -> _Parked | None:
        """One page or batch (`_serve`): a scroll's connection parked again, for this thread to
        look at first; None: watched by the selector thread, or handed back."""
        task = parked.task
        held = []
        try:
            for target in task.targets:
                target.searcher.acquire()  # raises once the snapshot is gone
                held.append(target)
        except Exception:  # noqa: BLE001 - the context ended: the general path answers
            release_targets(held)
            self._hand_back(parked, "other")
            return None
        scroll = isinstance(task, ScrollTask)
        followed: list[_Parked] = []
        token = _FOLLOWED.set(followed if scroll else None)
        try:
            with after_reply(inline=scroll):
                if isinstance(task, ScrollTask):
                    self._serve_batch(parked, task, size)
                else:
                    self._serve_page(parked, task, size)
        except Exception:  # noqa: BLE001 - what reached the client is unknown: it closes
            log.exception("a parked walk's page failed")
            self._hand_back(followed[0] if followed else parked, "cut")
            return None
        finally:
            _FOLLOWED.reset(token)
            release_targets(held)
        return followed[0] if followed else None

    def _followed(self, parked: _Parked) -> int | None:
        """A kept scroll's connection after its batch, looked at by the thread that wrote it:
        the size of the continuation that arrived whole within `follow_seconds`, for it to
        serve; else None, the connection watched by the selector thread (or handed back)."""
        with self._lock:
            dropped = self._dropped.pop(parked.park_id, False)
        if dropped:  # closed by the server meanwhile
            self._tell(parked.park_id)
            self._release(parked)
            return None
        peeked = _peek(parked.conn)  # (mostly there already: the render took longer than the client)
        if peeked is None:
            poller = select.poll()
            poller.register(parked.fd, select.POLLIN)
            if poller.poll(self.follow_seconds * 1000):
                peeked = _peek(parked.conn)
        if peeked is not None:
            verdict = self._continuation(parked, peeked)
            if verdict is False:
                self._hand_back(parked, "other")
                return None
            if verdict is not None:
                return verdict
        self._tell(parked.park_id)  # the client is slower: told before the selector watches
        self._command("watch", parked)
        return None

    def _serve_page(self, parked: _Parked, task: PitTask, size: int) -> None:
        """A PIT walk's next page: the request consumed, the page written, the server told."""
        taken = self._take(parked, size)
        if taken is None:
            return
        parked.request = taken
        phases: list[tuple[str, float]] = []
        written = self._execute(task, self.park, None, phases)
        self._hold(parked.park_id, taken, phases)
        self._after(parked, written)

    def _serve_batch(self, parked: _Parked, task: ScrollTask, size: int) -> None:
        """A scroll's next batch, which ends where the context's record named: the request
        consumed before it is written, the server told with the batches after it (`_Notes`),
        the next ones left to serve here.

        Once `_EXTEND_AT` or fewer of the batches named are left after it, the batch finds the
        ends of the next ones too (`ScrollTask.extend`) and asks the server process to name them
        in the record (`scroll_pit.extend_record`), one ask at a time, told after the notes of the
        batches served (`_tell`); a batch served once the answer came serves them after the
        others, so a client that goes on reading is never handed back (the last batch named waits
        for an answer on its way, `_EXTENSION_WAIT`)."""
        (end, public_id), rest = parked.following[0], parked.following[1:]
        seq = parked.seq + 1
        phases: list[tuple[str, float]] = []
        consumed: list[bytes] = []
        with self._lock:
            extend = len(rest) <= _EXTEND_AT and parked.park_id not in self._extensions
        asked: list[tuple] = []

        def confirm(summary: tuple[list | None, int, int, list]) -> ScrollAhead | bool:
            cursor, _, took, ahead = summary
            if cursor != end:  # not the batch recorded (never expected): the server answers
                return False
            taken = self._take(parked, size)
            if taken is None:
                return False
            consumed.append(taken)
            parked.request = taken
            self._hold(parked.park_id, taken, phases, (seq, public_id, cursor, took))
            following = self._extended(parked.park_id, seq, rest)
            if extend:
                with self._lock:
                    self._extensions[parked.park_id] = extension = _Extension()
                if ahead:
                    last = rest[-1][0] if rest else end  # (the end of the last batch named)
                    asked.append(("extend", parked.park_id, seq + len(rest), last, ahead))
                else:  # nothing found past them: no more asks on this connection
                    extension.came.set()
            return ScrollAhead(seq, tuple(following))

        sink = task.sink if task.sink.fd == parked.fd else evolve(task.sink, fd=parked.fd)  # type: ignore[union-attr]
        named = 1 + len(rest)  # (this batch and those after it its record names)
        batch = evolve(
            task, public_id=public_id, elapsed=0.0, sink=sink, took=None, named=named, extend=extend
        )
        written = self._execute(batch, self.park, confirm, phases)[0]
        if asked:  # (once the batch went out) after the batches served: the context is where its
            self._tell(parked.park_id)  # client is, its record names no more than the window's
            self._send(asked[0])
        if not consumed:  # nothing taken, nothing written: the general path answers
            self._hand_back(parked, "other")
            return
        self._after(parked, written)

    def _extended(self, park_id: int, seq: int, rest: list[Any]) -> list[Any]:
        """The batches named after batch `seq` (`rest`), and after them those of the record's
        extension when its answer came and continues them; the last batch named waits for an
        answer on its way."""
        with self._lock:
            extension = self._extensions.get(park_id)
        if extension is None:
            return rest
        if not rest:
            extension.came.wait(_EXTENSION_WAIT)
        answer = extension.answer
        if answer is None or answer.seq != seq + len(rest):
            return rest
        with self._lock:
            if self._extensions.get(park_id) is extension:
                del self._extensions[park_id]
        return [*rest, *answer.ends]

    def _take(self, parked: _Parked, size: int) -> bytes | None:
        """The continuation's bytes consumed (peeked: all there); None: handed back (cut)."""
        taken = parked.conn.recv(size, socket.MSG_DONTWAIT)
        if len(taken) != size:
            self._hand_back(parked, "cut")
            return None
        return taken

    def _hold(
        self, park_id: int, taken: bytes, phases: list[tuple[str, float]], batch: tuple | None = None
    ) -> None:
        """A page or scroll batch (`batch`: its `ReaderContext.note`) served on the connection
        for request `taken`, told with the others held (`_tell`): by the selector thread within
        the notes' delay of the first held (woken when that is this one), or before anything
        else of the connection reaches the server process."""
        with self._lock:
            first = not self._notes
            notes = self._notes.get(park_id)
            if notes is None:
                notes = self._notes[park_id] = _Notes()
            notes.request_bytes += _body_length(taken)
            notes.requests += 1
            notes.phases += phases
            if batch is not None:
                notes.scroll.append(batch)
            if first:
                self._notes_due = time.monotonic() + self._notes_delay
        if first and threading.current_thread() is not self._thread:
            self._command("notes", None)

    def _tell(self, park_id: int) -> None:
        """Tell the server process of the pages or batches served on the connection and not told
        yet, in order (the batches a client holds are known there before it hears of anything
        after them on the connection: a hand-back, statistics, the scroll's next request
        elsewhere)."""
        with self._telling:
            with self._lock:
                notes = self._notes.pop(park_id, None)
            if notes is not None:
                self._send(("served", park_id, notes.message()))

    def _after(self, parked: _Parked, written: Written) -> None:
        """After a page served here: parked again (by `park`), or handed back."""
        if not written.complete:
            self._hand_back(parked, "cut")
        elif written.parked is None:  # not kept (the last page, or the limit): given back
            self._hand_back(parked, "other")
        else:
            with self._lock:
                again = self._parked.get(parked.park_id)
            if again is None or again.conn is not parked.conn:  # (kept: parked again on it)
                parked.conn.close()

    def _hand_back(self, parked: _Parked, reason: str) -> None:
        """Give the connection back to the server process (`idle`: it closes it as an idle
        keep-alive connection; `cut`: what reached the client is unknown, it closes it), told of
        the pages and batches served on it first."""
        self._tell(parked.park_id)
        if self._release(parked):
            self._send(("handback", parked.park_id, reason))

    def _release(self, parked: _Parked) -> bool:
        with self._lock:
            mine = self._parked.get(parked.park_id) is parked
            if mine:
                del self._parked[parked.park_id]
                self._extensions.pop(parked.park_id, None)
        if mine:
            parked.conn.close()
        return mine
