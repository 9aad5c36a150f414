"""What a search process runs: one page of a search over shard snapshots the caller resolved.

The server process resolves indices, checks limits and owns reader contexts (their lifetime,
keep-alive, a scroll's position); everything after that is a *task* here: a plain search, a
count, a page of a point in time, a batch of a scroll. A task names its snapshots (`Target`s) and
the typed request, and its result is the response body, so the same function runs in the server
process (`--search-workers 0`, the in-process `Node`) or in a search worker process
(search/workers/), which rebuilds the Targets from published snapshot manifests.

What a walk keeps between its requests lives where its tasks run, keyed by context number in
`services.contexts`: a scroll's matches (`scroll_matches`) and the pages read ahead. The position
of a scroll stays with the context in the server process and travels in each task, so a process
that lost a walk's matches (a worker replaced after a crash) rebuilds them from the pinned
snapshots and the walk goes on where it was, exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.common.rawjson import RawJSON
from leafsearch.request.search_types import DOC, SearchRequest
from leafsearch.search import phases, query_and_fetch, slicing
from leafsearch.search.fetch_phase import renders_raw
from leafsearch.search.hitlist import HitList, LiveDocs
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.sort_keys import SortColumn
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


@dataclass(eq=False)
class ScrollTask:
    """A scroll's batch at `position` (the first, with its aggregations, when `opening`).

    `request` is the one that opened the scroll; `read_ahead`: render the next batch in the
    background (the walk goes on)."""

    targets: list[Target]
    request: SearchRequest
    elapsed: float
    raw_hits: bool
    ctx_id: int
    public_id: str
    position: int
    opening: bool
    read_ahead: bool


Task = SearchTask | CountTask | PitTask | ScrollTask


def dispatch(
    services: CoordinatorServices, task: Task, cancelled: threading.Event | None = None, affinity: Any = None
) -> Any:
    """Run a task in a search worker when the node has them (here while none is ready).

    `affinity`: tasks with equal keys go to the same worker while it lives (a walk's requests
    find its caches); None lets the least busy worker take it."""
    pool = services.workers
    if pool is not None:
        return pool.run(task, cancelled=cancelled, affinity=affinity)
    return run(services, task, cancelled)


def run(services: SearchServices, task: Task, cancelled: threading.Event | None = None) -> Any:
    """Run a task in this process. `services`: the server process's or a search worker's."""
    if isinstance(task, SearchTask):
        return _search(services, task, cancelled)
    if isinstance(task, CountTask):
        return _count(services, task, cancelled)
    if isinstance(task, PitTask):
        return _pit_page(services, task, cancelled)
    return _scroll_batch(services, task, cancelled)


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


def _pit_page(services: SearchServices, task: PitTask, cancelled: threading.Event | None) -> dict[str, Any]:
    request, targets, raw_hits = task.request, task.targets, task.raw_hits
    started = _started(task.elapsed)
    read_ahead = services.contexts.read_ahead
    fetch = query_and_fetch.along(request, raw_hits, last_phase=False)
    hitlist, tree = phases.query_phase(
        services, targets, request, aggs=True, cancelled=cancelled, contexts=task.contexts, fetch=fetch
    )
    start, end = phases.page_bounds(hitlist, request)
    ahead = raw_hits and not hitlist.window and renders_raw(request)
    served = _pit_page_key(hitlist, request, start, end)
    ready = read_ahead.take(task.ctx_id, served, hitlist) if ahead else None
    body = phases.response(
        services,
        hitlist,
        request,
        start,
        end,
        started,
        agg_tree=tree,
        extra={"pit_id": task.public_id},
        raw_hits=raw_hits,
        ready=ready,
    )
    if ahead and end - start == request.size and end < len(hitlist):
        # The walk's next page: `search_after` the last hit (or `from` the end) starts here.
        following = min(end + request.size, len(hitlist))
        read_ahead.continue_walk(
            task.ctx_id,
            served,
            _pit_page_key(hitlist, request, end, following),
            hitlist,
            targets,
            lambda: phases.fetch_page(services, hitlist, end, following, request, raw_hits=True),
        )
    return body


def _pit_page_key(hitlist: HitList, request: SearchRequest, start: int, end: int) -> tuple:
    """What makes two plain PIT pages the same bytes: the hit list (by identity), the range, and
    the request options a plain page's rendering reads."""
    return ("pit", id(hitlist), start, end, request.source.fetch, request.track_scores)


