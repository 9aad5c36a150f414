"""The query phase of one page: the best `from + size` hits, never a sort of every match.

A search that is not a walk over a point in time or a scroll (those page through one snapshot and
keep a full `HitList`, see hitlist.py, unless the node keeps none: then a PIT page is served here,
on the PIT's shard contexts) needs only its top `k = from + size` hits. Per segment:

- sorted by fields: the segment's sort order (segment_orders.py, computed once per segment) is
  walked under the match mask until `k` hits are found; `search_after` starts the walk at a
  binary search of the segment's sorted keys, so a deep cursor costs what the first page costs;
- sorted by `_score`: `argpartition` selects the `k` best scores, ties broken exactly (by doc when
  nothing follows `_score` in the sort, else every tie is kept for the final sort); with a field
  before `_score`, every match is sorted (the best scores are not the best hits);
- `size: 0`: nothing is selected, only counted.

Each shard (`LocalShard`, behind the shard interface of shard_api.py) sorts its segments'
candidates (at most `k` each) and keeps its best `k`; the coordinator runs the shards at once and
merges their top hits, ties by shard then doc, cut to `k`: O(k * segments * log) instead of
O(matches * log matches). Totals, max score and aggregations still see every match. Under
`dfs_query_then_fetch` a DFS phase on every shard comes first (dfs.py); the page's fetch goes
through the same interface (fetch_phase.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.settings import index_setting
from leafsearch.errors import (
    ElasticError,
    IllegalArgument,
    SearchPhaseExecution,
    ShardFailed,
    ShardUnavailable,
)
from leafsearch.index import order_files
from leafsearch.request.search_types import DOC, SCORE, SHARD_DOC, SearchRequest, SortSpec
from leafsearch.search import fetch
from leafsearch.search.aggregations import MAX_BUCKETS, MAX_NESTED_DEPTH, parse_aggs
from leafsearch.search.aggregations import collect as collect_aggs
from leafsearch.search.dfs import DfsStats, SummedStats
from leafsearch.search.fetch_phase import fetch_shard
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import (
    HitList,
    SegmentMatches,
    SegmentVisit,
    effective_sort,
    needs_scores,
    position_after,
    score_column,
    segment_matches,
    shard_statistics,
    sort_column,
    sort_hits,
)
from leafsearch.search.profile import ShardProfile
from leafsearch.search.rescore import kept_hits, rescore_hits
from leafsearch.search.segment_orders import (
    DocOrder,
    Order,
    OrderFile,
    SegmentOrder,
    SegmentOrders,
    build_order,
)
from leafsearch.search.shard_api import (
    FetchAlong,
    ShardContextId,
    ShardDfs,
    ShardFetch,
    ShardFetchResult,
    ShardQuery,
    ShardSearch,
    ShardSuggest,
    ShardTopDocs,
    SortPlan,
    each_call,
    each_phase,
    merge_columns,
)
from leafsearch.search.slicing import pit_slice_windows, shard_in_slice
from leafsearch.search.sort_keys import SortColumn, resolve_field_kind, special_kind
from leafsearch.search.targets import Target

if TYPE_CHECKING:
    from leafsearch.index.searcher import SegmentView
    from leafsearch.index.segment import Segment
    from leafsearch.search.services import CoordinatorServices, SearchServices
    from leafsearch.search.shard_contexts import ShardContexts

#: Pages deeper than this are served from a full, cached HitList (Elasticsearch's default
#: `index.max_result_window`): past it, the top-k candidates of every segment cost as much.
MAX_TOP_K = 10_000


def serves(request: SearchRequest) -> bool:
    """Whether a request's page is computed here rather than from a full HitList, for shards of
    this process (a search of shard actors is always served here: phases.query_phase).

    Every page of a walk over a point in time, a scroll or a by-query source is (on its pinned
    snapshots, from its cursor; a walk sorted by `_score` may page through a list of every match
    instead, walks.py). Rescoring, `terminate_after` and pages deeper than `MAX_TOP_K` go to the
    HitList here (the list is cached for the next page), and so does `search_after` on `_score`
    outside a walk (`collapse` has rounds of its own: collapse_shards.py); a shard serves them
    too (see `LocalShard`), as Elasticsearch's shards do, for the shard actors."""
    return (
        not request.rescore
        and request.collapse is None
        and request.terminate_after is None
        and request.from_ + request.size <= MAX_TOP_K
        and (
            request.search_after is None
            or request.pit is not None
            or request.scroll is not None
            or all(s.field != SCORE for s in effective_sort(request))
        )
    )


