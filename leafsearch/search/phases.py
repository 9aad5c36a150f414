"""The phases every search shares: targets and limits, the query phase, paging, fetch, response.

A search reads a fixed list of shard snapshots (the current ones, or those a PIT or scroll context
holds). A page is its top hits from the cursor (top_hits.py: each segment's sort order walked from
the `search_after` cursor, no sort of every match), which is how every page of a PIT or scroll
walk is found; the options top hits do not serve here (rescoring, `terminate_after`, pages past
10,000) read a HitList of every match in sort order, built once per (snapshots, query, sort,
slice) and cached, so every page of it is a slice or a binary search. Every document by
`_shard_doc` without counting (`track_total_hits: false`) needs neither: its pages are ranges of
the snapshots' live documents. The fetch phase touches only the page's documents.
Shard-level refusals are reported as Elasticsearch's coordinator reports them: a
`search_phase_execution_exception` of the phase that failed, the real reason as root cause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.rawjson import RawJSON
from leafsearch.common.settings import index_setting
from leafsearch.errors import ElasticError, IllegalArgument, SearchPhaseExecution, TaskCancelled
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.request.query_dsl import Ids, queries_within
from leafsearch.request.search_types import SHARD_DOC, SearchRequest
from leafsearch.search import fetch, nested_hits, top_hits
from leafsearch.search.collapse import check_collapse, decorate
from leafsearch.search.collapse_shards import collapsed_page
from leafsearch.search.fetch_phase import render_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import HitList, backwards_page, shard_doc_page
from leafsearch.search.join_inner_hits import decorate as decorate_joins
from leafsearch.search.join_inner_hits import join_inner_hits
from leafsearch.search.profile import ShardProfile
from leafsearch.search.query.context import check_ids_count
from leafsearch.search.rescore import rescore
from leafsearch.search.shard_api import FetchAlong, ShardContextId, ShardSearch
from leafsearch.search.slicing import check_slice_field, pit_slice_range
from leafsearch.search.sort_keys import missing_substitute
from leafsearch.search.suggest import suggest
from leafsearch.search.targets import Target, acquire_targets

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices, SearchServices

#: How many sort keys one search may have (a leafsearch limit: docs/differences.md).
MAX_SORT_KEYS = "search.max_sort_keys"


def resolve_targets(services: CoordinatorServices, request: SearchRequest) -> list[Target]:
    """The acquired current snapshots of the shards the request reads (callers release them)."""
    options = request.indices_options or IndicesOptions()
    return acquire_index_targets(services, request.indices, options, request.routing)


def acquire_index_targets(
    services: CoordinatorServices, index_expr: str | None, options: IndicesOptions, routing: str | None
) -> list[Target]:
    """The shard snapshots an expression reads; through an alias, with its filter and routing."""
    indices, scopes = services.reach(index_expr, options, routing)
    return acquire_targets(indices, scopes)


def check_limits(services: SearchServices, request: SearchRequest, targets: list[Target]) -> None:
    """How many sort keys and aggregations the request holds, and how deep the aggregations nest
    (before anything builds them or walks them recursively: a search worker is sent the request
    pickled), then index-level limits, checked per target index as Elasticsearch's shards do."""
    settings = services.cluster_settings
    sort_keys, max_sort_keys = len(request.sort), int(settings.get(MAX_SORT_KEYS))
    if sort_keys > max_sort_keys:
        raise IllegalArgument(
            f"Trying to sort by too many keys. Must be less than or equal to: [{max_sort_keys}] but was "
            f"[{sort_keys}]. This limit can be set by changing the [{MAX_SORT_KEYS}] cluster level setting."
        )
    if request.aggs is not None:
        from leafsearch.search.aggregations import MAX_AGGREGATIONS, MAX_NESTED_DEPTH, check_aggregations

        check_aggregations(
            request.aggs, int(settings.get(MAX_NESTED_DEPTH)), int(settings.get(MAX_AGGREGATIONS))
        )
    most_ids = max((len(q.values) for q in queries_within(request.query) if isinstance(q, Ids)), default=0)
    for target in {id(t.index): t for t in targets}.values():
        index = target.index
        _check_fetch_limits(request, index, target.mapping)
        window = int(index.setting("index.max_result_window"))
        # A shard builds the query before it checks the window (an `ids` query's own limit first).
        try:
            check_ids_count(most_ids, window, index.name, index.uuid)
        except ElasticError as exc:
            raise _phase_error(exc) from None
        if request.scroll is not None:
            if request.size > window:
                raise _phase_error(
                    IllegalArgument(
                        f"Batch size is too large, size must be less than or equal to: [{window}] but was "
                        f"[{request.size}]. Scroll batch sizes cost as much memory as result windows so "
                        "they are controlled by the [index.max_result_window] index level setting."
                    )
                )
        elif request.search_after is None and request.from_ + request.size > window:
            raise _result_window_error(window, request.from_ + request.size)
        elif request.search_after is not None and request.size > window:
            raise _result_window_error(window, request.size)
        if request.slice is not None:
            limit = int(index.setting("index.max_slices_per_scroll"))
            if request.slice.max > limit:
                raise _phase_error(
                    IllegalArgument(
                        f"The number of slices [{request.slice.max}] is too large. It must be less than "
                        f"[{limit}]. This limit can be set by changing the [index.max_slices_per_scroll] "
                        "index level setting."
                    )
                )
        if request.rescore:
            _check_rescore(request, index, window)
    try:
        check_collapse(request, targets)
        nested_hits.check(request, targets)
    except IllegalArgument as exc:
        raise _phase_error(exc) from None
    if request.slice is not None and request.slice.field is not None:
        try:
            check_slice_field(targets, request.slice, pit=request.pit is not None)
        except ElasticError as exc:
            raise _phase_error(exc) from None


