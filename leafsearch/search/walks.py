"""Walks: every page of a point in time, scroll or by-query source is the page after its cursor.

A walk reads one pinned snapshot (a PIT's or a scroll's shard contexts, a by-query operation's
targets) in one total order: its sort, then `_shard_doc` (a PIT search's implicit tiebreaker; a
scroll or by-query walk appends it: `walk_request`). Each page is found from the walk's cursor,
the sort values of the last hit before it, as a `search_after` page without a PIT is
(top_hits.py: each segment's sort order, a binary search for the cursor, the next matches in
it), so the first page of a new walk costs what any later page costs, and a walk keeps nothing
of its matches between its requests: only its cursor, the client's `search_after` or, for a
scroll, the one its context keeps (contexts.py) and each batch carries (execution.py).

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

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.request.search_types import SCORE, SHARD_DOC, SearchRequest, SortSpec
from leafsearch.search import top_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import HitList, build_hitlist, effective_sort, list_key

if TYPE_CHECKING:
    from leafsearch.search.services import SearchServices, WalkState
    from leafsearch.search.targets import Target

#: The cluster setting bounding what walks hold (lists of every match), node-wide.
MAX_MEMORY = "search.walks.max_memory"
#: Walks whose list (or refusal) a process remembers: a PIT searched with many distinct
#: `_score` queries starts many walks; the oldest are forgotten past this (their lists freed).
_MAX_WALKS = 4096


def walk_request(request: SearchRequest, cursor: list[Any] | None) -> tuple[SearchRequest, int]:
    """The page request of a scroll or by-query walk after `cursor`: its sort then an ascending
    `_shard_doc` (unless it ends with one), `search_after` the cursor; and how many of its sorts
    the scroll's own are (the rest, the tiebreaker, is not shown)."""
    specs = list(effective_sort(request))
    shown = len(specs)
    if specs[-1].field != SHARD_DOC:
        specs.append(SortSpec(SHARD_DOC, "asc"))
    walk = dataclasses.replace(request, sort=specs, search_after=cursor, from_=0)
    return walk, shown


def cursor_key(cursor: list[Any] | None) -> bytes:
    """A cursor as the key of the page after it (the JSON a client sends it back as)."""
    return orjson.dumps(cursor)


def identity(request: SearchRequest) -> str:
    """What makes two requests pages of one walk: everything but the cursor and the PIT's id."""
    return repr(dataclasses.replace(request, search_after=None, pit=None))


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


class WalkMemory:
    """The lists of every match this process keeps for the walks it serves (`kept_list`), by
    reader context and walk, within `max_bytes` (`search.walks.max_memory`, or a search worker's
    share of it). A list that does not fit is refused and the refusal remembered, so its walk
    pages from its cursor for good rather than building a list on every page."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # (context number, walk key) -> its list, or None when it did not fit
        self._walks: OrderedDict[tuple[int, Hashable], HitList | None] = OrderedDict()
        self._used = 0
        self.kept = 0  # lists kept since start
        self.refused = 0  # lists that did not fit, since start

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
        """A context ended: its walks' lists go."""
        with self._lock:
            for walk in [w for w in self._walks if w[0] == ctx_id]:
                self._drop(walk)

    def _drop(self, walk: tuple[int, Hashable]) -> None:
        hits = self._walks.pop(walk)
        if hits is not None:
            self._used -= hits.nbytes()

    def held(self) -> dict[int, int]:
        """Bytes of the lists kept, by context number."""
        held: dict[int, int] = {}
        with self._lock:
            for (ctx_id, _), hits in self._walks.items():
                if hits is not None:
                    held[ctx_id] = held.get(ctx_id, 0) + hits.nbytes()
        return held

    def stats(self) -> dict[str, Any]:
        with self._lock:
            lists = sum(1 for hits in self._walks.values() if hits is not None)
            return {
                "lists": lists,
                "lists_in_bytes": self._used,
                "lists_kept": self.kept,
                "lists_refused": self.refused,
            }


def walk_stats(state: WalkState) -> dict[str, Any]:
    """What the walks a process serves hold: its lists' counters, and per context number the
    bytes of its lists and of its pages read ahead (`_nodes/stats`' `walks`)."""
    lists = state.walks.held()
    pages = state.read_ahead.held_bytes()
    return {
        **state.walks.stats(),
        "pages_read_ahead_in_bytes": sum(pages.values()),
        "contexts": [
            {
                "context": ctx,
                "lists_in_bytes": lists.get(ctx, 0),
                "pages_read_ahead_in_bytes": pages.get(ctx, 0),
            }
            for ctx in sorted(lists.keys() | pages.keys())
        ],
    }