def top_hits(
    services: SearchServices,
    targets: list[Target],
    request: SearchRequest,
    *,
    now_millis: int,
    aggs: bool,
    shards: Sequence[ShardSearch],
    contexts: Sequence[ShardContextId | None] | None = None,
    fetch: FetchAlong | None = None,
) -> HitList:
    """The HitList of the request's top `from + size` hits (in sort order) and its totals: every
    shard's query phase at once through the shard interface (after their DFS phase, for
    `dfs_query_then_fetch`), then their top hits merged.

    `shards` and `contexts` (the snapshot each shard pinned; None: the one its handle holds) are
    per target; the targets give the coordinator the indices' mappings. `fetch`: the page's
    fetch the caller will run; a remote shard asked alone runs it with its query (`HitList.
    fetched`; query_and_fetch.py)."""
    plan = sort_plan(request, targets)
    pins = list(contexts) if contexts is not None else [None] * len(targets)
    pool = services.shard_pool
    stats = None
    failures: list[ShardFailed] = []
    live = list(range(len(targets)))  # the shards that have not failed
    # One shard's own statistics are the DFS's sum: Elasticsearch runs a one-shard search's
    # `dfs_query_then_fetch` as `query_then_fetch`, which saves the shard a call.
    if request.dfs and needs_scores(request) and len(targets) > 1:
        asks = [ShardDfs(request, i, now_millis, pins[i]) for i in live]
        answers = each_phase(pool, shards, "dfs", asks, catch=(ShardFailed,))
        found = _survivors(services, request, answers, failures, len(targets))
        live = [i for i, answer in zip(live, answers, strict=True) if not isinstance(answer, ShardFailed)]
        stats = DfsStats.total(found)
    n = len(targets)
    windows = _slice_windows(request, targets)
    asked = [i for i in live if may_match(request, i, n, windows)]

    def ask(round_: list[int], along: FetchAlong | None) -> tuple[list[ShardQuery], list[Any]]:
        queries = [
            ShardQuery(
                request,
                i,
                now_millis,
                plan,
                aggs,
                stats,
                pins[i],
                n,
                slice_window=None if windows is None else windows[i],
            )
            for i in round_
        ]
        if along is not None and len(round_) == 1 and targets[round_[0]].remote and not request.profile:
            types = tuple(sort_field_types(spec, targets) for spec in plan.specs)
            queries[0] = replace(queries[0], fetch=replace(along, targets=n, field_types=types))
        elif along is not None and _renders_candidates(request, along, [targets[i] for i in round_]):
            types = tuple(sort_field_types(spec, targets) for spec in plan.specs)
            candidates = replace(along, targets=n, field_types=types, candidates=True)
            queries = [replace(q, fetch=candidates) for q in queries]
        return queries, each_phase(pool, shards, "query", queries, catch=(ShardFailed,))

    walked = shard_walk(request, targets, asked, contexts)
    if walked is not None:
        queries, answers = ask(walked[:1], fetch)
        (first,) = answers
        if isinstance(first, ShardFailed) or len(first.docs) < request.from_ + request.size:
            more, answered = ask(walked[1:], None)
            queries, answers = queries + more, answers + answered
    else:
        queries, answers = ask(asked, fetch)
    results = _survivors(services, request, answers, failures, len(targets))
    hits = merge_top_docs(targets, request, plan, results)
    hits.failures = failures
    by_shard = {q.shard_index: q for q in queries}
    fetched = {r.shard_index: (by_shard[r.shard_index], r) for r in results if r.page is not None}
    if fetched:
        hits.fetched = fetched
    if contexts is not None:
        hits.contexts = pins
    return hits


def shard_walk(
    request: SearchRequest,
    targets: list[Target],
    asked: list[int],
    contexts: Sequence[ShardContextId | None] | None,
) -> list[int] | None:
    """The shards `asked` in the order a page asks them one by one (`_shard_by_shard`), or None
    when it asks them all at once."""
    if not _shard_by_shard(request, [targets[i] for i in asked], contexts):
        return None
    return asked[::-1] if effective_sort(request)[0].descending else asked


def _shard_by_shard(
    request: SearchRequest, asked: list[Target], contexts: Sequence[ShardContextId | None] | None
) -> bool:
    """Whether a page is asked of its first shard alone, and of the others only when that one
    does not fill it: a walk in `_shard_doc` order of pinned shard actors (a PIT's, a scroll's),
    counting nothing (`track_total_hits: false`, no aggregations), whose page every shard before
    the last it reaches fills whole. So a page is mostly one call (the shard's query and fetch
    together) where it asked every shard from the cursor's on and fetched from one; a page that
    crosses into the next shards asks them in a second round, and fetches apart. Not without
    contexts: a one-shot search's shard frees its snapshot as it answers with its page."""
    return (
        len(asked) > 1
        and contexts is not None
        and request.track_total_hits is False
        and request.aggs is None
        and not request.profile
        and not request.rescore
        and request.terminate_after is None
        and request.from_ + request.size > 0
        and effective_sort(request)[0].field == SHARD_DOC
        and all(t.remote for t in asked)
    )


#: The largest one-shot page (`from + size`) of several shard actors whose shards render their
#: candidates with their query (`FetchAlong.candidates`): each renders up to that many hits, of
#: which the page keeps `size` in all, to save the coordinator a fetch call per machine.
CANDIDATES_MAX_HITS = 100


def _renders_candidates(request: SearchRequest, fetch: FetchAlong, asked: list[Target]) -> bool:
    """Whether the shards asked render their candidates with their query: a one-shot search's
    small page of bytes (`fetch`), over shard actors only, from its first hit (no cursor, not
    backwards, not profiled)."""
    k = request.from_ + request.size
    return (
        len(asked) > 1
        and fetch.raw
        and fetch.last_phase
        and fetch.request is None
        and fetch.shown is None
        and 0 < k <= CANDIDATES_MAX_HITS
        and request.search_after is None
        and not request.backwards
        and not request.profile
        and all(t.remote for t in asked)
    )


