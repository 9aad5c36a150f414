"""The streaming export (`POST [/<target>]/_export`, a leafsearch extension): every matching
document of one snapshot as NDJSON lines, in a walk's total order, in one response.

An export is a PIT walk (walks.py) whose pages go to the connection as they are rendered: on its
own snapshot, pinned by a context of kind "export" opened for the request and freed with it, or
on a client's PIT (then a resumed or sliced export is exactly once under writes, as a PIT walk
is). Each page is an `ExportTask` (execution.py) run where walks run (a search worker, or this
process for a lone walk), rendered there by column as lines (`fetch_phase.render_lines`), and
handed on as one bytes object; the coordinator only counts it and keeps its last sort values.

- **Before the first byte** (`start`): the snapshot, the limits and the first page; a refusal is
  the usual error body and status.
- **After it** (`ExportStream`): a producer thread runs the next pages while the connection
  sends the last one, at most `AHEAD` pages ahead of the socket (the HTTP layer waits for the
  socket to drain before taking the next), so memory is bounded whatever the export's size. The
  last line is `{"_export": {"count", "complete": true[, "pit_id"]}}`; an error ends the stream
  with `{"error": ...}` and no `_export` line, so a client knows to resume after its last line.
- **A client that goes away** (`close`) stops the producer and the page it runs; the export's
  own snapshot is freed, a PIT released with its keep-alive.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import queue
import threading
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.errors import ElasticError, SearchPhaseExecution, release_frames
from leafsearch.request.export_request import EXPORT_PAGE, ExportRequest
from leafsearch.request.search_types import PitSpec
from leafsearch.search import phases
from leafsearch.search.contexts import ReaderContext
from leafsearch.search.execution import ExportPage, ExportTask, dispatch, run
from leafsearch.search.scroll_pit import acquire_context
from leafsearch.search.targets import release_targets

if TYPE_CHECKING:
    from collections.abc import Iterator

    from leafsearch.search.services import CoordinatorServices

log = logging.getLogger("leafsearch.export")

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
    walk = export.walk
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
        walk: Any,
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
        services.exports.started()

    def _page(self) -> ExportPage:
        request = dataclasses.replace(self._walk, search_after=self._cursor)
        task = ExportTask(self._ctx.targets, request, self._ctx.ctx_id, self._pins)
        if self._remote:
            page = run(self._services, task, self._cancelled)
        else:
            page = dispatch(self._services, task, self._cancelled, affinity=self._affinity)
        if page.cursor is not None:
            self._cursor = page.cursor
        return page

    def first_page(self) -> None:
        self._first = self._page()

    def chunks(self) -> Iterator[bytes]:
        """The export's bytes: the first page, then what the producer renders (started here)."""
        first = self._first
        assert first is not None
        self._first = None
        if first.count:
            self._lines += first.count
            yield first.lines
        if first.count < EXPORT_PAGE:
            yield self._trailer()
            self.end()
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

    def _produce(self) -> None:
        try:
            while not self._cancelled.is_set():
                page = self._page()
                if page.count and not self._put(page.lines):
                    return
                self._lines += page.count
                if page.count < EXPORT_PAGE:
                    self._put(self._trailer())
                    return
        except ElasticError as exc:
            self._put(orjson.dumps(exc.body()) + b"\n")
            release_frames(exc)
        except Exception as exc:  # noqa: BLE001 - the stream ends with an error line, the node goes on
            log.error("an export failed after its first line", exc_info=exc)
            error = ElasticError(
                f"an unexpected [{type(exc).__name__}] failed this export; the node's log has the details"
            )
            self._put(orjson.dumps(error.body()) + b"\n")
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

    def _trailer(self) -> bytes:
        summary: dict[str, Any] = {"count": self._lines, "complete": True}
        if not self._own:
            summary["pit_id"] = self._ctx.public_id
        return orjson.dumps({"_export": summary}) + b"\n"

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
