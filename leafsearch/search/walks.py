"""Walks: every page of a point in time, scroll or by-query source is the page after its cursor.

A walk reads one pinned snapshot (a PIT's or a scroll's shard contexts, a by-query operation's
targets) in one total order: its sort, then `_shard_doc` (a PIT search's implicit tiebreaker; a
scroll or by-query walk appends it: `walk_request`). Each page is found from the walk's cursor,
the sort values of the last hit before it, as a `search_after` page without a PIT is
(top_hits.py: each segment's sort order, a binary search for the cursor, the next matches in
it), so the first page of a new walk costs what any later page costs, and a walk keeps nothing
of its matches between its requests: only its cursor, the client's `search_after` or, for a
scroll, the one its context keeps (contexts.py) and each batch carries (execution.py).

A page's query phase finds more than the page: the top `WINDOW_PAGES` pages' worth of hits after
the cursor (a `Window`, at most 10,000 hits), and the walk's next pages are slices of it, found by
a binary search for their cursor, until the cursor leaves it. Why: a query phase costs about the
same for 1,000 hits as for 8,000 (its cost is per segment, not per hit), so a sequential walk pays
it once per window rather than once per page, and holds at most a window (tens to hundreds of
kilobytes), never its list of every match.

One kind of walk is better served from a list of every match: one sorted by `_score` first. A
page from its cursor scores every match again, O(matches) per page, where a list of them in the
walk's order (a HitList, tiebreaker included) costs one sort, then a binary search per page
(measured: bench/RESULTS.md, "Walks"). Such a list is built lazily, at the walk's first page
with a cursor (a first page alone is top hits), under the request breaker, and kept by the
process serving the walk in its `WalkMemory`, bounded by `search.walks.max_memory` (a search
worker's share of it) and freed with the context. A list that does not fit is not kept: that walk
goes on from its cursor, with the same pages, since both follow the walk's total order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.wire_pickle import evolve
from leafsearch.request.search_types import SCORE, SHARD_DOC, SearchRequest, SortSpec
from leafsearch.search import phases, top_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import HitList, build_hitlist, effective_sort, list_key

if TYPE_CHECKING:
    from leafsearch.search.services import SearchServices, WalkState
    from leafsearch.search.targets import Target

#: The cluster setting bounding what walks hold (lists of every match, windows), node-wide.
MAX_MEMORY = "search.walks.max_memory"
#: Walks whose list (or refusal) a process remembers: a PIT searched with many distinct
#: `_score` queries starts many walks; the oldest are forgotten past this (their lists freed).
_MAX_WALKS = 4096
#: A walk's window holds this many pages' hits (at most `top_hits.MAX_TOP_K`).
WINDOW_PAGES = 8


def walk_request(
    request: SearchRequest, cursor: list[Any] | None, *, counts: bool = True
) -> tuple[SearchRequest, int]:
    """The page request of a scroll or by-query walk after `cursor`: its sort then an ascending
    `_shard_doc` (unless it ends with one), `search_after` the cursor, and not counting the
    matches unless it `counts` (a scroll's first batch counts them, the others need not); and
    how many of its sorts the scroll's own are (the rest, the tiebreaker, is not shown)."""
    specs = list(effective_sort(request))
    shown = len(specs)
    if specs[-1].field != SHARD_DOC:
        specs.append(SortSpec(SHARD_DOC, "asc"))
    uncounted = {} if counts else {"track_total_hits": False}
    walk = evolve(request, sort=specs, search_after=cursor, from_=0, **uncounted)
    return walk, shown


def cursor_key(cursor: list[Any] | None) -> bytes:
    """A cursor as the key of the page after it (the JSON a client sends it back as)."""
    return orjson.dumps(cursor)


def identity(request: SearchRequest) -> str:
    """What makes two requests pages of one walk: everything but the cursor and the PIT's id."""
    return repr(evolve(request, search_after=None, pit=None))


def pages_a_list(request: SearchRequest, targets: list[Target]) -> bool:
    """Whether a walk's page is read from a kept list of every match rather than from its cursor:
    a page with a cursor, sorted by `_score` first, that top hits would serve, with nothing
    computed from every match beside it (aggregations, a profile), over shards of this process,
    of a query whose matches do not depend on the clock."""
    return (
        request.search_after is not None
        and effective_sort(request)[0].field == SCORE
        and request.aggs is None
        and not request.profile
        and top_hits.serves(request)
        and not any(t.remote for t in targets)
        and list_key(request) is not None
    )


def kept_list(
    services: SearchServices,
    ctx_id: int,
    targets: list[Target],
    request: SearchRequest,
    now_millis: int,
    cancelled: threading.Event | None,
    *,
    build: bool,
) -> HitList | None:
    """The list of every match a page of this walk is read from (see `pages_a_list`): the one
    this process keeps for the walk, or, on the walk's first page with a cursor (`build`), one
    built now and kept if it fits (used for this page either way); None: the page is found from
    its cursor."""
    if not pages_a_list(request, targets):
        return None
    key = list_key(request)
    memory = services.contexts.walks
    known, kept = memory.get(ctx_id, key)
    if kept is None and (known or not build):
        return None  # refused before, or a page prepared ahead: it is found from its cursor
    with services.search_stats.phase("query", targets):  # (the page's query phase)
        if kept is not None:
            return kept
        guard = SearchGuard.for_search(services, request, cancelled)
        built = build_hitlist(
            targets,
            request,
            now_millis=now_millis,
            with_aggs=None,
            guard=guard,
            ordinals=services.hitlists.ordinals,
        )
    if not built.timed_out:  # (a list cut short holds the matches of the segments it reached)
        memory.keep(ctx_id, key, built)
    return built


@dataclass(eq=False)
class Window:
    """The hits of a walk found from cursor `cursor` (`cursor_key`): positions [`start`, `end`)
    of `hits` are the walk's next hits in its order, and no other hit of the walk comes before
    `end` (`complete`: none comes after it either). Every page whose cursor is `cursor` or one
    of these hits is a slice of them."""

    hits: HitList
    start: int
    end: int
    complete: bool
    cursor: bytes

    def page(self, request: SearchRequest) -> tuple[int, int] | None:
        """The positions of `request`'s page in the window; None when it is not all there."""
        start = phases.page_bounds(self.hits, request)[0]
        if not self.start <= start <= self.end:
            return None
        if start == self.start and cursor_key(request.search_after) != self.cursor:
            return None  # a cursor before the window's own: hits outside it may come between
        end = start + request.size
        if end > self.end and not self.complete:
            return None
        return start, min(end, self.end)


def window_size(request: SearchRequest, targets: list[Target]) -> int | None:
    """How many hits a page query of this walk finds, for its window; None: no window (a page
    of no hits, `from` paging, aggregations or a profile computed per page, pages of live
    documents or of shard actors asked to fetch with their query, or a window no larger than two
    pages)."""
    size = min(top_hits.MAX_TOP_K, WINDOW_PAGES * request.size)
    if (
        request.size <= 0
        or request.from_ > 0
        or request.aggs is not None
        or request.profile
        or not top_hits.serves(request)
        or phases.reads_live_docs(request, targets)
        or any(t.remote for t in targets)
        or size < 2 * request.size
    ):
        return None
    return size


def windowed(
    services: SearchServices,
    ctx_id: int,
    targets: list[Target],
    request: SearchRequest,
    query: Callable[[SearchRequest], tuple[HitList, Any]],
    walk: str | None = None,
) -> tuple[HitList, int, int, Any]:
    """A walk's page: (hit list, start, end, aggregation tree) from the walk's window when it
    holds the page, else from `query` (the query phase of a request) run for a window of hits
    from the cursor, which the process keeps for the pages after it. `walk`: the request's
    `identity` when the caller knows it (a repr of the request: 30 us a page otherwise)."""
    size = window_size(request, targets)
    if size is None:
        hits, tree = query(request)
        return hits, *phases.page_bounds(hits, request), tree
    key = walk if walk is not None else identity(request)
    memory = services.contexts.walks
    window = memory.window(ctx_id, key)
    found = None if window is None else window.page(request)
    if window is not None and found is not None:
        with services.search_stats.phase("query", targets):  # (the page's query phase, done ahead)
            return window.hits, *found, None
    hits, tree = query(evolve(request, size=size))
    window = window_of(hits, request, size)
    if not hits.timed_out:  # (hits cut short by the timeout are the page's, not the walk's)
        memory.keep_window(ctx_id, key, window)
    return hits, window.start, min(window.start + request.size, window.end), tree


def window_of(hits: HitList, request: SearchRequest, size: int) -> Window:
    """The window a page query of `size` hits found (`request`: the page's own)."""
    start = phases.page_bounds(hits, request)[0]
    end = min(len(hits), start + size)  # (past `size`, an unordered segment's extra matches)
    return Window(hits, start, end, len(hits) - start < size, cursor_key(request.search_after))


class WalkMemory:
    """The lists of every match (`kept_list`) and the windows (`windowed`) this process keeps for
    the walks it serves, by reader context and walk, within `max_bytes` (`search.walks.max_memory`,
    or a search worker's share of it). A list that does not fit is refused and the refusal
    remembered, so its walk pages from its cursor for good rather than building a list on every
    page; windows make room for one another, least recently used first. Nothing is kept for a
    context that ended (a page read ahead may finish after its end)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # (context number, walk key) -> its list, or None when it did not fit
        self._walks: OrderedDict[tuple[int, Hashable], HitList | None] = OrderedDict()
        self._used = 0
        self.kept = 0  # lists kept since start
        self.refused = 0  # lists that did not fit, since start
        # (context number, walk identity) -> its window, least recently used first
        self._windows: OrderedDict[tuple[int, Hashable], Window] = OrderedDict()
        self._window_bytes = 0
        self._ended: OrderedDict[int, None] = OrderedDict()  # the contexts forgotten lately

    def window(self, ctx_id: int, key: Hashable) -> Window | None:
        with self._lock:
            found = self._windows.get((ctx_id, key))
            if found is not None:
                self._windows.move_to_end((ctx_id, key))
            return found

    def keep_window(self, ctx_id: int, key: Hashable, window: Window) -> None:
        """Keep a walk's window (replacing its last), making room by forgetting the windows
        used least recently; not kept when the lists leave no room for it."""
        size = window.hits.nbytes()
        with self._lock:
            if ctx_id in self._ended:
                return
            self._drop_window((ctx_id, key))
            while self._windows and self._used + self._window_bytes + size > self.max_bytes:
                self._drop_window(next(iter(self._windows)))
            if self._used + self._window_bytes + size <= self.max_bytes:
                self._windows[(ctx_id, key)] = window
                self._window_bytes += size

    def _drop_window(self, walk: tuple[int, Hashable]) -> None:
        window = self._windows.pop(walk, None)
        if window is not None:
            self._window_bytes -= window.hits.nbytes()

    def get(self, ctx_id: int, key: Hashable) -> tuple[bool, HitList | None]:
        """(whether the walk was seen, its list: None when refused or not seen)."""
        with self._lock:
            walk = (ctx_id, key)
            if walk not in self._walks:
                return False, None
            self._walks.move_to_end(walk)
            return True, self._walks[walk]

    def keep(self, ctx_id: int, key: Hashable, hits: HitList) -> bool:
        """Keep a walk's list if it fits beside the others (else remember the refusal)."""
        size = hits.nbytes()
        with self._lock:
            walk = (ctx_id, key)
            if ctx_id in self._ended:
                return False
            if walk in self._walks:  # built twice at once: the first one stays
                return self._walks[walk] is not None
            fits = self._used + size <= self.max_bytes
            self._walks[walk] = hits if fits else None
            if fits:
                self._used += size
                self.kept += 1
            else:
                self.refused += 1
            while len(self._walks) > _MAX_WALKS:
                self._drop(next(iter(self._walks)))
            return fits

    def forget(self, ctx_id: int) -> None:
        """A context ended: its walks' lists and windows go."""
        with self._lock:
            self._ended[ctx_id] = None
            while len(self._ended) > _MAX_WALKS:
                self._ended.popitem(last=False)
            for walk in [w for w in self._walks if w[0] == ctx_id]:
                self._drop(walk)
            for walk in [w for w in self._windows if w[0] == ctx_id]:
                self._drop_window(walk)

    def _drop(self, walk: tuple[int, Hashable]) -> None:
        hits = self._walks.pop(walk)
        if hits is not None:
            self._used -= hits.nbytes()

    def held(self) -> dict[int, tuple[int, int]]:
        """Bytes of the lists and of the windows kept, by context number."""
        held: dict[int, tuple[int, int]] = {}
        with self._lock:
            for (ctx_id, _), hits in self._walks.items():
                if hits is not None:
                    lists, windows = held.get(ctx_id, (0, 0))
                    held[ctx_id] = (lists + hits.nbytes(), windows)
            for (ctx_id, _), window in self._windows.items():
                lists, windows = held.get(ctx_id, (0, 0))
                held[ctx_id] = (lists, windows + window.hits.nbytes())
        return held

    def stats(self) -> dict[str, Any]:
        with self._lock:
            lists = sum(1 for hits in self._walks.values() if hits is not None)
            return {
                "lists": lists,
                "lists_in_bytes": self._used,
                "lists_kept": self.kept,
                "lists_refused": self.refused,
                "windows": len(self._windows),
                "windows_in_bytes": self._window_bytes,
            }


def walk_stats(state: WalkState) -> dict[str, Any]:
    """What the walks a process serves hold: its lists' and windows' counters, and per context
    number the bytes of its lists, windows and pages read ahead (`_nodes/stats`' `walks`)."""
    held = state.walks.held()
    pages = state.read_ahead.held_bytes()
    return {
        **state.walks.stats(),
        "pages_read_ahead_in_bytes": sum(pages.values()),
        "contexts": [
            {
                "context": ctx,
                "lists_in_bytes": held.get(ctx, (0, 0))[0],
                "windows_in_bytes": held.get(ctx, (0, 0))[1],
                "pages_read_ahead_in_bytes": pages.get(ctx, 0),
            }
            for ctx in sorted(held.keys() | pages.keys())
        ],
    }