def _slice_windows(request: SearchRequest, targets: list[Target]) -> list[tuple[int, int]] | None:
    """Per target, its part of a PIT slice without a field (`slicing.pit_slice_windows`): the
    slice's contiguous range of live documents over every shard, as the walks over a HitList and
    over the live documents cut it, so every page of a sliced walk holds the same documents
    whichever way it is served. None for other requests, and over shard actors (the coordinator
    does not count their live documents: their slices go to shards first)."""
    sliced = request.slice
    if request.pit is None or sliced is None or sliced.field is not None or any(t.remote for t in targets):
        return None
    return pit_slice_windows(sliced, targets)


def may_match(
    request: SearchRequest, shard_index: int, shard_count: int, windows: list[tuple[int, int]] | None
) -> bool:
    """Whether a shard is asked for its top hits. Not when it can add nothing to the answer:

    - the request's slice holds none of its documents (slices go to shards first, or hold
      contiguous `windows` of live documents), so a page of a slice costs calls to its own
      shards only;
    - the sort is led by `_shard_doc`, nothing is counted (`track_total_hits: false`, no
      aggregations) and the `search_after` cursor is past every document of the shard (in the
      sort's direction), as Elasticsearch's can-match phase skips a shard whose sort values all
      lie before the cursor: a walk's page asks the shards from the cursor's on.

    A profiled search asks every shard: its profile lists each."""
    if request.profile:
        return True
    sliced = request.slice
    if windows is not None and windows[shard_index][1] <= windows[shard_index][0]:
        return False
    if windows is None and sliced is not None and not shard_in_slice(sliced, shard_index, shard_count):
        return False
    after = request.search_after
    if after is None or request.track_total_hits is not False or request.aggs is not None:
        return True
    first = effective_sort(request)[0]
    if first.field != SHARD_DOC or type(after[0]) is not int:
        return True
    cursor_shard = after[0] >> 32  # (`_shard_doc` is shard index << 32 | doc)
    return shard_index <= cursor_shard if first.descending else shard_index >= cursor_shard


def _survivors(
    services: SearchServices, request: SearchRequest, answers: list, failures: list[ShardFailed], shards: int
) -> list:
    """The answers of the shards that did not fail; the failures go to `failures`. As
    Elasticsearch: every
    shard failed is `search_phase_execution_exception` "all shards failed"; some, when partial
    results are refused (`allow_partial_search_results: false`, or the node's default), "Partial
    shards failure"."""
    failures.extend(a for a in answers if isinstance(a, ShardFailed))
    answered = [a for a in answers if not isinstance(a, ShardFailed)]
    if not failures:
        return answered
    entries = [f.failure(services.node_id) for f in failures]
    if len(failures) == shards:
        raise SearchPhaseExecution(failures[0].cause, failed_shards=entries)
    allow = request.allow_partial_search_results
    if allow is None:
        allow = services.cluster_settings.get("search.default_allow_partial_results")
    if not allow:
        raise SearchPhaseExecution(failures[0].cause, reason="Partial shards failure", failed_shards=entries)
    return answered


def shard_handles(
    services: SearchServices, targets: list[Target], cancelled: threading.Event | None = None
) -> list[ShardSearch]:
    """The shard interface of each target (each reads its target's snapshot unless a message
    names a pinned context): this process's shard, or the client of a shard actor whose
    snapshot lease the target holds (a Ray-backed index, ray_backend/remote.py)."""
    return [t.searcher.handle(t) if t.remote else LocalShard(services, t, cancelled) for t in targets]  # type: ignore[attr-defined]


def open_shard_contexts(
    services: CoordinatorServices, targets: list[Target], name: str | None = None
) -> list[ShardContextId]:
    """A context on each target's shard, pinning the snapshot a PIT, scroll or by-query walk
    reads (`name`: kept on disk under it, see `ShardSearch.open_context`), all shards asked at
    once (`each_call`: a call per machine of a Ray-backed index). When a shard cannot open (its
    actor is down), the pins the others took are freed before the first error goes up: nothing
    would ever free them, as no keep-alive runs for a context that was never handed out."""
    answers: list[Any] = []
    for wait in each_call(shard_handles(services, targets), "open_context", [(name,)] * len(targets)):
        try:
            answers.append(wait())
        except Exception as exc:  # (every answer is read: each may have pinned a snapshot)
            answers.append(exc)
    failed = [answer for answer in answers if isinstance(answer, Exception)]
    if failed:
        opened = [(t, a) for t, a in zip(targets, answers, strict=True) if not isinstance(a, Exception)]
        free_shard_contexts(services, [t for t, _ in opened], [a for _, a in opened])
        raise failed[0]
    return answers


