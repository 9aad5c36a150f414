"""An export's pages where the segments are read (a search worker, or the server process): each
page rendered by column as NDJSON lines (`fetch_phase.render_lines`), and, given the client's
socket (`ExportTask.sink`), the rest of the export written to it by the process that renders it
(socket_sink.py says why), after the HTTP server sent the response head and the first page.

The body is chunked (HTTP/1.1): each page is one chunk, written with one `writev` of its size
line, its lines and the CRLF (no copy of the page). The final empty chunk is the HTTP server's,
once the task returns.
"""

from __future__ import annotations

import logging
import pickle
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.rawjson import as_bytes
from leafsearch.common.wire_pickle import evolve
from leafsearch.errors import ElasticError, release_frames
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import phases, top_hits, walks
from leafsearch.search.fetch_phase import last_sort_values, render_lines
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.socket_sink import Gone, Sink, send_all

if TYPE_CHECKING:
    from leafsearch.search.hitlist import HitList
    from leafsearch.search.services import SearchServices
    from leafsearch.search.targets import Target

log = logging.getLogger("leafsearch.export")


@dataclass(eq=False)
class ExportTask:
    """An export's page after `request.search_after` on a PIT's snapshots (the export's own or
    the client's), as NDJSON lines; with `sink`, every page from there on, written to it."""

    targets: list[Target]
    request: SearchRequest
    ctx_id: int
    #: As `PitTask.contexts`.
    contexts: list[ShardContextId] | None = None
    #: The client's socket, the response head sent (socket_sink.py).
    sink: Sink | None = None
    #: Lines the export sent before this task (the trailer counts all of them).
    sent: int = 0
    #: The PIT the export reads, named by the trailer (None: the export's own snapshot).
    pit_id: str | None = None


@dataclass(frozen=True, slots=True)
class ExportPage:
    """An export page's lines; `count` of them, the last one's sort values (`cursor`, the walk's
    next cursor; None when there is none). A task with a sink answers what it wrote, no lines,
    whether it wrote the trailer (`complete`), and whether its client went away (`gone`)."""

    lines: bytes
    count: int
    cursor: list[Any] | None
    complete: bool = False
    gone: bool = False

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickled (protocol 5) with its lines as a buffer, sent out of band (as `RawJSON`)."""
        lines = pickle.PickleBuffer(self.lines) if protocol >= 5 else self.lines
        return _page_of, (lines, self.count, self.cursor, self.complete, self.gone)


def _page_of(
    lines: bytes | memoryview, count: int, cursor: list[Any] | None, complete: bool, gone: bool
) -> ExportPage:
    return ExportPage(as_bytes(lines), count, cursor, complete, gone)


def trailer(count: int, pit_id: str | None) -> bytes:
    """The export's last line: how many lines it sent, and that it is complete."""
    summary: dict[str, Any] = {"count": count, "complete": True}
    if pit_id is not None:
        summary["pit_id"] = pit_id
    return orjson.dumps({"_export": summary}) + b"\n"


def error_line(exc: BaseException) -> bytes:
    """The line that ends an export an error cut: Elasticsearch's error body (anything not an
    ElasticError is logged and named only by its class)."""
    if not isinstance(exc, ElasticError):
        log.error("an export failed after its first line", exc_info=exc)
        exc = ElasticError(
            f"an unexpected [{type(exc).__name__}] failed this export; the node's log has the details"
        )
    return orjson.dumps(exc.body()) + b"\n"


def run(services: SearchServices, task: ExportTask, cancelled: threading.Event | None) -> ExportPage:
    return page(services, task, cancelled) if task.sink is None else _write_rest(services, task, cancelled)


def page(
    services: SearchServices, task: ExportTask, cancelled: threading.Event | None, walk: str | None = None
) -> ExportPage:
    """An export's page: the walk's window (or a query phase from its cursor), rendered as lines
    by column (fetch_phase.render_lines). `walk`: the walk's identity, when the caller knows it
    (`walks.windowed`)."""

    def query(asked: SearchRequest) -> tuple[HitList, Any]:
        return phases.query_phase(
            services, task.targets, asked, aggs=False, cancelled=cancelled, contexts=task.contexts
        )

    hitlist, start, end, _ = walks.windowed(services, task.ctx_id, task.targets, task.request, query, walk)
    if end <= start:
        return ExportPage(b"", 0, None)
    with services.search_stats.phase("fetch", task.targets):
        lines = render_lines(
            hitlist,
            start,
            end,
            task.request,
            shards=top_hits.shard_handles(services, hitlist.targets),
            pool=services.shard_pool,
        )
    return ExportPage(lines, end - start, last_sort_values(hitlist, end))


def _write_rest(services: SearchServices, task: ExportTask, cancelled: threading.Event | None) -> ExportPage:
    """Every page from the task's cursor written to its sink, then the trailer, or an error line
    when a page fails (the client resumes after the last line it got). Answers what was written;
    stops, writing nothing more, when the client goes away or the export is cancelled."""
    assert task.sink is not None
    cursor = task.request.search_after
    walk = walks.identity(task.request)  # (every page's: a repr of the request, once, not per page)
    written = 0
    fd = task.sink.fd
    try:
        while True:
            request = evolve(task.request, search_after=cursor)
            try:
                found = page(services, evolve(task, request=request, sink=None), cancelled, walk)
            except Exception as exc:  # noqa: BLE001 - the stream ends with an error line
                _write_chunk(fd, error_line(exc), cancelled)
                release_frames(exc)
                return ExportPage(b"", written, cursor)
            if found.count:
                _write_chunk(fd, found.lines, cancelled)
                written += found.count
                cursor = found.cursor
            if found.count < task.request.size:
                _write_chunk(fd, trailer(task.sent + written, task.pit_id), cancelled)
                return ExportPage(b"", written, cursor, complete=True)
    except Gone:
        return ExportPage(b"", written, cursor, gone=True)


def _write_chunk(fd: int, data: bytes, cancelled: threading.Event | None) -> None:
    """One HTTP chunk of `data`, whole, to the socket `fd`; `Gone` when the client went away or
    the export was cancelled meanwhile."""
    send_all(fd, [b"%x\r\n" % len(data), data, b"\r\n"], cancelled)
