"""What a search process runs: one page of a search over shard snapshots the caller resolved.

The server process resolves indices, checks limits and owns reader contexts (their lifetime,
keep-alive, a scroll's cursor); everything after that is a *task* here: a plain search, a count,
a page of a point in time, a batch of a scroll. A task names its snapshots (`Target`s) and the
typed request, and its result is the response body, so the same function runs in the server
process (`--search-workers 0`, the in-process `Node`) or in a search worker process
(search/workers/), which rebuilds the Targets from published snapshot manifests.

A walk's page is the page after its cursor (walks.py): a PIT page's `search_after`, or the
cursor a scroll's context keeps in the server process, which travels in each task and comes back
moved past the batch. What a process keeps of a walk, keyed by context number in
`services.contexts`, only makes pages cheaper: the pages read ahead, and the list of every match
of a walk sorted by `_score` (`walks.WalkMemory`). A process that lost them (a worker replaced
after a crash) finds the next page from the cursor, and the walk goes on exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.rawjson import RawJSON
from leafsearch.common.wire_pickle import evolve
from leafsearch.request.search_types import DOC, SearchRequest
from leafsearch.search import export_pages, phases, query_and_fetch, walks
from leafsearch.search.export_pages import ExportTask
from leafsearch.search.fetch_phase import each_sort_values, last_sort_values, renders_raw
from leafsearch.search.hitlist import HitList, LiveDocs, effective_sort, sort_column
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.slicing import scroll_selection
from leafsearch.search.socket_sink import Confirm, Sink, write_response
from leafsearch.search.targets import Target

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices, SearchServices


@dataclass(eq=False)
class SearchTask:
    """A search's page over the current snapshots (no PIT, no scroll)."""

    targets: list[Target]
    request: SearchRequest
    elapsed: float  # seconds the request had already taken (its `took` counts them)
    raw_hits: bool


@dataclass(eq=False)
class CountTask:
    targets: list[Target]
    request: SearchRequest


@dataclass(eq=False)
class PitTask:
    """A page of a search on a point in time's snapshots."""

    targets: list[Target]
    request: SearchRequest
    elapsed: float
    raw_hits: bool
    ctx_id: int
    public_id: str
    #: Per target, the shard context pinning it, when the page runs where the pins are (this
    #: process); None in a search worker, whose targets are the same snapshots rebuilt.
    contexts: list[ShardContextId] | None = None
    #: The client's socket: the response is written to it, the result is what was `Written`.
    sink: Sink | None = None
    #: The walk's identity (`walks.identity` of the request), when the caller knows it: a parked
    #: walk's pages (workers/parking.py) are one walk, and the identity is a repr of the request.
    walk: str | None = None


@dataclass(eq=False)
class ScrollTask:
    """A scroll's batch after `cursor` (the first, with its aggregations, when `opening`).

    `request` is the one that opened the scroll; `total`: its matches, counted by the first
    batch (None when opening); `read_ahead`: prepare the next batch in the background (the walk
    goes on). The result: (response body, the cursor after the batch, the total, the ends of
    the batches after it that the walk already holds, at most `RECORDED_AHEAD`: the scroll's
    record names them, scroll_pit.py); with `sink`, the body is written to it (socket_sink.py)
    and `Written` takes its place."""

    targets: list[Target]
    request: SearchRequest
    elapsed: float
    raw_hits: bool
    ctx_id: int
    public_id: str
    cursor: list[Any] | None
    total: int | None
    opening: bool
    read_ahead: bool
    #: As `PitTask.contexts`.
    contexts: list[ShardContextId] | None = None
    #: As `PitTask.sink`.
    sink: Sink | None = None
    #: A replayed batch's `took`, as first answered (the same bytes again).
    took: int | None = None
    #: How many batches from this one on the scroll's record names already: the ends of the
    #: batches after a batch it names are not needed, so not found (`_ends_ahead`).
    named: int = 0
    #: Find the ends of the batches after the `named` ones all the same: a worker serving a kept
    #: scroll asks the server process to extend the record with them (workers/parking.py).
    extend: bool = False


Task = SearchTask | CountTask | PitTask | ScrollTask | ExportTask