def free_shard_contexts(
    services: CoordinatorServices, targets: list[Target], contexts: Sequence[ShardContextId]
) -> list[tuple[Target, ShardContextId]]:
    """Free the shard contexts `open_shard_contexts` took (the first `len(contexts)` targets'),
    all shards asked at once. A shard that cannot answer does not stop the others' from being
    freed; returned are those whose shard was unavailable (a shard actor down: a context it
    keeps on disk is still there, to free again later)."""
    targets = targets[: len(contexts)]
    unfreed: list[tuple[Target, ShardContextId]] = []
    waits = each_call(shard_handles(services, targets), "free_context", [(c,) for c in contexts])
    for target, wait, context in zip(targets, waits, contexts, strict=True):
        try:
            wait()
        except ShardUnavailable:
            unfreed.append((target, context))
        except ElasticError:
            continue
    return unfreed


def sort_plan(request: SearchRequest, targets: list[Target]) -> SortPlan:
    """How every shard executes the request's sort (see `SortPlan`)."""
    specs = effective_sort(request)
    resolved: list[tuple[str, Any]] = []
    uniform = True
    names = [t.index.name for t in targets]
    for spec in specs:
        special = special_kind(spec)
        if special is not None:
            resolved.append((special, None))
            continue
        field_types = [t.mapping.field(spec.field) for t in targets]
        kind = resolve_field_kind(spec, field_types, names)
        resolved.append((kind, next((ft for ft in field_types if ft is not None), None)))
        per_index = {resolve_field_kind(spec, [ft], [n]) for ft, n in zip(field_types, names, strict=True)}
        uniform = uniform and per_index == {kind} and spec.geo is None  # distances: no segment order
    return SortPlan(tuple(specs), tuple(resolved), uniform)


def merge_top_docs(
    targets: list[Target], request: SearchRequest, plan: SortPlan, results: list[ShardTopDocs]
) -> HitList:
    """The shards' top hits as one HitList in sort order, ties by shard then doc, cut to `k`."""
    k = request.from_ + request.size
    target_arr = np.concatenate(
        [np.full(len(r.docs), r.shard_index, np.int32) for r in results] or [np.empty(0, np.int32)]
    )
    doc_arr = np.concatenate([r.docs for r in results] or [np.empty(0, np.int64)])
    score_arr = None
    if needs_scores(request):
        score_arr = np.concatenate(
            [r.scores for r in results if r.scores is not None] or [np.empty(0, np.float32)]
        )
    columns = []
    for i, (spec, (kind, _)) in enumerate(zip(plan.specs, plan.resolved, strict=True)):
        field_types = sort_field_types(spec, targets)
        columns.append(merge_columns(spec, kind, [r.columns[i] for r in results], field_types))
    if len(results) == 1:  # one shard's answer comes in sort order (a walk's page, a slice's)
        keys = [key for column in columns for key in column.key_columns()]
    else:
        target_arr, doc_arr, score_arr, columns, keys = sort_hits(columns, target_arr, doc_arr, score_arr)
    maxima = [r.max_score for r in results if r.max_score is not None]
    total = sum(r.total for r in results)
    partials = [p for r in results for p in r.agg_partials]
    hits = HitList(
        targets, target_arr, doc_arr, score_arr, columns, keys, total, max(maxima, default=None), partials
    )
    hits.timed_out = any(r.timed_out for r in results)
    hits.terminated_early = any(r.terminated_early for r in results)
    if request.profile:
        hits.profiles = [r.profile or ShardProfile() for r in results]
    if len(hits) > k and request.search_after is None:
        # (With a cursor, a segment without an order gave every match: the page starts after it.)
        hits = _first(hits, k)
    return hits


def sort_field_types(spec: SortSpec, targets: Sequence[Target]) -> tuple:
    """The sort field's type in each target, which render its values; () for `_score`, `_doc`
    and `_shard_doc`."""
    return () if special_kind(spec) else tuple(t.mapping.field(spec.field) for t in targets)


