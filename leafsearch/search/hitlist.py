"""The query phase: every matching document of a set of shard snapshots, in sort order.

A `HitList` holds, for one (snapshots, query, sort, slice) combination, the matched documents
sorted by their sort keys with ties broken by shard index then doc. Because snapshots never change,
a HitList can be cached and reused by every later page of the same walk: an offset page is an
array slice and a `search_after` page is a binary search, so page 90,000 costs what page 1 costs.

`LiveDocs` is the walk without a match list: every live document in `_shard_doc` order, addressed
through per-segment live counts (the fastest full export, and the `_doc` scroll).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Protocol

import numpy as np

from leafsearch.common.bounded_cache import BoundedCache
from leafsearch.common.settings import index_setting
from leafsearch.errors import ShardFailed
from leafsearch.index.columns import ordinal_column
from leafsearch.index.events import ShardEvents
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.request.query_dsl import query_is_match_all
from leafsearch.request.search_types import SearchRequest, SortSpec
from leafsearch.search import nested_sort, slicing
from leafsearch.search.collapse import collapsed
from leafsearch.search.dfs import DfsStats, RecordingStats, SummedStats
from leafsearch.search.guard import (
    MATCH_BYTES,
    SEGMENT_BYTES_PER_DOC,
    SORT_KEY_BYTES,
    SearchGuard,
    TimeExceeded,
)
from leafsearch.search.matching import QueryContext, execute, execute_docs, prepare, query_key
from leafsearch.search.profile import ShardProfile
from leafsearch.search.query.masks import mask_of
from leafsearch.search.script_sort import script_sort_column
from leafsearch.search.shard_api import ShardContextId, ShardQuery, ShardTopDocs
from leafsearch.search.sort_keys import (
    GlobalOrdinals,
    SortColumn,
    global_ordinals,
    keyword_values,
    missing_substitute,
    numeric_values,
    resolve_field_kind,
    special_kind,
)
from leafsearch.search.targets import Target, snapshot_key


@dataclass
class HitList:
    targets: list[Target]
    target: np.ndarray  # int32: position of the hit's shard target
    doc: np.ndarray  # int64: shard-level doc number
    score: np.ndarray | None  # float32
    columns: list[SortColumn]
    keys: list[np.ndarray]  # comparable key columns, sorted ascending lexicographically
    total: int
    max_score: float | None
    agg_partials: list = field(default_factory=list)
    terminated_early: bool = False
    window: bool = False  # holds only the requested page (a live-docs walk), not every match
    timed_out: bool = False  # the search's timeout stopped it: the matches of the segments it reached
    profiles: list[ShardProfile] | None = None  # per target, when the search is profiled
    #: Per target, the shard context its hits were found on (the fetch phase reads the same);
    #: None: the snapshots the targets hold.
    contexts: list[ShardContextId | None] | None = None
    #: Shards that failed alone (a shard actor unavailable, its context gone): the hits are the
    #: other shards', and the response reports these in `_shards.failures`.
    failures: list[ShardFailed] = field(default_factory=list)
    #: Per shard index, the query of a shard that fetched with it (query_and_fetch.py: its one
    #: shard's page, or each shard's candidates) and its answer: the fetch phase takes them
    #: instead of sending fetches (`fetch_phase.fetched_with_query`).
    fetched: dict[int, tuple[ShardQuery, ShardTopDocs]] | None = None
    #: The size of the key `HitListCache` keeps it under (the query's text, as long as the
    #: request's): counted in `nbytes`, so the cache's bound covers its keys too.
    key_bytes: int = 0
    #: A collapsed list's keys (collapse.py): the collapse field's value of each hit, and the
    #: hits with a value ordered by it (a group's hit found by binary search: collapse_shards.py).
    collapse: SortColumn | None = None
    collapse_index: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.doc)

    def nbytes(self) -> int:
        size = self.target.nbytes + self.doc.nbytes + sum(k.nbytes for k in self.keys)
        size += sum(c.values.nbytes for c in self.columns)
        size += 0 if self.collapse is None else self.collapse.values.nbytes
        size += 0 if self.collapse_index is None else self.collapse_index.nbytes
        return size + (self.score.nbytes if self.score is not None else 0) + self.key_bytes

    def position_after(self, after: list) -> int:
        """Index of the first hit strictly after the `search_after` key values."""
        return position_after(self.keys, after, len(self.doc))


def backwards_page(hitlist: HitList, start: int, end: int) -> tuple[HitList, int, int]:
    """A `search_before` page: hits [start, end) of the reversed walk's list, reversed into the
    request's own order, as a page of its own (0, n). It takes over the page fetched with the
    query (query_and_fetch.py), which the shard reversed the same way. O(page)."""
    order = np.arange(end - 1, start - 1, -1)
    page = HitList(
        hitlist.targets,
        hitlist.target[order],
        hitlist.doc[order],
        None if hitlist.score is None else hitlist.score[order],
        [c.take(order) for c in hitlist.columns],
        [],
        hitlist.total,
        hitlist.max_score,
        window=True,
        contexts=hitlist.contexts,
        fetched=hitlist.fetched,
    )
    hitlist.fetched = None
    return page, 0, len(order)


def position_after(keys: list[np.ndarray], after: list, n: int) -> int:
    """Index of the first of `n` rows strictly after `after` in key columns sorted
    lexicographically: one binary search per column, within the rows equal on the columns
    before. O(log n)."""
    if n and keys:
        first, value = keys[0], after[0]
        if value < first[0]:  # every row comes after the cursor: O(1) for most of a walk's segments
            return 0
        if value > first[n - 1]:
            return n
    lo, hi = 0, n
    for col, value in zip(keys, after, strict=True):
        if lo >= hi:
            break
        part = col[lo:hi]
        if isinstance(value, int) and part.dtype.kind in "iu" and part.dtype.itemsize < 8:
            # A Python int would make numpy widen the whole column (O(n)) before its search.
            limits = np.iinfo(part.dtype)
            if not limits.min <= value <= limits.max:
                lo = hi = hi if value > limits.max else lo
                break
            value = part.dtype.type(value)
        a = lo + int(np.searchsorted(part, value, side="left"))
        b = lo + int(np.searchsorted(part, value, side="right"))
        lo, hi = a, b
    return hi


def needs_scores(request: SearchRequest) -> bool:
    if request.min_score is not None or request.track_scores:
        return True
    if not request.sort:
        return True
    # (a `_script` sort's script may read `_score`)
    return any(
        s.field == "_score" or (s.script is not None and "_score" in s.script.source) for s in request.sort
    )


class SegmentVisit(Protocol):
    """How `segment_matches` walks a target's segments, when its caller can stop early."""

    def order(self, views: list[SegmentView]) -> list[int]:
        """The positions of `views`, in the order to run them."""
        ...

    def skips(self, view: SegmentView) -> bool:
        """Whether `view` need not run at all (asked just before it would, so the caller can
        decide from the segments already yielded)."""
        ...