def _check_fetch_limits(request: SearchRequest, index: Any, mapping: Any) -> None:
    """What a shard checks while parsing the request: how many docvalue fields (the mapped fields its
    patterns name) and script fields it asks for."""
    patterns = [spec["field"] for spec in request.docvalue_fields]
    docvalue_fields = {path for pattern in patterns for path in mapping.resolve_fields(pattern)}
    for count, what, key in (
        (len(docvalue_fields), "docvalue_fields", "index.max_docvalue_fields_search"),
        (len(request.script_fields), "script_fields", "index.max_script_fields"),
    ):
        limit = int(index.setting(key))
        if count > limit:
            raise _phase_error(
                IllegalArgument(
                    f"Trying to retrieve too many {what}. Must be less than or equal to: [{limit}] but was "
                    f"[{count}]. This limit can be set by changing the [{key}] index level setting."
                )
            )


def _check_rescore(request: SearchRequest, index: Any, result_window: int) -> None:
    """Rescoring reorders by score, so it refuses another sort; its window is bounded by
    `index.max_rescore_window`, which is `index.max_result_window` unless set."""
    if request.sort:
        raise _phase_error(IllegalArgument("Cannot use [sort] option in conjunction with [rescore]."))
    key = "index.max_rescore_window"
    limit = int(index.setting(key)) if key in index.settings else result_window
    for rescorer in request.rescore:
        if rescorer.window_size > limit:
            raise _phase_error(
                IllegalArgument(
                    f"Rescore window [{rescorer.window_size}] is too large. It must be less than [{limit}]. "
                    "This prevents allocating massive heaps for storing the results to be rescored. This "
                    f"limit can be set by changing the [{key}] index level setting."
                )
            )


def _result_window_error(window: int, requested: int) -> SearchPhaseExecution:
    return _phase_error(
        IllegalArgument(
            f"Result window is too large, from + size must be less than or equal to: [{window}] but was "
            f"[{requested}]. See the scroll api for a more efficient way to request large data sets. "
            "This limit can be set by changing the [index.max_result_window] index level setting."
        )
    )