class LocalShard:
    """A shard of this process behind the shard interface.

    `target` is the snapshot the coordinator resolved for the request: what a message without a
    context reads. `open_context` pins it in the node's `shard_contexts`; a message naming that
    context reads the pinned snapshot."""

    def __init__(self, services: SearchServices, target: Target, cancelled: threading.Event | None) -> None:
        self.services = services
        self.target = target
        self.cancelled = cancelled

    def pins(self) -> ShardContexts:
        """The server process's (or a shard actor's) pinned snapshots."""
        pins = self.services.shard_contexts
        if pins is None:  # a search worker is given its snapshots with each task
            raise RuntimeError("shard contexts are pinned in the server process or a shard actor only")
        return pins

    def open_context(self, name: str | None = None) -> ShardContextId:
        return self.pins().open(self.target, name)

    def free_context(self, context: ShardContextId) -> bool:
        return self.pins().free(context)

    def _snapshot(self, context: ShardContextId | None) -> Target:
        return self.target if context is None else self.pins().get(context)

    def dfs(self, request: ShardDfs) -> DfsStats:
        guard = SearchGuard.for_search(self.services, request.request, self.cancelled)
        try:
            return shard_statistics(
                self._snapshot(request.context), request.request, request.now_millis, guard
            )
        finally:
            guard.release_all()

    def fetch(self, fetch: ShardFetch) -> ShardFetchResult:
        return fetch_shard(self._snapshot(fetch.context), fetch)

    def suggest(self, message: ShardSuggest) -> list[Any]:
        from leafsearch.search.suggest import shard_suggestions  # it renders with fetch's helpers

        return shard_suggestions(self._snapshot(message.context), message)

    def query(self, query: ShardQuery) -> ShardTopDocs:
        guard = SearchGuard.for_search(self.services, query.request, self.cancelled)
        try:
            if query.collapse is not None:
                from leafsearch.search.collapse_shards import shard_round

                return shard_round(self.services, self._snapshot(query.context), query, guard)
            return self._query(query, guard)
        finally:
            guard.release_all()

    def _query(self, query: ShardQuery, guard: SearchGuard) -> ShardTopDocs:
        request, target, plan = query.request, self._snapshot(query.context), query.sort
        started = time.perf_counter_ns()
        profile = ShardProfile() if request.profile else None
        # A rescored search keeps more of its first pass than the page: its rescore windows.
        k = kept_hits(request) if request.rescore else request.from_ + request.size
        specs = list(plan.specs)
        # A page of no hits reports no max_score: unless something else reads them, no scores.
        scoring = needs_scores(request) and (k > 0 or bool(query.aggs) or request.min_score is not None)
        by_fields = all(s.field != SCORE for s in specs)
        partials: list = []
        collect = None
        if query.aggs:
            tree = shard_aggs(self.services, request, target, query.now_millis)
            collect = lambda _t, view, docs, ctx, scores=None: partials.append(  # noqa: E731
                collect_aggs(tree, view, docs, ctx, scores)
            )
        total = 0
        max_score: float | None = None
        selected: list[_Selected] = []
        bound = _Bound(k) if by_fields and plan.uniform and plan.resolved[0][0] in _COMPARABLE else None
        after: list[Any] | None = None
        scripted = any(s.script is not None for s in specs)  # (orders are kept for fields)
        orders = (
            shard_orders(self.services.sort_orders, target, plan)
            if by_fields and plan.uniform and k and not scripted
            else None
        )
        # Where the cursor falls in each segment's order: the page starts there.
        starts: dict[int, int] = {}
        if request.search_after is not None and orders:
            after = _after_values(request, target, specs)
            for view in target.searcher.views:
                order = orders.get(id(view.segment))
                if order is not None:
                    starts[id(view.segment)] = order.start_after(after, query.shard_index, view.doc_base)
        early = (
            _Competitive(orders or {}, bound, request.track_total_hits, starts, counts_only=k == 0)
            if (k == 0 or orders is not None)
            and collect is None
            and profile is None
            and not scoring
            and request.track_total_hits is not True
            and not request.rest_total_hits_as_int
            and request.terminate_after is None
            else None
        )
        limit = request.terminate_after
        terminated = False
        visit: SegmentVisit | None = early
        if limit is not None and collect is None:  # (aggregations see every segment, as a HitList's)
            visit = _Terminating(lambda: terminated)
        for m in segment_matches(
            [target],
            request,
            now_millis=query.now_millis,
            needs_scores=scoring,
            with_aggs=collect,
            guard=guard,
            stats=query.dfs_stats,
            profiles=None if profile is None else [profile],
            position=None if query.shard_count is None else (query.shard_index, query.shard_count),
            slice_window=query.slice_window,
            visit=visit,
        ):
            if limit is not None:
                m, cut = _collect_up_to(m, limit - total)
                terminated = terminated or cut
            count = m.count()
            total += count
            if early is not None:
                early.counted = total
            if count and m.scores is not None:
                best = float(np.max(m.scores, where=m.dense(), initial=-np.inf))
                max_score = best if max_score is None else max(max_score, best)
            if not count or not k:
                continue
            order = None if orders is None else orders.get(id(m.view.segment))
            keys = None
            if order is not None:
                start = starts.get(id(m.view.segment), 0)
                end = None if bound is None or bound.key is None else order.end_at(bound.key)
                docs = order.first(m, start, k, count, end)  # in sort order
                if bound is not None:
                    keys = order.first_keys(docs)
                    bound.add(keys)
            elif by_fields:
                docs = m.docs()  # no order fits the cache: every match is sorted below
            elif specs[0].field != SCORE:
                docs = m.docs()  # a field before `_score`: every match is sorted below
            else:
                docs = m.docs()
                ties = None
                if request.search_after is not None:
                    if after is None:
                        after = _after_values(request, target, specs)
                    docs, ties = _scored_after(docs, m.scores, after[0], specs[0])
                docs = _best_scores(m.scores, docs, k, specs)
                if ties is not None and len(specs) > 1:
                    docs = np.union1d(docs, ties)  # the cut below compares them with the cursor
            selected.append(_Selected(m.view, docs, None if m.scores is None else m.scores[docs], keys))
        seg_docs: list[tuple[int, SegmentView, np.ndarray]] = []
        scores: list[np.ndarray] = []
        if early is not None:  # ties reach the stable sort below in doc order
            selected.sort(key=lambda sel: sel.view.doc_base)
        for sel in selected:
            docs, doc_scores = sel.within(None if bound is None else bound.key)
            seg_docs.append((0, sel.view, docs))
            if doc_scores is not None:
                scores.append(doc_scores)
        doc_arr = np.concatenate([d + v.doc_base for _, v, d in seg_docs] or [np.empty(0, np.int64)])
        target_arr = np.full(len(doc_arr), query.shard_index, np.int32)
        score_arr = np.concatenate(scores) if scores else np.empty(0, np.float32)
        if not scoring and by_fields:
            score_arr = None
        columns = [
            sort_column(spec, [target], seg_docs, target_arr, doc_arr, score_arr, few=True, resolved=resolved)
            for spec, resolved in zip(specs, plan.resolved, strict=True)
        ]
        _, doc_arr, score_arr, columns, keys = sort_hits(columns, target_arr, doc_arr, score_arr)
        start = 0
        if request.search_after is not None and len(doc_arr):
            if after is None:
                after = _after_values(request, target, specs)
            pairs = zip(columns, after, strict=True)
            cursor = [key for column, value in pairs for key in column.after_key(value)]
            start = position_after(keys, cursor, len(doc_arr))
        if start or len(doc_arr) > k:
            first = slice(start, start + k)  # the shard's best k after the cursor
            doc_arr = doc_arr[first]
            score_arr = score_arr[first] if score_arr is not None else None
            columns = [c.take(first) for c in columns]
        if request.rescore:
            assert score_arr is not None
            doc_arr, score_arr, columns, max_score = _rescored(query, target, doc_arr, score_arr)
        if profile is not None:
            profile.collector_name = "SimpleTopScoreDocCollector" if not by_fields else "SimpleFieldCollector"
            profile.collector_nanos = time.perf_counter_ns() - started - profile.measured_nanos()
        return ShardTopDocs(
            query.shard_index,
            total,
            max_score,
            doc_arr,
            score_arr,
            columns,
            partials,
            guard.expired,
            profile,
            terminated_early=terminated,
        )