@dataclass
class SegmentMatches:
    """The matches of one segment of one target, after live docs, slice, `post_filter` and
    `min_score` applied (aggregations have already collected, before `post_filter`): a mask, or
    the matching documents themselves when the query gave them without one (a selective
    filtered conjunction: `matching.execute_docs`); `count`, `docs` and `dense` read either."""

    target: int  # position of the target
    view: SegmentView
    mask: np.ndarray | None  # bool per local doc; None when the matches came as `matched`
    scores: np.ndarray | None  # per local doc, when the request needs scores
    matched: np.ndarray | None = None  # the matching local docs, ascending, when no mask was built
    #: The matches are the segment's live documents (`mask` is read-only: `live_mask`).
    all_live: bool = False

    def count(self) -> int:
        if self.all_live:
            return self.view.live_count
        return len(self.matched) if self.matched is not None else int(np.count_nonzero(self.mask))

    def docs(self) -> np.ndarray:
        """The matching local docs, ascending."""
        return self.matched if self.matched is not None else np.flatnonzero(self.mask)

    def dense(self) -> np.ndarray:
        """The matches as a mask (built from `matched` when they came without one)."""
        if self.mask is None:
            assert self.matched is not None
            self.mask = mask_of(self.matched, self.view.max_doc)
        return self.mask