def _phase_error(cause: ElasticError) -> SearchPhaseExecution:
    return SearchPhaseExecution(cause)


def _agg_collector(services: SearchServices, request: SearchRequest, targets: list[Target]):
    if request.aggs is None:
        return None, None
    from leafsearch.search.aggregations import MAX_BUCKETS, MAX_NESTED_DEPTH, collect, parse_aggs

    limits = {
        "now_millis": int(time.time() * 1000),
        "max_depth": int(services.cluster_settings.get(MAX_NESTED_DEPTH)),
        "max_buckets": int(services.cluster_settings.get(MAX_BUCKETS)),
    }
    trees = {}
    for t in targets:
        if t.index.uuid not in trees:
            window = index_setting(t.index.settings, "index.max_inner_result_window")
            trees[t.index.uuid] = parse_aggs(
                request.aggs, t.mapping, index=t.index.name, max_inner_result_window=window, **limits
            )
    if not trees:
        trees[None] = parse_aggs(request.aggs, None, **limits)

    def with_aggs(target: Target, view, docs: np.ndarray, ctx, scores: np.ndarray | None = None) -> Any:
        return collect(trees[target.index.uuid], view, docs, ctx, scores)

    return with_aggs, next(iter(trees.values()))


def query_phase(
    services: SearchServices,
    targets: list[Target],
    request: SearchRequest,
    *,
    aggs: bool,
    cancelled: threading.Event | None = None,
    shards: Sequence[ShardSearch] | None = None,
    contexts: Sequence[ShardContextId | None] | None = None,
    fetch: FetchAlong | None = None,
) -> tuple[HitList, Any]:
    """The matches of every target in sort order (or, for a plain `_shard_doc` walk, the page).

    `cancelled` is set when the client went away (see guard.py). A page served by top hits goes
    through the shard interface: `shards` (per target; default this process's) on `contexts`
    (the snapshots they pinned; default the targets'). Every page of a PIT is one (from its
    cursor, on the PIT's snapshots): no walk pays for a list of every match.
    `fetch`: the page's fetch to come (`top_hits.top_hits`)."""
    # Aggregation requests are parsed before the shards run: their errors are not shard failures.
    with_aggs, tree = _agg_collector(services, request, targets) if aggs else (None, None)
    # Shard actors' snapshots are reached only through the shard interface: every page of
    # theirs is top hits on their contexts (no HitList, no walk of live documents), rescoring,
    # `terminate_after` and deep pages included, each done by the shards as Elasticsearch's do.
    remote = any(t.remote for t in targets)
    with services.search_stats.phase("query", targets):
        try:
            if request.collapse is not None:
                hitlist = collapsed_page(
                    services,
                    targets,
                    request,
                    now_millis=int(time.time() * 1000),
                    aggs=with_aggs is not None,
                    shards=shards or top_hits.shard_handles(services, targets, cancelled),
                    contexts=contexts,
                )
            elif reads_live_docs(request, targets):
                hitlist = _live_docs_page(targets, request)
            elif remote or top_hits.serves(request):
                now = int(time.time() * 1000)
                hitlist = top_hits.top_hits(
                    services,
                    targets,
                    request,
                    now_millis=now,
                    aggs=with_aggs is not None,
                    shards=shards or top_hits.shard_handles(services, targets, cancelled),
                    contexts=contexts,
                    fetch=fetch,
                )
            else:
                guard = SearchGuard.for_search(services, request, cancelled)
                hitlist = services.hitlists.get_or_build(targets, request, with_aggs=with_aggs, guard=guard)
                if request.rescore:
                    hitlist = rescore(hitlist, request, int(time.time() * 1000))
        except (SearchPhaseExecution, TaskCancelled):
            raise
        except ElasticError as exc:
            if exc.status == 400 and exc.error_type not in ("parsing_exception", "x_content_parse_exception"):
                raise _phase_error(exc) from None
            raise
    return hitlist, tree