#: Keeps the client's connection after a PIT page or scroll batch written to it (a search
#: worker's parking, search/workers/parking.py), given the task and what its next page starts
#: from (a PIT page's cursor; a scroll's `ScrollAhead`, the server's answer to its batch): the
#: worker's pid when kept, else None.
Park = Callable[["PitTask | ScrollTask", Any], "int | None"]


@dataclass(frozen=True, slots=True)
class ScrollAhead:
    """The server process's answer to a scroll batch it recorded (its `Confirm` for a connection
    a worker may keep): write it, and the positions after it that the context's record names
    already, each (the cursor its batch ends at, the id answered with it), which a worker may
    serve on the kept connection without another record (search/workers/parking.py)."""

    #: The number of the batch's id (the context's `seq` once it is answered).
    seq: int
    ends: tuple[tuple[list[Any], str], ...]

    def __bool__(self) -> bool:
        return True


#: How many batches after the one answered a scroll batch names by their ends (its window's, or
#: the live documents after it), so that its context's record, written before the batch goes
#: out, also covers the next ones: one `fdatasync` per up to this many + 1 batches (3 ms each on
#: ext4, more than rendering a batch of 1,000 hits costs), and a worker keeping the scroll's
#: connection serves them all (workers/parking.py): 32 instead of 8 halved the server process's
#: CPU per batch of a `_doc` scroll (0.35 to 0.2 ms; bench/RESULTS.md, session 16); 64 since only
#: a batch starting a new record finds them (`ScrollTask.named`), its window's general path
#: (hand-back, record, task: 2-5 ms on a loaded machine) once per 65 batches (session 17), until
#: a worker keeping the scroll's connection had the record extended by this many ahead of the
#: window's end (`ScrollTask.extend`, session 26).
RECORDED_AHEAD = 64


def dispatch(
    services: CoordinatorServices,
    task: Task,
    cancelled: threading.Event | None = None,
    affinity: Any = None,
    *,
    relayed: bool = True,
    confirm: Confirm | None = None,
) -> Any:
    """Run a task in a search worker when the node has them (here while none is ready).

    `affinity`: tasks with equal keys go to the same worker while it lives (a walk's requests
    find its caches); None lets the least busy worker take it. `relayed=False`: the task's
    result is not relayed by this process (it writes to the client itself), so even a walk alone
    goes to a worker, leaving this process's interpreter to the other requests. `confirm`: as
    in `run`, called in this thread."""
    pool = services.workers
    if pool is not None:
        return pool.run(task, cancelled=cancelled, affinity=affinity, relayed=relayed, confirm=confirm)
    return run(services, task, cancelled, confirm)


def run(
    services: SearchServices,
    task: Task,
    cancelled: threading.Event | None = None,
    confirm: Confirm | None = None,
    park: Park | None = None,
) -> Any:
    """Run a task in this process. `services`: the server process's or a search worker's;
    `confirm`: called before a response is written to the client's socket (socket_sink.py);
    `park`: offered the connection after a PIT page or scroll batch written whole to it (a
    worker's; a scroll's when `confirm` answered a `ScrollAhead` naming batches after it)."""
    if isinstance(task, SearchTask):
        return _search(services, task, cancelled)
    if isinstance(task, CountTask):
        return _count(services, task, cancelled)
    if isinstance(task, PitTask):
        body, ahead = _pit_page(services, task, cancelled)
        if task.sink is None:
            ahead()
            return body
        written = write_response(
            task.sink, body, cancelled, None if confirm is None else partial(confirm, None)
        )
        following = ahead()  # (once the page went out: not on its way)
        if park is not None and task.sink.park is not None and written.complete and following is not None:
            written = evolve(written, parked=park(task, following))
        return written
    if isinstance(task, ExportTask):
        return export_pages.run(services, task, cancelled)
    body, cursor, total, ahead = _scroll_batch(services, task, cancelled)
    if task.took is not None:
        body["took"] = task.took
    if task.sink is None:
        return body, cursor, total, ahead
    answers: list[Any] = []
    asked = None
    if confirm is not None:
        summary = (cursor, total, body["took"], ahead)

        def asked() -> bool:
            answers.append(confirm(summary))
            return bool(answers[-1])

    written = write_response(task.sink, body, cancelled, asked)
    kept = answers[0] if answers and isinstance(answers[0], ScrollAhead) and answers[0].ends else None
    if park is not None and task.sink.park is not None and written.complete and kept is not None:
        after = evolve(task, cursor=cursor, total=total)
        written = evolve(written, parked=park(after, kept))
    return written, cursor, total, ahead