def _rescored(
    query: ShardQuery, target: Target, docs: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[SortColumn], float | None]:
    """A shard's kept hits (score order, ties by doc) after the request's rescorers, as
    Elasticsearch's shards rescore in their query phase: (docs, scores, their score column, the
    best score). Under DFS the rescore queries score with the summed statistics of the DFS
    phase, which recorded their terms too (hitlist.shard_statistics)."""
    request = query.request
    stats = None if query.dfs_stats is None else SummedStats(query.dfs_stats, target.searcher)
    shard = np.zeros(len(docs), np.int32)
    _, docs, scores = rescore_hits(request, [target], shard, docs, scores, query.now_millis, stats)
    column = score_column(SortSpec(SCORE, "desc"), scores)
    return docs, scores, [column], float(scores.max()) if len(scores) else None


def _collect_up_to(matches: SegmentMatches, room: int) -> tuple[SegmentMatches, bool]:
    """A segment's matches cut to the first `room` (doc order), as `terminate_after` collects
    on a shard; and whether any was cut (the shard terminated early). O(matches)."""
    docs = matches.docs()
    room = max(room, 0)
    if len(docs) <= room:
        return matches, False
    return SegmentMatches(matches.target, matches.view, None, matches.scores, docs[:room]), True


#: Sort kinds whose keys compare across a shard's segments (keyword keys are segment ordinals,
#: `_doc` keys segment-local): only they bound the other segments' walks.
_COMPARABLE = ("long", "double")