def reads_live_docs(request: SearchRequest, targets: list[Target]) -> bool:
    """Whether the request walks every document in `_shard_doc` order without counting them, over
    shards of this process read whole (no alias filter).

    That walk (SPEC 4.1 r12, the fastest full export) needs no query, no sort and no match list:
    its pages are ranges of the snapshots' live documents, located by binary search.
    """
    sliced = request.slice
    return (
        not any(t.remote or t.alias_filter for t in targets)
        and request.track_total_hits is False
        and request.plain_walk(SHARD_DOC)
        and (sliced is None or (request.pit is not None and sliced.field is None))
        and (request.search_after is None or len(request.search_after) == 1)
    )


def _live_docs_page(targets: list[Target], request: SearchRequest) -> HitList:
    spec = request.sort[0]
    after = None
    if request.search_after is not None:
        try:
            after = fetch.parse_search_after_value(request.search_after[0], None, spec)
        except ElasticError as exc:
            raise _phase_error(exc) from None
        if after is None:  # `null` means what it means in the match-list walk: past the end
            after = missing_substitute(spec, None)
    window = None
    if request.slice is not None:
        total = sum(t.searcher.live_count for t in targets)
        window = pit_slice_range(request.slice, total)
    return shard_doc_page(targets, spec, after, request.from_, request.size, window)


def page_bounds(hitlist: HitList, request: SearchRequest) -> tuple[int, int]:
    """The page's positions in the hit list: an offset, or a binary search for `search_after`."""
    if hitlist.window:
        return 0, len(hitlist)
    if request.search_after is not None:
        start = hitlist.position_after(_after_keys(hitlist, request))
    else:
        start = request.from_
    return start, min(start + request.size, len(hitlist))


def _after_keys(hitlist: HitList, request: SearchRequest) -> list[Any]:
    assert request.search_after is not None
    if len(request.search_after) != len(hitlist.columns):
        raise _phase_error(
            IllegalArgument(
                f"search_after has {len(request.search_after)} value(s) but sort has {len(hitlist.columns)}."
            )
        )
    keys: list[Any] = []
    for col, raw in zip(hitlist.columns, request.search_after, strict=True):
        ft = next((f for f in col.field_types if f is not None), None)
        try:
            value = fetch.parse_search_after_value(raw, ft, col.spec)
        except ElasticError as exc:
            raise _phase_error(exc) from None
        keys.extend(col.after_key(value))
    return keys


def _total(hitlist: HitList, request: SearchRequest) -> Any:
    track = request.track_total_hits
    if request.rest_total_hits_as_int:
        return hitlist.total if track is not False else -1
    if track is False:
        return None
    if track is True or hitlist.total <= track:
        return {"value": hitlist.total, "relation": "eq"}
    return {"value": int(track), "relation": "gte"}