def _started(elapsed: float) -> float:
    return time.perf_counter() - elapsed


def _search(services: SearchServices, task: SearchTask, cancelled: threading.Event | None) -> dict[str, Any]:
    request, targets = task.request, task.targets
    started = _started(task.elapsed)
    fetch = query_and_fetch.along(request, task.raw_hits, last_phase=True)
    hitlist, tree = phases.query_phase(
        services, targets, request, aggs=True, cancelled=cancelled, fetch=fetch
    )
    start, end = phases.page_bounds(hitlist, request)
    return phases.response(
        services,
        hitlist,
        request,
        start,
        end,
        started,
        agg_tree=tree,
        extra={},
        raw_hits=task.raw_hits,
        last_phase=True,
    )


def _count(services: SearchServices, task: CountTask, cancelled: threading.Event | None) -> dict[str, Any]:
    hitlist, _ = phases.query_phase(services, task.targets, task.request, aggs=False, cancelled=cancelled)
    return {"count": hitlist.total, "_shards": phases.shards_header(services, hitlist)}


@dataclass(eq=False)
class _Page:
    """A walk's page: the hits [start, end) of `hitlist`, and their bytes when prepared ahead."""

    hitlist: HitList
    start: int
    end: int
    #: (An empty page's rendered hits are `[]`.)
    hits: RawJSON | list | None = None
    #: How to find the cursors after the next full pages past the first `skip` of them without
    #: holding their hits, when they are asked for (`_ends_ahead`).
    ends: Callable[[int], list[list[Any]]] | None = None

    def nbytes(self) -> int:
        return len(self.hits.data) if isinstance(self.hits, RawJSON) else 0


def _pit_page(
    services: SearchServices, task: PitTask, cancelled: threading.Event | None
) -> tuple[dict[str, Any], Callable[[], list[Any] | None]]:
    """The page's body, and a call that reads the walk's next page ahead and returns its cursor
    (None: not read ahead), made once the page went out."""
    request, raw_hits = task.request, task.raw_hits
    started = _started(task.elapsed)
    read_ahead = services.contexts.read_ahead
    ahead = raw_hits and renders_raw(request) and request.aggs is None and not request.profile
    walk = (task.walk or walks.identity(request)) if ahead else None
    served = walks.cursor_key(request.search_after)
    page = read_ahead.take(task.ctx_id, walk, served) if ahead else None
    tree = None
    if page is None:
        page, tree = _pit_hits(services, task, request, cancelled, prepared=False, walk=walk)
    body = phases.response(
        services,
        page.hitlist,
        request,
        page.start,
        page.end,
        started,
        agg_tree=tree,
        extra={"pit_id": task.public_id},
        raw_hits=raw_hits,
        ready=page.hits,
    )

    def following() -> list[Any] | None:
        if not (ahead and request.size and page.end - page.start == request.size and page.hitlist.columns):
            return None
        # The walk's next page: `search_after` the last hit of this one.
        cursor = last_sort_values(page.hitlist, page.end)
        after = evolve(request, search_after=cursor, from_=0)
        read_ahead.continue_walk(
            task.ctx_id,
            walk,
            served,
            walks.cursor_key(cursor),
            task.targets,
            lambda: _rendered(
                services, _pit_hits(services, task, after, None, prepared=True, walk=walk)[0], after
            ),
        )
        return cursor

    return body, following


def _pit_hits(
    services: SearchServices,
    task: PitTask,
    request: SearchRequest,
    cancelled: threading.Event | None,
    *,
    prepared: bool,
    walk: str | None = None,
) -> tuple[_Page, Any]:
    """A PIT page's hits and the aggregation tree: from the walk's kept list when it pages one
    (walks.py; only a request builds it, not a page `prepared` ahead), else from the walk's
    window or a query phase from the cursor (`walks.windowed`; `walk`: the walk's identity, when
    known)."""
    now = int(time.time() * 1000)
    listed = walks.kept_list(services, task.ctx_id, task.targets, request, now, cancelled, build=not prepared)
    if listed is not None:
        return _Page(listed, *phases.page_bounds(listed, request)), None
    fetch = query_and_fetch.along(request, task.raw_hits or prepared, last_phase=False)

    def query(asked: SearchRequest) -> tuple[HitList, Any]:
        return phases.query_phase(
            services, task.targets, asked, aggs=True, cancelled=cancelled, contexts=task.contexts, fetch=fetch
        )

    hitlist, start, end, tree = walks.windowed(services, task.ctx_id, task.targets, request, query, walk)
    return _Page(hitlist, start, end), tree