def segment_matches(
    targets: list[Target],
    request: SearchRequest,
    *,
    now_millis: int,
    needs_scores: bool,
    with_aggs,
    guard: SearchGuard,
    stats: DfsStats | None = None,
    profiles: list[ShardProfile] | None = None,
    position: tuple[int, int] | None = None,
    slice_window: tuple[int, int] | None = None,
    visit: SegmentVisit | None = None,
) -> Iterator[SegmentMatches]:
    """Run the query on every segment of every target, in (shard, segment) order.

    `with_aggs(target, view, docs, ctx)` collects aggregation partials for the matched docs of a
    segment before `post_filter` applies (None when there are no aggregations). `guard` is checked
    before each segment and its aggregations: past the deadline the iteration ends early and
    `guard.expired` says so. A segment's working arrays are reserved on the request breaker while
    the caller holds them. Cost: the query's own, O(segment size) per segment. `profiles` (one
    per target) receive each target's query timings when the search is profiled. `position`:
    (shard index, shard count) of the one target a shard of the shard interface searches, for
    the slices, which go to shards first; `slice_window`: that target's part of a PIT slice
    (`slicing.pit_slice_windows`). `visit`: the order a target's segments are run in and
    the segments the caller no longer needs (a page that can stop early, `top_hits.py`)."""
    # DFS: every shard scores with the term statistics of all shards of the request (`stats`
    # when the caller runs one shard of them).
    if stats is None and request.dfs and needs_scores:
        stats = DfsStats.total(shard_statistics(t, request, now_millis, guard) for t in targets)
    for ti, target in enumerate(targets):
        summed = None if stats is None else SummedStats(stats, target.searcher)
        ctx = shard_query_context(target, now_millis, needs_scores, summed)
        filtering = request.post_filter is not None
        filter_ctx = shard_query_context(target, now_millis, False) if filtering else None
        profile = profiles[ti] if profiles is not None else None
        planning = time.perf_counter_ns()
        query = target.query(request.query)
        plans = [prepare(query, ctx)]
        if filter_ctx is not None:
            plans.append(prepare(request.post_filter, filter_ctx))
        if profile is not None:
            profile.rewrite_nanos += time.perf_counter_ns() - planning
            ctx.profile = profile
            if filter_ctx is not None:
                filter_ctx.profile = profile
        slice_masks = (
            slicing.slice_masks(
                request.slice,
                targets,
                ti,
                pit=request.pit is not None,
                position=position,
                window=slice_window,
            )
            if request.slice
            else None
        )
        # A query that gives its matches as documents skips the masks when nothing after it
        # needs one (`post_filter` and `min_score` read them, scores are per document).
        sparse_ok = filter_ctx is None and request.min_score is None and not needs_scores
        # `match_all` alone matches the live documents: no mask is built (a walk's every page).
        all_live = sparse_ok and slice_masks is None and profile is None and query_is_match_all(query)
        views = target.searcher.views
        for vi in range(len(views)) if visit is None else visit.order(views):
            view = views[vi]
            if view.live_count == 0 or (visit is not None and visit.skips(view)):
                continue
            segment_bytes = view.max_doc * SEGMENT_BYTES_PER_DOC
            if all_live:
                try:
                    guard.check()
                    if with_aggs is not None:
                        live = view.live_docs.view()  # (the view's own, shared: read-only here)
                        live.setflags(write=False)
                        with_aggs(target, view, live, ctx)
                except TimeExceeded:
                    guard.timed_out()
                    return
                yield SegmentMatches(ti, view, live_mask(view), None, all_live=True)
                continue
            try:
                guard.check()
                guard.reserve(segment_bytes)
                sparse = execute_docs(plans[0], view, ctx) if sparse_ok else None
                if sparse is not None:
                    if view.live is not None:
                        sparse = sparse[view.live[sparse]]
                    if slice_masks is not None:
                        sparse = sparse[slice_masks[vi][sparse]]
                    if with_aggs is not None:
                        guard.check()
                        with_aggs(target, view, sparse, ctx)
                else:
                    mask, scores = execute(plans[0], view, ctx)
                    if view.live is not None:
                        mask &= view.live
                    if slice_masks is not None:
                        mask &= slice_masks[vi]
                    if with_aggs is not None:
                        guard.check()
                        with_aggs(target, view, np.flatnonzero(mask), ctx, scores)
            except TimeExceeded:
                guard.timed_out()
                return
            if sparse is not None:
                yield SegmentMatches(ti, view, None, None, sparse)
                guard.release(segment_bytes)
                continue
            if filter_ctx is not None:
                pmask, _ = execute(plans[1], view, filter_ctx)
                mask &= pmask
            if request.min_score is not None and scores is not None:
                mask &= scores >= request.min_score
            if needs_scores and scores is None:
                scores = np.ones(view.max_doc, np.float32)
            yield SegmentMatches(ti, view, mask, scores if needs_scores else None)
            guard.release(segment_bytes)
        if profile is not None:
            profile.query = [profile.profiler.tree(p) for p in plans]


def live_mask(view: SegmentView) -> np.ndarray:
    """A segment's live documents as a read-only mask, which takes no memory when none is
    deleted."""
    if view.live is None:
        return np.broadcast_to(np.True_, (view.max_doc,))
    mask = view.live.view()
    mask.setflags(write=False)
    return mask