class _Bound:
    """The `k`-th smallest first sort key among the candidates selected so far on a shard.

    Why: a page at `from` = 9,900 takes up to 10,000 candidates from every segment, then sorts
    them all. Once `k` candidates have a first key at most `key`, no document keyed after it can
    make the page, so later segments walk only up to it (`SegmentOrder.end_at`) and every
    segment's candidates are cut to it before the sort: time-ordered segments then add almost
    none. Ties with `key` are kept, so the page is exactly the full sort's. Cost O(k + candidates)
    per segment: the best keys so far and a segment's keys are two sorted runs, which a stable
    sort (timsort) merges in one pass."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.key: Any = None
        self._best: np.ndarray | None = None  # the k smallest keys so far, ascending

    def add(self, keys: np.ndarray) -> None:
        """Take a segment's candidates' first keys (ascending)."""
        if not len(keys):
            return
        best = keys if self._best is None else np.sort(np.concatenate([self._best, keys]), kind="stable")
        self._best = best[: self.k]
        if len(self._best) == self.k:
            self.key = self._best[-1]


class _Competitive:
    """The segments a sorted page, or a request for no hits, still needs, for
    `segment_matches`: once the total is past what `track_total_hits` counts exactly, a segment
    is not run at all when
    - every document of it comes at or before the `search_after` cursor (`starts`: per segment
      the position after the cursor in its order, the page's start there);
    - the page is sorted by a numeric field and the segment's best first key after the cursor
      comes after the page's `bound` (its smallest key in the order's ascending key space);
      segments are then run best first key first, so the bound tightens early;
    - the request wants no hits (`counts_only`): no segment is run any more.

    Why: a new snapshot of time-ordered data (a log dashboard after each refresh) holds a few
    tiny new segments and many large ones; the page is in the newest, and running the query on
    every other segment only to count matches already past 10,000 was most of the page's cost.
    Elasticsearch stops counting there too (relation `gte`) and skips the segments a sorted query
    cannot reach. A walk's page reads the segments from its cursor on: those it has passed cost
    nothing. Only for requests that need nothing else from every match: no aggregations, no
    scores, no profile, and totals not counted exactly (`track_total_hits` a number or false).
    The count stays exact up to the threshold, so the response's total and relation are the
    ones a full count gives."""

    def __init__(
        self,
        orders: dict[int, Order | None],
        bound: _Bound | None,
        threshold: int | bool,
        starts: dict[int, int],
        *,
        counts_only: bool,
    ) -> None:
        self.bound = bound
        self.threshold = threshold
        self.counts_only = counts_only
        self.counted = 0  # matches counted so far on the shard
        self._passed = {
            key
            for key, start in starts.items()
            if (order := orders.get(key)) is not None and start >= len(order)
        }
        self._best: dict[int, Any] = {}
        if bound is not None:
            for key, order in orders.items():
                start = starts.get(key, 0)
                if isinstance(order, SegmentOrder) and start < len(order):
                    self._best[key] = order.keys[0][start]

    def order(self, views: list[SegmentView]) -> list[int]:
        """Segments without a best key first (they cannot be skipped by it), then by best key."""
        known = [i for i in range(len(views)) if id(views[i].segment) in self._best]
        known.sort(key=lambda i: self._best[id(views[i].segment)])
        return [i for i in range(len(views)) if id(views[i].segment) not in self._best] + known

    def skips(self, view: SegmentView) -> bool:
        if self.threshold is not False and self.counted <= self.threshold:
            return False
        if self.counts_only or id(view.segment) in self._passed:
            return True
        if self.bound is None or self.bound.key is None:
            return False
        best = self._best.get(id(view.segment))
        return best is not None and bool(best > self.bound.key)


class _Terminating:
    """The segments a shard still runs under `terminate_after`: in order, none once the shard
    has collected its limit and seen a match past it (`done`), for `segment_matches`."""

    def __init__(self, done: Callable[[], bool]) -> None:
        self.done = done

    def order(self, views: list[SegmentView]) -> list[int]:
        return list(range(len(views)))

    def skips(self, view: SegmentView) -> bool:
        return self.done()


@dataclass
class _Selected:
    """A segment's candidates and their scores: docs in sort order (ties in doc order) when
    `keys`, their first keys, are known, else ascending. Either way ties reach the final stable
    sort in (shard, doc) order, as the full sort has them."""

    view: SegmentView
    docs: np.ndarray
    scores: np.ndarray | None
    keys: np.ndarray | None

    def within(self, bound: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(docs, their scores) without those keyed after `bound` (None: no bound)."""
        if self.keys is None or bound is None:
            return self.docs, self.scores
        cut = int(np.searchsorted(self.keys, bound, side="right"))
        return self.docs[:cut], None if self.scores is None else self.scores[:cut]


def shard_aggs(services: SearchServices, request: SearchRequest, target: Target, now_millis: int) -> Any:
    """The request's aggregations parsed for one shard's mapping, with the node's limits."""
    return parse_aggs(
        request.aggs,
        target.mapping,
        index=target.index.name,
        now_millis=now_millis,
        max_depth=int(services.cluster_settings.get(MAX_NESTED_DEPTH)),
        max_buckets=int(services.cluster_settings.get(MAX_BUCKETS)),
        max_inner_result_window=index_setting(target.index.settings, "index.max_inner_result_window"),
    )


def shard_orders(orders: SegmentOrders, target: Target, plan: SortPlan) -> dict[int, Order | None]:
    """Every segment's order for this sort (by `id` of the segment), built now where missing.

    Why every segment, and not only those a query matches: a time range matches a few segments
    of time-ordered data, so each later query reaching a segment not ordered yet paid its sort
    (tens of milliseconds at a million documents), in every search process: the tail of distinct
    queries was made of these. Now the first query on a key pays for the shard once, writes the
    orders of large segments to files (order_files.py), and every later query, in any process,
    finds or maps them. O(segments) cache lookups per query once they exist.

    A sort led by `_shard_doc` (or `_doc` alone) is doc order: a `DocOrder`, nothing built. A
    sort ending with an ascending `_doc` or `_shard_doc` (a PIT's tiebreaker) reads the order of
    the sort without it, whose ties are already in doc order (`with_doc_tiebreaker`)."""
    specs = list(plan.specs)
    views = [view for view in target.searcher.views if view.live_count]
    first, then = specs[0], specs[1:]
    if first.field == SHARD_DOC or (first.field == DOC and [s.field for s in then] in ([], [SHARD_DOC])):
        then_ascending = None if not then or first.field == SHARD_DOC else not then[0].descending
        return {
            id(v.segment): DocOrder(v.max_doc, first.descending, first.field == SHARD_DOC, then_ascending)
            for v in views
        }
    kinds = tuple(kind for kind, _ in plan.resolved)
    tiebreaker = None
    if len(specs) > 1 and specs[-1].field in (DOC, SHARD_DOC) and not specs[-1].descending:
        tiebreaker, specs, kinds = specs[-1], specs[:-1], kinds[:-1]
    field_types = tuple(None if special_kind(s) else target.mapping.field(s.field) for s in specs)
    types = tuple(_type_signature(ft) for ft in field_types)
    signature = (tuple(specs), kinds, types)
    index_sort = target.index.sort
    presorted = index_sort is not None and index_sort.covers(specs, field_types)
    found: dict[int, Order | None] = {}
    if tiebreaker is not None:  # its column over no documents, the same in every segment
        none = np.empty(0, np.int64)
        template = sort_column(tiebreaker, [target], [], none.astype(np.int32), none, None)
    cached = orders.get_many([(id(view.segment), signature) for view in views])
    for view, order in zip(views, cached, strict=True):
        if order is None:
            order = _segment_order(orders, target, view, signature, specs, presorted)
        if order is not None and tiebreaker is not None:
            order = order.with_doc_tiebreaker(template)
        found[id(view.segment)] = order
    return found