def _rendered(services: SearchServices, page: _Page, request: SearchRequest) -> _Page:
    """A page prepared ahead: its hits rendered as the REST layer takes them."""
    page.hits = phases.fetch_page(services, page.hitlist, page.start, page.end, request, raw_hits=True)
    return page


def walks_docs(request: SearchRequest) -> bool:
    """Whether a scroll walks every document in `_doc` order: no sort and no query are needed.

    Such a scroll (SPEC 4.1 r12, the fastest export) reads the snapshots' live documents in
    (shard, doc) order; a batch is a range of them from the cursor's rank, located by binary
    search, so each batch costs only its own documents. A sliced one reads its slice's (each
    segment's partition by slice is kept while the segment lives: slicing.py).
    """
    return request.plain_walk(DOC) and not request.sort[0].descending


def _scroll_batch(
    services: SearchServices, task: ScrollTask, cancelled: threading.Event | None
) -> tuple[dict[str, Any], list[Any] | None, int, list[list[Any]]]:
    """The batch after the task's cursor; the cursor after it, the scroll's total and the ends
    of the full batches after it that the walk's hits at hand show (`_ends_ahead`)."""
    started = _started(task.elapsed)
    request = task.request
    read_ahead = services.contexts.read_ahead
    served = walks.cursor_key(task.cursor)
    page = read_ahead.take(task.ctx_id, "scroll", served) if task.read_ahead else None
    tree = None
    if page is None:
        walk, shown = walks.walk_request(request, task.cursor, counts=task.opening)
        page, tree = _scroll_hits(services, task, walk, shown, cancelled, prepared=False)
    else:  # (read ahead: only the walk from the cursor after it is made, below)
        shown = len(effective_sort(request))
    cursor = last_sort_values(page.hitlist, page.end) if page.end > page.start else task.cursor
    total = page.hitlist.total if task.total is None else task.total
    body = phases.response(
        services,
        _shown(page.hitlist, shown, total),
        # Suggestions come with the first batch only; a request left as it is (its identity)
        # keeps a fetch that came along with the query (query_and_fetch.py).
        request if task.opening or not request.suggest else evolve(request, suggest=()),
        page.start,
        page.end,
        started,
        agg_tree=tree,
        extra={"_scroll_id": task.public_id},
        raw_hits=task.raw_hits,
        ready=page.hits,
    )
    if task.read_ahead and page.end - page.start == request.size:
        after, _ = walks.walk_request(request, cursor, counts=False)
        read_ahead.continue_walk(
            task.ctx_id,
            "scroll",
            served,
            walks.cursor_key(cursor),
            task.targets,
            lambda: _rendered_batch(services, task, after, shown, total),
        )
    found = task.named < 1 or task.extend
    return body, cursor, total, _ends_ahead(page, request.size, task.named) if found else []


def _ends_ahead(page: _Page, size: int, named: int) -> list[list[Any]]:
    """The cursors after each of the next full batches (at most `RECORDED_AHEAD`) after the
    `named` batches from this one on (this one's end counts as named) that the page's hit list
    holds beyond the page: a window, a kept list or live documents hold the walk's next hits in
    its order, so the batches after this one end there. Asked for of a batch the scroll's record
    does not name (a new record names them), one in up to `RECORDED_AHEAD` + 1, or to extend a
    kept scroll's record (`ScrollTask.extend`)."""
    if not size or page.end - page.start < size:
        return []
    skip = max(named - 1, 0)
    if page.ends is not None:
        return page.ends(skip)
    last = min(len(page.hitlist), page.end + (skip + RECORDED_AHEAD) * size)
    first = page.end + (skip + 1) * size
    return [last_sort_values(page.hitlist, end) for end in range(first, last + 1, size)]