def walks_docs(request: SearchRequest) -> bool:
    """Whether a scroll walks every document (or a slice's) in `_doc` order: no sort is needed.

    Such a scroll (SPEC 4.1 r12, the fastest export) reads the snapshots' live documents in
    (shard, doc) order; its batches are ranges of them, located by binary search, so opening it
    costs no O(matches) work and each batch costs only its own documents.
    """
    return request.plain_walk(DOC) and not request.sort[0].descending


def _scroll_matches(
    services: SearchServices, task: ScrollTask, cancelled: threading.Event | None
) -> tuple[HitList | LiveDocs, Any]:
    """The scroll's matches in walk order (and the aggregation tree when it opens): what this
    process kept, or built from the pinned snapshots (the first batch, or a walk this process
    has not served yet)."""
    kept = services.contexts.scroll_matches.get(task.ctx_id)
    if kept is not None and not task.opening:
        return kept, None
    request, targets = task.request, task.targets
    if walks_docs(request) and not any(t.alias_filter for t in targets):
        with services.search_stats.phase("query", targets):
            selected = slicing.scroll_selection(request.slice, targets) if request.slice else None
            matches: HitList | LiveDocs = LiveDocs(targets, selected)
        tree = None
    else:
        matches, tree = phases.query_phase(services, targets, request, aggs=task.opening, cancelled=cancelled)
    services.contexts.scroll_matches[task.ctx_id] = matches
    return matches, tree


def _scroll_batch(
    services: SearchServices, task: ScrollTask, cancelled: threading.Event | None
) -> tuple[dict[str, Any], int]:
    """The batch at the task's position and the position after it."""
    started = _started(task.elapsed)
    request, targets = task.request, task.targets
    read_ahead = services.contexts.read_ahead
    if task.opening:
        matches, tree = _scroll_matches(services, task, cancelled)
        ready = None
    else:
        tree = None
        with services.search_stats.phase("query", targets):
            matches, _ = _scroll_matches(services, task, cancelled)
        ready = read_ahead.take(task.ctx_id, ("scroll", task.position), matches) if task.read_ahead else None
    page, start, end, following = batch_at(matches, request, targets, task.position)
    body = phases.response(
        services,
        page,
        request,
        start,
        end,
        started,
        agg_tree=tree,
        extra={"_scroll_id": task.public_id},
        raw_hits=task.raw_hits,
        ready=ready,
    )
    if task.read_ahead and following < _walk_length(matches):
        render: Callable[[], RawJSON] = lambda: _render_batch(services, matches, request, targets, following)  # noqa: E731
        read_ahead.continue_walk(
            task.ctx_id, ("scroll", task.position), ("scroll", following), matches, targets, render
        )
    return body, following


def _walk_length(matches: HitList | LiveDocs) -> int:
    return matches.total if isinstance(matches, LiveDocs) else len(matches)


def _render_batch(
    services: SearchServices,
    matches: HitList | LiveDocs,
    request: SearchRequest,
    targets: list[Target],
    position: int,
) -> Any:
    page, start, end, _ = batch_at(matches, request, targets, position)
    return phases.fetch_page(services, page, start, end, request, raw_hits=True)


def batch_at(
    matches: HitList | LiveDocs, request: SearchRequest, targets: list[Target], position: int
) -> tuple[HitList, int, int, int]:
    """The scroll batch that starts at `position`: (hit list, start, end, the next position)."""
    if isinstance(matches, LiveDocs):
        end = min(position + request.size, matches.total)
        target_arr, doc_arr = matches.take(position, end)
        column = SortColumn(request.sort[0], "doc", doc_arr, None)
        page = HitList(targets, target_arr, doc_arr, None, [column], [], matches.total, None, window=True)
        return page, 0, end - position, end
    end = min(position + request.size, len(matches))
    return matches, position, end, end


def reads_ahead(raw_hits: bool, keep_alive: str | None, request: SearchRequest) -> bool:
    """Whether a scroll request's next batch is rendered ahead: only a walk that goes on is (a
    request without `scroll` frees the context), and only pages rendered to bytes."""
    return raw_hits and keep_alive is not None and renders_raw(request)