def build_hitlist(
    targets: list[Target],
    request: SearchRequest,
    *,
    now_millis: int,
    with_aggs,
    guard: SearchGuard,
    ordinals: GlobalOrdinals | None = None,
) -> HitList:
    """Every match of every target, sorted: what a walk over one snapshot pages through.
    Cost: O(matches log matches) once per (snapshots, request); `top_hits` serves one page.
    Its arrays are reserved on the request breaker first, and released when it returns.
    `ordinals`: the node's cache of keyword global ordinals (None: computed for this list)."""
    started = time.perf_counter_ns()
    profiles = [ShardProfile() for _ in targets] if request.profile else None
    try:
        hitlist = _build(targets, request, now_millis, with_aggs, guard, ordinals, profiles)
    finally:
        guard.release_all()
    if profiles:
        # One sort orders the matches of every shard: its time (and the gathering's) is the
        # first shard's collector.
        profiles[0].collector_name = "HitListCollector"
        spent = time.perf_counter_ns() - started
        profiles[0].collector_nanos = spent - sum(p.measured_nanos() for p in profiles)
        hitlist.profiles = profiles
    return hitlist


def _build(
    targets: list[Target], request: SearchRequest, now_millis: int, with_aggs, guard, ordinals, profiles
) -> HitList:
    needs = needs_scores(request)
    target_pos: list[np.ndarray] = []
    docs_all: list[np.ndarray] = []
    scores_all: list[np.ndarray] = []
    seg_docs: list[tuple[int, SegmentView, np.ndarray]] = []  # (target idx, view, local docs)
    partials: list = []
    collect = None if with_aggs is None else lambda *args: partials.append(with_aggs(*args))
    total = 0
    terminated = False
    taken = [0] * len(targets)
    matches = segment_matches(
        targets,
        request,
        now_millis=now_millis,
        needs_scores=needs,
        with_aggs=collect,
        guard=guard,
        profiles=profiles,
    )
    for m in matches:
        docs = m.docs()
        if request.terminate_after is not None:
            room = request.terminate_after - taken[m.target]
            if len(docs) > room:
                docs = docs[:room]
                terminated = True
            taken[m.target] += len(docs)
        total += len(docs)
        target_pos.append(np.full(len(docs), m.target, dtype=np.int32))
        docs_all.append(docs + m.view.doc_base)
        seg_docs.append((m.target, m.view, docs))
        if m.scores is not None:
            scores_all.append(m.scores[docs])
        guard.reserve(len(docs) * MATCH_BYTES)
    # (a collapse adds a key column and its grouping's positions and flags: one sort key's worth)
    key_columns = len(effective_sort(request)) + (request.collapse is not None)
    guard.reserve(total * (MATCH_BYTES + SORT_KEY_BYTES * key_columns))
    target_arr = np.concatenate(target_pos) if target_pos else np.empty(0, np.int32)
    doc_arr = np.concatenate(docs_all) if docs_all else np.empty(0, np.int64)
    score_arr = (np.concatenate(scores_all) if scores_all else np.empty(0, np.float32)) if needs else None
    hitlist = sorted_hitlist(
        targets, request, seg_docs, target_arr, doc_arr, score_arr, total, partials, ordinals=ordinals
    )
    if request.collapse is not None:
        hitlist = collapsed(hitlist, request.collapse, seg_docs, target_arr, doc_arr, ordinals)
    hitlist.terminated_early = terminated
    hitlist.timed_out = guard.expired
    return hitlist


def sorted_hitlist(
    targets: list[Target],
    request: SearchRequest,
    seg_docs: list[tuple[int, SegmentView, np.ndarray]],
    target_arr: np.ndarray,
    doc_arr: np.ndarray,
    score_arr: np.ndarray | None,
    total: int,
    partials: list,
    max_score: float | None = None,
    *,
    few: bool = False,
    ordinals: GlobalOrdinals | None = None,
) -> HitList:
    """A HitList of the given documents (gathered in (shard, doc) order), sorted by the request's
    sort, ties kept in gathering order. `max_score` defaults to the best of these documents;
    `few`: they are a page's candidates (see `sort_column`)."""
    specs = effective_sort(request)
    columns = [
        sort_column(spec, targets, seg_docs, target_arr, doc_arr, score_arr, few=few, ordinals=ordinals)
        for spec in specs
    ]
    target_arr, doc_arr, score_arr, columns, keys = sort_hits(columns, target_arr, doc_arr, score_arr)
    if max_score is None and score_arr is not None and len(score_arr):
        max_score = float(score_arr.max())
    return HitList(targets, target_arr, doc_arr, score_arr, columns, keys, total, max_score, partials)