def _scroll_hits(
    services: SearchServices,
    task: ScrollTask,
    walk: SearchRequest,
    shown: int,
    cancelled: threading.Event | None,
    *,
    prepared: bool,
) -> tuple[_Page, Any]:
    """A scroll batch's hits (in the walk's columns) and the aggregation tree (the first batch):
    live documents from the cursor's rank for a `_doc` scroll of every document, the walk's kept
    list for one sorted by `_score` (walks.py), else its window or a query phase from the cursor
    (`walks.windowed`)."""
    request, targets = task.request, task.targets
    if walks_docs(request) and not any(t.alias_filter or t.remote for t in targets):
        with services.search_stats.phase("query", targets):
            return _live_docs_batch(targets, walk, request.size), None
    now = int(time.time() * 1000)
    listed = walks.kept_list(services, task.ctx_id, targets, walk, now, cancelled, build=not prepared)
    if listed is not None:
        return _Page(listed, *phases.page_bounds(listed, walk)), None
    raw = task.raw_hits or prepared
    fetch = query_and_fetch.along(request, raw, last_phase=False, query=walk, shown=shown)

    def query(asked: SearchRequest) -> tuple[HitList, Any]:
        return phases.query_phase(
            services,
            targets,
            asked,
            aggs=task.opening,
            cancelled=cancelled,
            contexts=task.contexts,
            fetch=fetch,
        )

    hitlist, start, end, tree = walks.windowed(services, task.ctx_id, targets, walk, query)
    return _Page(hitlist, start, end), tree


def _live_docs_batch(targets: list[Target], walk: SearchRequest, size: int) -> _Page:
    """The batch of a `_doc` scroll of every document after the walk's cursor (`_doc`, then
    `_shard_doc`): the live documents from the cursor's rank on (a slice's only), and how to find
    the ends of the next `RECORDED_AHEAD` full batches past the first `skip` of them, each the
    sort values of its last document (located all at once: `LiveDocs.at`; read while the batch's
    snapshots are held)."""
    docs = LiveDocs(targets, None if walk.slice is None else scroll_selection(walk.slice, targets))
    position = 0 if walk.search_after is None else docs.rank(walk.search_after[-1])
    end = min(position + size, docs.total)
    page = _live_docs(targets, walk, docs.total, *docs.take(position, end))

    def ends(skip: int) -> list[list[Any]]:
        last = min(end + (skip + RECORDED_AHEAD) * size, docs.total)
        lasts = np.arange(end + (skip + 1) * size, last + 1, size, dtype=np.int64) - 1
        return each_sort_values(_live_docs(targets, walk, docs.total, *docs.at(lasts))) if len(lasts) else []

    return _Page(page, 0, end - position, ends=ends)


def _live_docs(
    targets: list[Target], walk: SearchRequest, total: int, target_arr: np.ndarray, doc_arr: np.ndarray
) -> HitList:
    """These live documents (of `total`) in the walk's sort columns."""
    seg_docs: list = []
    columns = [sort_column(spec, targets, seg_docs, target_arr, doc_arr, None) for spec in walk.sort]
    return HitList(targets, target_arr, doc_arr, None, columns, [], total, None, window=True)


def _shown(hitlist: HitList, shown: int, total: int) -> HitList:
    """A scroll batch's hit list as the scroll shows it: its own sorts (not the walk's
    tiebreaker) and its total. A copy: a kept list is not changed."""
    return evolve(hitlist, columns=hitlist.columns[:shown], total=total)


def _rendered_batch(
    services: SearchServices, task: ScrollTask, walk: SearchRequest, shown: int, total: int
) -> _Page:
    """A scroll batch prepared ahead, rendered as the REST layer takes it."""
    page, _ = _scroll_hits(services, task, walk, shown, None, prepared=True)
    shows = _shown(page.hitlist, shown, total)
    page.hits = phases.fetch_page(services, shows, page.start, page.end, task.request, raw_hits=True)
    return page


def reads_ahead(raw_hits: bool, keep_alive: str | None, request: SearchRequest) -> bool:
    """Whether a scroll request's next batch is prepared ahead: only a walk that goes on is (a
    request without `scroll` frees the context), and only pages rendered to bytes."""
    return raw_hits and keep_alive is not None and renders_raw(request)
