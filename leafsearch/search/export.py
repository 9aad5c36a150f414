"""The streaming export (`POST [/<target>]/_export`, a leafsearch extension): every matching
document of one snapshot as NDJSON lines, in a walk's total order, in one response.

An export is a PIT walk (walks.py) whose pages go to the connection as they are rendered: on its
own snapshot, pinned by a context of kind "export" opened for the request and freed with it, or
on a client's PIT (then a resumed or sliced export is exactly once under writes, as a PIT walk
is). Its pages are `ExportTask`s (export_pages.py) run where walks run (a search worker, or this
process for a walk alone), rendered there by column as lines (`fetch_phase.render_lines`).

- **Before the first byte** (`start`): the snapshot, the limits and the first page; a refusal is
  the usual error body and status.
- **After it, over plain TCP** (`chunks(sink)`): the rest is one task, given a duplicate of the
  client's socket, which writes every page to it as it renders it and then the trailer; this
  process only waits for it (export_pages.py says why). The socket's room is the backpressure:
  the writer holds one page.
- **After it, over TLS** (no socket to hand over): a producer thread runs the next pages while
  the connection sends the last one, at most `AHEAD` pages ahead of the socket (the HTTP layer
  waits for the socket to drain before taking the next).
- The last line is `{"_export": {"count", "complete": true[, "pit_id"]}}`; an error ends the
  stream with `{"error": ...}` and no `_export` line, so a client knows to resume after its last
  line. **A client that goes away** (`close`) cancels what runs; the export's own snapshot is
  freed, a PIT released with its keep-alive.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import queue
import threading
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ElasticError, SearchPhaseExecution, release_frames
from leafsearch.request.export_request import EXPORT_PAGE, ExportRequest
from leafsearch.request.search_types import PitSpec, SearchRequest
from leafsearch.search import phases
from leafsearch.search.contexts import ReaderContext
from leafsearch.search.execution import dispatch, run
from leafsearch.search.export_pages import ExportPage, ExportTask, error_line, trailer
from leafsearch.search.scroll_pit import acquire_context
from leafsearch.search.socket_sink import Sink
from leafsearch.search.stored_scripts import resolve_stored_scripts
from leafsearch.search.targets import release_targets

if TYPE_CHECKING:
    from collections.abc import Iterator

    from leafsearch.search.services import CoordinatorServices

#: Pages rendered ahead of the socket (the one the connection sends is not counted).
AHEAD = 2
#: How often a producer waiting for room looks whether the export ended.
_POLL_SECONDS = 0.1
#: The export's own snapshot is kept this long after its last use (only a crash of the
#: request's thread could leave it: the stream frees it when it ends).
_OWN_KEEP_ALIVE = 60.0
_END = object()


def start(services: CoordinatorServices, export: ExportRequest, cancelled: threading.Event) -> ExportStream:
    """The export's snapshot pinned, its limits checked and its first page rendered; raises
    (before any byte is sent) what refuses it."""
    walk = resolve_stored_scripts(services.stored_script, export.walk)
    keep_alive = None
    if export.own_snapshot:
        targets = phases.resolve_targets(services, walk)
        try:
            ctx = services.contexts.open("export", targets, _OWN_KEEP_ALIVE, in_use=True)
        except BaseException:
            release_targets(targets)
            raise
        walk = dataclasses.replace(walk, pit=PitSpec(ctx.public_id))
    else:
        assert walk.pit is not None
        ctx = acquire_context(services, walk.pit.id, "pit")
        if walk.pit.keep_alive:
            try:
                requested = services.contexts.keep_alive_seconds(walk.pit.keep_alive, "keep_alive")
            except ElasticError as exc:
                services.contexts.release(ctx)
                raise SearchPhaseExecution(exc) from None
            keep_alive = max(ctx.keep_alive, requested)
    stream = ExportStream(services, ctx, walk, export.own_snapshot, keep_alive, cancelled)
    try:
        phases.check_limits(services, walk, ctx.targets)
        stream.first_page()
    except BaseException:
        stream.end()
        raise
    return stream


class ExportStream:
    """One export after its first page: `chunks()` gives its bytes, `close()` stops it."""

    media_type = "application/x-ndjson"

    def __init__(
        self,
        services: CoordinatorServices,
        ctx: ReaderContext,
        walk: SearchRequest,
        own: bool,
        keep_alive: float | None,
        cancelled: threading.Event,
    ) -> None:
        self._services = services
        self._ctx = ctx
        self._walk = walk
        self._own = own
        self._keep_alive = keep_alive
        self._cancelled = cancelled
        self._remote = any(t.remote for t in ctx.targets)
        # Pinned shard contexts are this process's: a search worker reads the same snapshots.
        self._pins = ctx.shard_contexts if services.workers is None or self._remote else None
        self._affinity = (ctx.ctx_id, None if walk.slice is None else walk.slice.id)
        self._cursor: list[Any] | None = walk.search_after
        self._queue: queue.Queue[Any] = queue.Queue(AHEAD)
        self._first: ExportPage | None = None
        self._lines = 0
        self._ended = False
        self._end_lock = threading.Lock()
        self._producer: threading.Thread | None = None
        self._done = False  # the producer stopped
        self._pit_id = None if own else ctx.public_id
        services.exports.started()

    def _run(self, task: ExportTask) -> ExportPage:
        if self._remote:
            return run(self._services, task, self._cancelled)
        # The rest of an export written to the socket is not relayed: a worker writes it even
        # for an export alone (the reason a lone walk stays here is its relay's cost).
        relayed = task.sink is None
        return dispatch(self._services, task, self._cancelled, affinity=self._affinity, relayed=relayed)

    def _page(self) -> ExportPage:
        request = dataclasses.replace(self._walk, search_after=self._cursor)
        page = self._run(ExportTask(self._ctx.targets, request, self._ctx.ctx_id, self._pins))
        if page.cursor is not None:
            self._cursor = page.cursor
        return page

    def first_page(self) -> None:
        self._first = self._page()

    def chunks(self, sink: int | None) -> Iterator[bytes]:
        """The export's bytes: the first page; then, given the client's socket (`sink`, with
        nothing pending on it once the first page is sent), the rest written to it by the process
        that renders them (export_pages.py; nothing more is yielded), else the pages the producer
        renders (started here)."""
        first = self._first
        assert first is not None
        self._first = None
        if first.count:
            self._lines += first.count
            yield first.lines
        if first.count < EXPORT_PAGE:
            yield trailer(self._lines, self._pit_id)
            self.end()
            return
        if sink is not None:
            self._write_rest(sink)
            return
        context = contextvars.copy_context()
        with self._end_lock:
            if self._ended:  # closed meanwhile
                return
            self._producer = threading.Thread(
                target=context.run, args=(self._produce,), name="leafsearch-export", daemon=True
            )
            self._producer.start()
        while True:
            try:
                chunk = self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._done:
                    return
                continue
            if chunk is _END:
                return
            yield chunk

    def _write_rest(self, sink: int) -> None:
        """The rest of the export as one task writing to the client's socket."""
        request = dataclasses.replace(self._walk, search_after=self._cursor)
        task = ExportTask(
            self._ctx.targets, request, self._ctx.ctx_id, self._pins, Sink(sink), self._lines, self._pit_id
        )
        self._services.exports.handed_over()
        try:
            written = self._run(task)
            self._lines += written.count
            if written.gone:  # (counted as cancelled now: the connection's close may come later)
                self._cancelled.set()
        finally:
            self.end()

    def _produce(self) -> None:
        try:
            while not self._cancelled.is_set():
                page = self._page()
                if page.count and not self._put(page.lines):
                    return
                self._lines += page.count
                if page.count < EXPORT_PAGE:
                    self._put(trailer(self._lines, self._pit_id))
                    return
        except Exception as exc:  # noqa: BLE001 - the stream ends with an error line, the node goes on
            self._put(error_line(exc))
            release_frames(exc)
        finally:
            self.end()
            self._done = True
            with contextlib.suppress(queue.Full):  # (a full queue: the reader sees `_done`)
                self._queue.put_nowait(_END)

    def _put(self, item: Any) -> bool:
        """Queue an item for the connection, waiting for room; False when the export was closed."""
        while not self._cancelled.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """The connection ended (sent all, or its client went away): stop what still runs. The
        producer frees the snapshot as it stops; without one, it is freed here."""
        self._cancelled.set()
        if self._producer is None:
            self.end()

    def end(self) -> None:
        """Free what the export holds (once): its own snapshot, or its use of the PIT."""
        with self._end_lock:
            if self._ended:
                return
            self._ended = True
        contexts = self._services.contexts
        contexts.release(self._ctx, self._keep_alive)
        if self._own:
            contexts.free(self._ctx, "freed at the end of its export")
        self._services.exports.ended(self._lines, self._cancelled.is_set())