def sort_hits(
    columns: list[SortColumn], target_arr: np.ndarray, doc_arr: np.ndarray, score_arr: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, list[SortColumn], list[np.ndarray]]:
    """Hits (shard positions, docs, scores, sort columns) in sort order, with their comparable key
    columns; stable, so ties keep the order the hits were gathered in."""
    keys = [key for column in columns for key in column.key_columns()]
    order = sort_order(columns, keys, len(doc_arr))
    if order is not None:
        target_arr, doc_arr = target_arr[order], doc_arr[order]
        score_arr = score_arr[order] if score_arr is not None else None
        columns = [c.take(order) for c in columns]
        keys = [k[order] for k in keys]
    return target_arr, doc_arr, score_arr, columns, keys


def shard_statistics(target: Target, request: SearchRequest, now_millis: int, guard: SearchGuard) -> DfsStats:
    """The DFS phase on one shard: the term statistics its query and its rescore queries read
    on its own snapshot (Elasticsearch's DFS phase reads the rescorers' too: a shard rescores
    with the summed statistics). Cost: each query run once more on every segment, its matches
    dropped."""
    recorder = RecordingStats(target.searcher)
    queries = [target.query(request.query), *(r.query for r in request.rescore)]
    for query in queries:
        ctx = shard_query_context(target, now_millis, True, recorder)
        planned = prepare(query, ctx)
        for view in target.searcher.views:
            if view.live_count:
                guard.check()
                execute(planned, view, ctx)
    return recorder.recorded()


def all_shards_stats(targets: list[Target]) -> Searcher:
    """A statistics-only view over the segments of every target (never acquired or released)."""
    return Searcher(-1, [v for t in targets for v in t.searcher.views], generation=0)


def shard_query_context(
    target: Target,
    now_millis: int,
    needs_scores: bool,
    stats: Searcher | SummedStats | RecordingStats | None = None,
) -> QueryContext:
    """One query context per shard snapshot: it caches the plan and statistics for all segments.
    `stats`, when given, replaces the shard's own term statistics (DFS)."""
    default_field = target.index.settings.get("index.query.default_field", "*")
    return QueryContext(
        mapping=target.mapping,
        searcher=stats or target.searcher,
        now_millis=now_millis,
        needs_scores=needs_scores,
        default_fields=tuple(f.strip() for f in default_field.strip("[]").split(",")),
        index_name=target.index.name,
        index_uuid=target.index.uuid,
        max_regex_length=index_setting(target.index.settings, "index.max_regex_length"),
        max_terms_count=index_setting(target.index.settings, "index.max_terms_count"),
        max_result_window=index_setting(target.index.settings, "index.max_result_window"),
        query_string_lenient=index_setting(target.index.settings, "index.query_string.lenient"),
    )


def effective_sort(request: SearchRequest) -> list[SortSpec]:
    """No sort means relevance: `_score` descending."""
    if request.sort:
        return request.sort
    return [SortSpec("_score", "desc")]


def sort_order(columns: list[SortColumn], keys: list[np.ndarray], n: int) -> np.ndarray | None:
    """Stable order by the key columns. Matches are gathered in (shard, doc) order, or by shard
    each in its own sort order (a merge of shards' top hits), so ties keep (shard, doc) order: a
    trailing ascending `_shard_doc` (a PIT's tiebreaker) is the order ties keep anyway, and a
    leading one (unique per document) needs no sort when the hits already come in its order."""
    if n == 0 or not keys:
        return None
    if columns[0].kind == "shard_doc":
        first = keys[0]
        return None if bool(np.all(first[1:] > first[:-1])) else np.argsort(first, kind="stable")
    if columns[-1].kind == "shard_doc" and not columns[-1].spec.descending:
        keys = keys[:-1]
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    return np.lexsort(keys[::-1])


def score_column(spec: SortSpec, score_arr: np.ndarray) -> SortColumn:
    """The sort column of a `_score` sort (`spec`) over the hits' scores."""
    substitute = missing_substitute(spec, None)
    return SortColumn(spec, "score", score_arr.astype(np.float64), None, missing_key=substitute)