def _segment_order(
    orders: SegmentOrders,
    target: Target,
    view: SegmentView,
    signature: tuple,
    specs: list[SortSpec],
    presorted: bool,
) -> SegmentOrder | None:
    """A segment's order not in the cache: mapped from its file, or built (`SegmentOrders.order`)."""
    kinds, types = signature[1], signature[2]

    def columns(n: int) -> list[SortColumn]:
        docs = np.arange(n, dtype=np.int64)
        zeros = np.zeros(n, dtype=np.int32)
        seg_docs = [(0, view, docs)]
        return [sort_column(spec, [target], seg_docs, zeros, docs, None) for spec in specs]

    def file() -> OrderFile | None:
        name = _order_file_name(view.segment, specs, kinds, types)
        return None if name is None else OrderFile(name, lambda: columns(0))

    def build() -> SegmentOrder:
        return build_order(columns(view.max_doc), presorted=presorted)

    return orders.order(view.segment, signature, build, file)


def _order_file_name(segment: Segment, specs: list[SortSpec], kinds: tuple, types: tuple) -> str | None:
    """The name of the file an order of `segment` is kept in (order_files.py): a digest of what
    its content depends on, the fields named by their numbers in the segment. None: a field of
    the segment has no number (segments written before numbering keep their orders in memory)."""
    described: list[Any] = []
    for spec, kind, type_signature in zip(specs, kinds, types, strict=True):
        if spec.nested is not None:
            return None  # a column of the sort's own, not a field of the segment
        number = None
        if special_kind(spec) is None and spec.field in segment.field_meta:
            number = segment.field_meta[spec.field].get("number")
            if number is None:
                return None
        options = [spec.order, repr(spec.missing), spec.mode, spec.unmapped_type, spec.numeric_type]
        field_type = None if type_signature is None else list(type_signature)
        described.append([number, *options, spec.format, kind, field_type])
    return order_files.file_name(described)


def _type_signature(field_type: Any) -> Any:
    """What of a field's mapping a sort's keys depend on (its type and parameters: format,
    scaling factor, ...)."""
    if field_type is None:
        return None
    return field_type.type, repr(sorted(field_type.params.items()))


def _after_values(request: SearchRequest, target: Target, specs: list[SortSpec]) -> list[Any]:
    """The `search_after` values in each sort's domain, for one target's field types."""
    assert request.search_after is not None
    if len(request.search_after) != len(specs):
        raise IllegalArgument(
            f"search_after has {len(request.search_after)} value(s) but sort has {len(specs)}."
        )
    return [
        fetch.parse_search_after_value(
            raw, None if special_kind(spec) else target.mapping.field(spec.field), spec
        )
        for raw, spec in zip(request.search_after, specs, strict=True)
    ]


def _scored_after(
    docs: np.ndarray, scores: np.ndarray, score: float, spec: SortSpec
) -> tuple[np.ndarray, np.ndarray]:
    """The docs of a segment whose score comes strictly after a `search_after` cursor's
    (`score`, of a sort led by `spec`, `_score`), and those whose score equals it. O(len(docs)).

    Why ties apart: with `_score` alone they are skipped (as Elasticsearch's search_after skips
    them); with fields after `_score`, whether a tie comes after the cursor depends on those
    fields' keys, so a shard keeps every tie besides its best `k` beyond the cursor, and compares
    them all with the cursor once its candidates are sorted (one binary search), before its cut:
    its top k is then exact for any sort led by `_score`."""
    key = scores[docs]
    beyond = key < score if spec.descending else key > score
    return docs[beyond], docs[key == score]


def _best_scores(scores: np.ndarray, docs: np.ndarray, k: int, specs: list[SortSpec]) -> np.ndarray:
    """The docs (ascending) among `docs` with the `k` best scores for a sort led by `_score`.

    When nothing but `_score` orders the hits, ties at the cut go to the lowest docs, as the full
    sort would order them; when more sorts follow, every tie is kept for them to decide."""
    if len(docs) <= k:
        return docs
    key = scores[docs]
    if specs[0].descending:
        key = -key
    cut = np.partition(key, k - 1)[k - 1]
    better = key < cut
    ties = np.flatnonzero(key == cut)
    if len(specs) == 1:
        ties = ties[: k - int(np.count_nonzero(better))]
    better[ties] = True
    return docs[better]


def _first(hits: HitList, k: int) -> HitList:
    """The first `k` hits of a sorted HitList."""
    hits.target, hits.doc = hits.target[:k], hits.doc[:k]
    hits.score = hits.score[:k] if hits.score is not None else None
    hits.columns = [c.take(slice(0, k)) for c in hits.columns]
    hits.keys = [key[:k] for key in hits.keys]
    return hits