def response(
    services: SearchServices,
    hitlist: HitList,
    request: SearchRequest,
    start: int,
    end: int,
    started: float,
    *,
    agg_tree: Any,
    extra: dict[str, Any],
    raw_hits: bool = False,
    ready: RawJSON | list[Any] | None = None,
    shards: Sequence[ShardSearch] | None = None,
    last_phase: bool = False,
) -> dict[str, Any]:
    """The search response; `ready` is the page's hits when they were already rendered (read
    ahead); `shards` fetch them (per target; default this process's); `last_phase`: the fetch is
    the search's last read of its snapshots (a one-shot search)."""
    profiles = None
    if request.profile:
        profiles = hitlist.profiles or [ShardProfile() for _ in hitlist.targets]
    with services.search_stats.phase("fetch", hitlist.targets):
        try:
            if ready is not None and profiles is None:
                hits: Any = ready
            else:
                hits = fetch_page(
                    services,
                    hitlist,
                    start,
                    end,
                    request,
                    raw_hits=raw_hits,
                    profiles=profiles,
                    shards=shards,
                    # (inner hits read the page's snapshots after its fetch)
                    last_phase=last_phase and (request.collapse is None or not request.collapse.inner_hits),
                )
            if request.collapse is not None:
                hits = decorate(services, hitlist, start, end, request, hits)
            if join_inner_hits(request.query):
                hits = decorate_joins(services, hitlist, request, hits)
        except SearchPhaseExecution:
            raise
        except ElasticError as exc:
            raise SearchPhaseExecution(exc, phase="fetch") from None
    # A size 0 search collects no top hits, so it has no max score (Lucene's NaN, rendered null).
    sorted_by_field = bool(request.sort) and request.sort[0].field != "_score"
    scored = request.size > 0 and (not sorted_by_field or request.track_scores)
    max_score = hitlist.max_score if scored else None
    if max_score is not None:
        max_score = fetch._short_float(max_score, "float")
    hits_obj: dict[str, Any] = {}
    total = _total(hitlist, request)
    if total is not None:
        hits_obj["total"] = total
    hits_obj["max_score"] = max_score
    hits_obj["hits"] = hits
    body: dict[str, Any] = {}
    body.update({k: v for k, v in extra.items() if k in ("_scroll_id", "pit_id")})
    body["took"] = int((time.perf_counter() - started) * 1000)
    body["timed_out"] = hitlist.timed_out
    if hitlist.terminated_early:
        body["terminated_early"] = True
    body["_shards"] = shards_header(services, hitlist)
    body["hits"] = hits_obj
    if agg_tree is not None:
        from leafsearch.search.aggregations import MAX_BUCKETS, reduce

        limit = int(services.cluster_settings.get(MAX_BUCKETS))
        body["aggregations"] = reduce(agg_tree, hitlist.agg_partials, max_buckets=limit)
        if request.typed_keys:
            body["aggregations"] = _typed_keys(body["aggregations"], agg_tree)
    if request.suggest:
        handles = shards or top_hits.shard_handles(services, hitlist.targets)
        body["suggest"] = suggest(services.shard_pool, handles, request, hitlist.targets)
    if profiles is not None:
        body["profile"] = {
            "shards": [
                profile.render(services.node_id, target.index.name, target.shard_id)
                for profile, target in zip(profiles, hitlist.targets, strict=True)
            ]
        }
    return body


def shards_header(services: SearchServices, hitlist: HitList) -> dict[str, Any]:
    """A response's `_shards`: the shards read, and those that failed alone with why."""
    n, failed = len(hitlist.targets), len(hitlist.failures)
    header: dict[str, Any] = {"total": n, "successful": n - failed, "skipped": 0, "failed": failed}
    if failed:
        header["failures"] = [f.failure(services.node_id) for f in hitlist.failures]
    return header


def fetch_page(
    services: SearchServices,
    hitlist: HitList,
    start: int,
    end: int,
    request: SearchRequest,
    *,
    raw_hits: bool = False,
    profiles: list[ShardProfile] | None = None,
    shards: Sequence[ShardSearch] | None = None,
    last_phase: bool = False,
) -> Any:
    """The fetch phase of hits [start, end) through `shards` (per target; default this process's),
    at once on the node's shard pool (`profiles`: per target, each shard's fetch time;
    `last_phase`: see `render_hits`). A `search_before` page is rendered reversed."""
    shards = shards or top_hits.shard_handles(services, hitlist.targets)
    if request.backwards and end > start:
        hitlist, start, end = backwards_page(hitlist, start, end)
    return render_hits(
        hitlist,
        start,
        end,
        request,
        shards=shards,
        pool=services.shard_pool,
        raw_hits=raw_hits,
        profiles=profiles,
        last_phase=last_phase,
    )


def _typed_keys(aggs: dict, tree: Any) -> dict:
    from leafsearch.search.aggregations import typed_keys

    return typed_keys(aggs, tree)