def sort_column(
    spec: SortSpec,
    targets: list[Target],
    seg_docs: list[tuple[int, object, np.ndarray]],
    target_arr: np.ndarray,
    doc_arr: np.ndarray,
    score_arr: np.ndarray | None,
    *,
    few: bool = False,
    ordinals: GlobalOrdinals | None = None,
    resolved: tuple[str, Any] | None = None,
) -> SortColumn:
    """The sort column of the documents `seg_docs` (in gathering order). Keywords compare through
    global ordinals over every term of the segments involved (cached in `ordinals`, the node's,
    for each set of segments), or, with `few`, through the terms of these documents alone: a
    page's candidates come from segment sets that differ with every query, and hold few values.
    `resolved` is the (kind, reference field type) of the sort over every shard of the request,
    when `targets` is only one of them (a shard's query phase); else they are resolved here."""
    if spec.script is not None:
        return script_sort_column(spec, targets, seg_docs, score_arr)
    special = special_kind(spec)
    if special is not None:
        # Every document has these; a `null` cursor still means "past the missing values".
        substitute = missing_substitute(spec, None)
        if special == "score":
            return score_column(spec, score_arr)
        if special == "doc":
            return SortColumn(spec, "doc", doc_arr, None, missing_key=substitute)
        values = (target_arr.astype(np.int64) << 32) | doc_arr
        return SortColumn(spec, "shard_doc", values, None, missing_key=substitute)
    nested_sort.check_sort_field(spec, targets)
    if spec.nested is not None:  # its columns held by the segments while they are read
        with nested_sort.held_columns(spec, targets, seg_docs):
            return _field_column(spec, targets, seg_docs, few, ordinals, resolved)
    return _field_column(spec, targets, seg_docs, few, ordinals, resolved)


def _field_column(
    spec: SortSpec,
    targets: list[Target],
    seg_docs: list[tuple[int, object, np.ndarray]],
    few: bool,
    ordinals: GlobalOrdinals | None,
    resolved: tuple[str, Any] | None,
) -> SortColumn:
    field = nested_sort.column_key(spec)
    field_types = [t.mapping.field(spec.field) for t in targets]
    if resolved is None:
        kind = resolve_field_kind(spec, field_types, [t.index.name for t in targets])
        reference = next((ft for ft in field_types if ft is not None), None)
    else:
        kind, reference = resolved
    values: list[np.ndarray] = []
    present: list[np.ndarray] = []
    terms = None
    if kind == "keyword" and few:
        terms, values, present = _own_terms(spec, field, seg_docs)
    elif kind == "keyword":
        views = [view for _, view, _ in seg_docs]
        segments = [v.segment for v in views]
        # (`is not None`: an empty cache is falsy, and was then never filled)
        cached = ordinals is not None
        terms, maps = ordinals.of(field, segments) if cached else global_ordinals(field, segments)
        for (_, view, docs), gmap in zip(seg_docs, maps, strict=True):
            v, p = keyword_values(view.segment.column(field), spec, docs, gmap)
            values.append(v)
            present.append(p)
    else:
        # Each index's missing documents sort by its own type's substitute (Integer.MAX_VALUE for
        # an integer field, Long.MAX_VALUE for a long one), as each shard's Lucene sort has them.
        substitutes = [missing_substitute(spec, ft) for ft in field_types]
        for ti, view, docs in seg_docs:
            v, p = numeric_values(view.segment.column(field), field_types[ti], spec, docs, kind)
            if not p.all():
                v = np.where(p, v, substitutes[ti])
            values.append(v)
            present.append(p)
    dtype = np.float64 if kind == "double" else np.int64
    vals = np.concatenate(values) if values else np.empty(0, dtype)
    pres = np.concatenate(present) if present else np.empty(0, bool)
    custom = spec.missing not in ("_last", "_first")
    # Also checks the sort's `missing` and `format` against the field, whatever the documents hold.
    substitute = missing_substitute(spec, reference)
    if kind == "keyword":
        if custom and not pres.all():
            terms, vals = _with_term(terms, vals, pres, str(substitute).encode())
        return SortColumn(spec, kind, vals, None if custom or pres.all() else pres, terms, tuple(field_types))
    render_present = None if custom or pres.all() else pres
    return SortColumn(
        spec, kind, vals.astype(dtype, copy=False), render_present, None, tuple(field_types), substitute
    )


def _own_terms(
    spec: SortSpec, field: str, seg_docs: list[tuple[int, object, np.ndarray]]
) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """(sorted terms of the documents' values, per segment their ordinals in it, per segment
    which documents have a value). O(values log values)."""
    raw: list[np.ndarray] = []
    present: list[np.ndarray] = []
    for _, view, docs in seg_docs:
        col = ordinal_column(view.segment.column(field))  # type: ignore[attr-defined]
        ords, has = keyword_values(col, spec, docs, np.empty(0, np.int64))
        raw.append(np.asarray(col.terms)[ords[has]] if has.any() else np.empty(0, "S1"))
        present.append(has)
    terms, inverse = np.unique(np.concatenate(raw) if raw else np.empty(0, "S1"), return_inverse=True)
    values: list[np.ndarray] = []
    pos = 0
    for has in present:
        local = np.zeros(len(has), dtype=np.int64)
        count = int(np.count_nonzero(has))
        local[has] = inverse[pos : pos + count]
        values.append(local)
        pos += count
    return terms, values, present


def _with_term(
    terms: np.ndarray | None, ords: np.ndarray, present: np.ndarray, raw: bytes
) -> tuple[np.ndarray, np.ndarray]:
    """Keyword ordinals where documents without a value hold `raw` (a custom `missing`), inserted
    into the term list in byte order so it sorts where Elasticsearch sorts it."""
    terms = np.empty(0, "S1") if terms is None else terms
    g = int(np.searchsorted(terms, raw))
    if g >= len(terms) or terms[g] != raw:
        width = max(terms.dtype.itemsize, len(raw), 1)
        terms = np.insert(terms.astype(f"S{width}"), g, raw)
        ords = np.where(ords >= g, ords + 1, ords)
    return terms, np.where(present, ords, g)


class LiveDocs:
    """Every live document of a list of snapshots in `_shard_doc` order, never materialized.

    Positions are counted over per-segment live-doc counts, so locating a cursor or an offset is
    a binary search and a page costs only its own documents. The per-segment bounds are Python
    lists searched by `bisect`: a walk makes one of these per batch, over a dozen segments, where
    numpy's calls cost more than the search.
    """

    def __init__(self, targets: list[Target], selected: list[np.ndarray | None] | None = None) -> None:
        """`selected` (per segment view in walk order: its sorted live local docs to walk, or None
        for all of them) restricts the walk, as a sliced `_doc` scroll does."""
        self.views = [(ti, view) for ti, t in enumerate(targets) for view in t.searcher.views]
        self.selected = selected if selected is not None else [None] * len(self.views)
        counts = [
            view.live_count if sel is None else len(sel)
            for (_, view), sel in zip(self.views, self.selected, strict=True)
        ]
        self.starts: list[int] = [0, *accumulate(int(count) for count in counts)]
        self.total = self.starts[-1]
        # `_shard_doc` of each segment's first doc number: segments tile each shard's doc space.
        self.first_keys = [(ti << 32) | view.doc_base for ti, view in self.views]

    def rank(self, key: int) -> int:
        """How many documents have a `_shard_doc` at most `key`."""
        if not self.views or key < self.first_keys[0]:
            return 0
        i = bisect_right(self.first_keys, key) - 1
        view = self.views[i][1]
        local = key - self.first_keys[i]
        sel = self.selected[i]
        if local >= view.max_doc:
            inside = self.starts[i + 1] - self.starts[i]
        elif sel is not None:
            inside = int(np.searchsorted(sel, local, side="right"))
        elif view.live is None:
            inside = local + 1
        else:
            inside = int(np.searchsorted(view.live_docs, local, side="right"))
        return self.starts[i] + inside

    def take(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(target positions, shard doc numbers) of the documents at positions [lo, hi)."""
        targets: list[np.ndarray] = []
        docs: list[np.ndarray] = []
        i = bisect_right(self.starts, lo) - 1
        while i < len(self.views) and self.starts[i] < hi:  # (the segments up to `hi` only)
            ti, view = self.views[i]
            begin = self.starts[i]
            a, b = max(lo, begin) - begin, min(hi, self.starts[i + 1]) - begin
            if b > a:
                sel = self.selected[i]
                if sel is not None:
                    local = sel[a:b]
                else:
                    local = np.arange(a, b, dtype=np.int64) if view.live is None else view.live_docs[a:b]
                docs.append(local + view.doc_base)
                targets.append(np.full(b - a, ti, dtype=np.int32))
            i += 1
        if len(docs) <= 1:  # (a batch inside one segment: its arrays as they are)
            return (targets[0], docs[0]) if docs else (np.empty(0, np.int32), np.empty(0, np.int64))
        return np.concatenate(targets), np.concatenate(docs)

    def at(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(target positions, shard doc numbers) of the documents at `positions` (each below
        `total`): one binary search for all, one gather per segment they fall in."""
        starts = np.array(self.starts, dtype=np.int64)
        views = np.searchsorted(starts, positions, side="right") - 1
        local = positions - starts[views]
        targets = np.empty(len(positions), np.int32)
        docs = np.empty(len(positions), np.int64)
        for i in np.unique(views).tolist():
            rows = views == i
            ti, view = self.views[i]
            sel = self.selected[i]
            found = local[rows]
            if sel is not None:
                found = sel[found]
            elif view.live is not None:
                found = view.live_docs[found]
            targets[rows] = ti
            docs[rows] = found + view.doc_base
        return targets, docs


def shard_doc_page(
    targets: list[Target],
    spec: SortSpec,
    after: int | None,
    offset: int,
    size: int,
    window: tuple[int, int] | None,
) -> HitList:
    """One page of a walk over every live document sorted by `_shard_doc` alone.

    `after` is the `search_after` value (None: start at `offset`); `window` restricts the walk to
    a range of positions (a PIT slice). The result holds only the page.
    """
    docs = LiveDocs(targets)
    lo, hi = window if window is not None else (0, docs.total)
    if after is None and offset < 0:
        offset = 0
    if not spec.descending:
        start = max(lo, docs.rank(after)) if after is not None else lo + offset
        start = min(start, hi)
        target_arr, doc_arr = docs.take(start, min(start + size, hi))
    else:
        # Strictly after `after` in descending order: the documents whose key is below it.
        top = min(hi, docs.rank(after - 1)) if after is not None else hi - offset
        top = max(top, lo)
        target_arr, doc_arr = docs.take(max(lo, top - size), top)
        target_arr, doc_arr = target_arr[::-1], doc_arr[::-1]
    values = (target_arr.astype(np.int64) << 32) | doc_arr
    column = SortColumn(spec, "shard_doc", values, None)
    return HitList(targets, target_arr, doc_arr, None, [column], [], -1, None, window=True)


def list_key(request: SearchRequest) -> tuple | None:
    """What a list of every match of `request` (`build_hitlist`) depends on besides its
    snapshots; None when its matches depend on the clock (`now` in date math): no such list is
    kept for another request."""
    qkey = query_key(request.query)
    post = query_key(request.post_filter) if request.post_filter is not None else None
    if "now" in repr(qkey) or "now" in repr(post):
        return None
    return (
        qkey,
        post,
        tuple(request.sort),
        request.slice,
        request.pit is not None,
        request.min_score,
        request.terminate_after,
        request.track_scores,
        request.dfs,
        None if request.collapse is None else request.collapse.field,
    )


class HitListCache:
    """Recently built HitLists, bounded by memory, keyed by snapshots + query + sort + slice.

    Queries whose result depends on the clock (`now` in date math) are never cached, nor a
    HitList cut short by its timeout; a released snapshot's HitLists go with it.
    """

    def __init__(self, max_bytes: int, ordinals: GlobalOrdinals, events: ShardEvents) -> None:
        """The node's: bounded by `indices.cache.hitlist.size`; `ordinals` are its global ordinals,
        `events` its shards' (a released snapshot's lists go)."""
        self.ordinals = ordinals
        self._lists: BoundedCache[tuple, HitList] = BoundedCache(max_bytes, HitList.nbytes)
        self._lock = threading.Lock()  # a new list is kept only if no snapshot of it was released
        self._building: dict[tuple, threading.Lock] = {}
        self._events = events
        events.on_snapshot_closed(self._forget)

    def close(self) -> None:
        """Stop listening for released snapshots and drop every list (the node is closing)."""
        self._events.remove(self._forget)
        self._lists.clear()

    def resize(self, max_bytes: int) -> None:
        """Set the bound (`indices.cache.hitlist.size`); HitLists that no longer fit go."""
        self._lists.resize(max_bytes)

    def lists(self) -> list[HitList]:
        return self._lists.values()

    def get_or_build(
        self, targets: list[Target], request: SearchRequest, *, with_aggs, guard: SearchGuard
    ) -> HitList:
        """A cached HitList, or one built now (one build at a time per key)."""
        now = int(time.time() * 1000)
        matches = list_key(request)
        if with_aggs is not None or request.profile or matches is None:
            return build_hitlist(
                targets, request, now_millis=now, with_aggs=with_aggs, guard=guard, ordinals=self.ordinals
            )
        key = (snapshot_key(targets), *matches)
        hit = self._lists.get(key)
        if hit is not None:
            return hit
        with self._lock:
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:
            hit = self._lists.get(key)
            if hit is not None:
                return hit
            try:
                hit = build_hitlist(
                    targets, request, now_millis=now, with_aggs=None, guard=guard, ordinals=self.ordinals
                )
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                # A snapshot released while this was built was already forgotten: keep nothing of it.
                if not hit.timed_out and not any(t.searcher.closed for t in targets):
                    hit.key_bytes = len(repr(key))
                    self._lists.put(key, hit)
        return hit

    def _forget(self, searcher: Searcher) -> None:
        """Drop HitLists of a released snapshot, so its memory and segment files go with it."""
        with self._lock:
            self._lists.discard_where(lambda _, hit: any(t.searcher is searcher for t in hit.targets))
