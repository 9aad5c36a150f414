"""Field collapsing: one hit per value of a field, its best by the sort, with any sort.

Elasticsearch collapses each shard's top hits and merges them, so it can page a collapsed search
only by offset, and with `search_after` only when sorted by the collapse field alone (its
#53115). Here each shard collapses the list of every match of its snapshot in sort order
(hitlist.py): a key's best hit on the shard is its first in that list, so the shard's collapsed
list is the first hit of each key, in the same order, kept in the HitList cache like any list
(keyed with the collapse field). The coordinator merges the shards' lists by key, page by page
after the cursor (collapse_shards.py), so on a PIT each key appears exactly once over a walk,
offset or `search_after`, whatever is written meanwhile. Without a PIT each page reads the
current snapshot, as `search_after` does.

`inner_hits` are Elasticsearch's expand phase: for each collapsed hit of the page, a search of the
same snapshots for the request's query and that key (or, for the group without a value, the
documents without one), with the inner hits' own `from`, `size`, `sort` and `_source`; the
page's searches go to the shards together (a query round, then a fetch round).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.errors import IllegalArgument, ShardFailed
from leafsearch.request.query_dsl import Bool, Exists, Term
from leafsearch.request.search_types import SCORE, CollapseSpec, InnerHitsSpec, SearchRequest, SortSpec
from leafsearch.search.fetch import format_sort_value
from leafsearch.search.shard_api import ShardQuery, each_phase

if TYPE_CHECKING:
    from leafsearch.index.searcher import SegmentView
    from leafsearch.search.hitlist import HitList
    from leafsearch.search.services import SearchServices
    from leafsearch.search.shard_api import ShardContextId
    from leafsearch.search.sort_keys import GlobalOrdinals
    from leafsearch.search.targets import Target

#: Field types a search collapses on: keywords and numbers (Elasticsearch's KEYWORD and NUMERIC
#: collapse types).
COLLAPSIBLE = (
    "keyword",
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "half_float",
    "scaled_float",
    "unsigned_long",
)
MAX_INNER_RESULT_WINDOW = "index.max_inner_result_window"


def check_collapse(request: SearchRequest, targets: list[Target]) -> None:
    """What each shard checks of `collapse` before it runs: the field's type and doc values in
    every index, the inner hits' windows."""
    collapse = request.collapse
    if collapse is None:
        return
    for target in {id(t.index): t for t in targets}.values():
        ft = target.mapping.field(collapse.field)
        if ft is None:
            raise IllegalArgument(f"no mapping found for `{collapse.field}` in order to collapse on")
        if ft.type not in COLLAPSIBLE:
            raise IllegalArgument(
                f"collapse is not supported for the field [{ft.path}] of the type [{ft.type}]"
            )
        if not ft.doc_values:
            raise IllegalArgument(f"cannot collapse on field `{collapse.field}` without `doc_values`")
        for inner in collapse.inner_hits:
            check_inner_window(target, inner)


def check_inner_window(target: Target, inner: InnerHitsSpec) -> None:
    """An inner hits' `from + size` within the index's `index.max_inner_result_window`."""
    limit = int(target.index.setting(MAX_INNER_RESULT_WINDOW))
    if inner.from_ + inner.size > limit:
        raise IllegalArgument(
            "Inner result window is too large, the inner hit definition's "
            f"[{inner.name}]'s from + size must be less than or equal to: [{limit}] but was "
            f"[{inner.from_ + inner.size}]. This limit can be set by changing the "
            f"[{MAX_INNER_RESULT_WINDOW}] index level setting."
        )


def collapsed(
    hitlist: HitList,
    collapse: CollapseSpec,
    seg_docs: list[tuple[int, SegmentView, np.ndarray]],
    target_arr: np.ndarray,
    doc_arr: np.ndarray,
    ordinals: GlobalOrdinals | None,
) -> HitList:
    """The first hit of each collapse key of a sorted `hitlist`, in its order, with the key of
    each (`HitList.collapse`). `seg_docs`, `target_arr`, `doc_arr`: the matches as gathered (in
    (shard, doc) order), which the list sorted. Refuses a field with several values in a
    matching document, as Elasticsearch does. O(matches log matches), vectorized."""
    from leafsearch.search.hitlist import sort_column

    _check_single_valued(collapse.field, seg_docs)
    spec = SortSpec(collapse.field, "asc")
    column = sort_column(spec, hitlist.targets, seg_docs, target_arr, doc_arr, None, ordinals=ordinals)
    # Where each sorted hit was gathered: (shard, doc) pairs are unique and gathered ascending.
    gathered = (target_arr.astype(np.int64) << 40) | doc_arr
    position = np.searchsorted(gathered, (hitlist.target.astype(np.int64) << 40) | hitlist.doc)
    values = column.values[position]
    present = np.ones(len(values), bool) if column.present is None else column.present[position]
    first = np.zeros(len(values), bool)
    with_value = np.flatnonzero(present)
    if column.kind == "keyword" and column.terms is not None:
        # Global ordinals are a bounded range: the first position of each, without a sort (a
        # `minimum.at` over 1M hits took 15 ms where `np.unique` took 676).
        firsts = np.full(len(column.terms), len(with_value), np.int64)
        np.minimum.at(firsts, values[with_value], np.arange(len(with_value)))
        firsts = firsts[firsts < len(with_value)]
    else:
        _, firsts = np.unique(values[with_value], return_index=True)
    first[with_value[firsts]] = True
    without = np.flatnonzero(~present)
    if len(without):
        first[without[0]] = True
    keep = np.flatnonzero(first)
    columns = [c.take(keep) for c in hitlist.columns]
    key_column = column.take(position[keep])
    kept_present = np.ones(len(keep), bool) if key_column.present is None else key_column.present
    with_key = np.flatnonzero(kept_present)
    return dataclasses.replace(
        hitlist,
        target=hitlist.target[keep],
        doc=hitlist.doc[keep],
        score=None if hitlist.score is None else hitlist.score[keep],
        columns=columns,
        # Built again from the kept columns: a keyword column whose documents without a value
        # all went (their key's first hit had one) loses its missing flag, and a cursor's key
        # (`SortColumn.after_key`) has the columns' own shape.
        keys=[key for c in columns for key in c.key_columns()],
        collapse=key_column,
        collapse_index=with_key[np.argsort(key_column.values[with_key], kind="stable")],
    )


def _check_single_valued(field: str, seg_docs: list[tuple[int, SegmentView, np.ndarray]]) -> None:
    for _, view, docs in seg_docs:
        col = view.segment.column(field)
        values = getattr(col, "doc_values", None) or getattr(col, "ords", None)
        if values is None or values.is_single:
            continue
        several = np.flatnonzero(values.counts[docs] > 1)
        if len(several):
            doc = int(docs[several[0]]) + view.doc_base
            raise IllegalArgument(f"failed to collapse {doc}, the collapse field must be single valued")


def key_values(hitlist: HitList, start: int, end: int) -> list[Any]:
    """The collapse keys of hits [start, end) as Elasticsearch renders them in a hit's `fields`
    (None: the group of documents without a value)."""
    column = hitlist.collapse
    assert column is not None
    field_type = next((ft for ft in column.field_types if ft is not None), None)
    out: list[Any] = []
    for row in range(start, end):
        if column.present is not None and not column.present[row]:
            out.append(None)
        elif column.kind == "keyword":
            assert column.terms is not None
            out.append(column.terms[int(column.values[row])].decode())
        else:
            out.append(format_sort_value(column.values[row].item(), field_type, column.spec))
    return out


def decorate(
    services: SearchServices,
    hitlist: HitList,
    start: int,
    end: int,
    request: SearchRequest,
    hits: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The page's hits with their collapse key in `fields` and, when asked, their `inner_hits`
    (per definition, one search per hit, all sent at once, on the page's snapshots), keys in
    Elasticsearch's order."""
    collapse = request.collapse
    assert collapse is not None
    keys = key_values(hitlist, start, end)
    inner = {spec.name: _inner_hits(services, hitlist, request, spec, keys) for spec in collapse.inner_hits}
    out = []
    for row, (hit, key) in enumerate(zip(hits, keys, strict=True)):
        shown: dict[str, Any] = {}
        for name, value in hit.items():
            if name in ("sort", "_explanation") and "fields" not in shown:
                shown["fields"] = {collapse.field: [key]}
            if name == "fields":
                value = {**value, collapse.field: [key]}
            shown[name] = value
        shown.setdefault("fields", {collapse.field: [key]})
        if inner:
            shown["inner_hits"] = {
                **hit.get("inner_hits", {}),  # a nested query's, from the shard's fetch
                **{name: found[row] for name, found in inner.items()},
            }
        out.append(shown)
    return out


def _inner_hits(
    services: SearchServices, hitlist: HitList, request: SearchRequest, inner: InnerHitsSpec, keys: list[Any]
) -> list[dict[str, Any]]:
    """Each key's group's `inner_hits` of one definition."""
    field = request.collapse.field  # type: ignore[union-attr]
    asked = []
    for key in keys:
        group = (Term(field, key),) if key is not None else ()
        without = (Exists(field),) if key is None else ()
        asked.append(
            inner_request(request, inner, Bool(must=(request.query,), filter=group, must_not=without))
        )
    return inner_hits_searches(services, hitlist.targets, asked, hitlist.contexts)


def inner_request(request: SearchRequest, inner: InnerHitsSpec, query: Any) -> SearchRequest:
    """The search of one hit's `inner_hits`: `query` with the inner hits' own `from`, `size`,
    `sort` and `_source`."""
    sort = list(inner.sort)
    if len(sort) == 1 and sort[0].field == SCORE and sort[0].descending:
        sort = []
    return dataclasses.replace(
        request,
        query=query,
        from_=inner.from_,
        size=inner.size,
        sort=sort,
        search_after=None,
        collapse=None,
        aggs=None,
        slice=None,
        track_total_hits=True,
        profile=False,
        source=inner.source,
        version=inner.version,
        seq_no_primary_term=inner.seq_no_primary_term,
        explain=inner.explain,
        track_scores=inner.track_scores,
        fields=[],
        docvalue_fields=[],
    )


def inner_hits_search(
    services: SearchServices,
    targets: list[Target],
    request: SearchRequest,
    inner: InnerHitsSpec,
    query: Any,
    contexts: list[ShardContextId | None] | None = None,
) -> dict[str, Any]:
    """One hit's `inner_hits`: `query` searched on `targets` (the page's snapshots; `contexts`:
    the shard contexts pinning them, a PIT's) with the inner hits' own `from`, `size`, `sort`
    and `_source`, every shard asked; `{"hits": ...}` as Elasticsearch shows it."""
    return inner_hits_searches(services, targets, [inner_request(request, inner, query)], contexts)[0]


def inner_hits_searches(
    services: SearchServices,
    targets: list[Target],
    requests: list[SearchRequest],
    contexts: list[ShardContextId | None] | None = None,
) -> list[dict[str, Any]]:
    """`inner_request` searches of one sort on `targets`, each `{"hits": ...}`: every shard's
    query of every search sent at once, then every fetch at once (as Elasticsearch's expand
    phase sends one multi-search), so a page's inner hits cost two calls per shard and search
    but two round trips in all. Under DFS one search at a time (each its DFS phase first)."""
    from leafsearch.search import phases, top_hits  # (phases renders collapsed pages with `decorate`)
    from leafsearch.search.fetch_phase import page_fetches, spliced

    if not requests:
        return []
    if requests[0].dfs:
        out = []
        for asked in requests:
            found, _ = phases.query_phase(services, targets, asked, aggs=False, contexts=contexts)
            first, last = phases.page_bounds(found, asked)
            body = phases.response(
                services, found, asked, first, last, time.perf_counter(), agg_tree=None, extra={}
            )
            out.append({"hits": body["hits"]})
        return out
    n = len(targets)
    pins = list(contexts) if contexts is not None else [None] * n
    shards = top_hits.shard_handles(services, targets)
    now = int(time.time() * 1000)
    plan = top_hits.sort_plan(requests[0], targets)
    queries = [ShardQuery(r, i, now, plan, False, None, pins[i], n) for r in requests for i in range(n)]
    answers = each_phase(services.shard_pool, shards, "query", queries, catch=(ShardFailed,))
    pages = []
    for k, asked in enumerate(requests):
        failures: list[ShardFailed] = []
        found = top_hits._survivors(services, asked, answers[k * n : (k + 1) * n], failures, n)
        hits = top_hits.merge_top_docs(targets, asked, plan, found)
        hits.failures = failures
        if contexts is not None:
            hits.contexts = pins
        first, last = phases.page_bounds(hits, asked)
        parts, fetches = (
            page_fetches(hits, first, last, asked, raw=False, last_phase=False) if last > first else ([], [])
        )
        pages.append((asked, hits, first, last, parts, fetches))
    fetched = each_phase(services.shard_pool, shards, "fetch", [f for *_, fetches in pages for f in fetches])
    out = []
    for asked, hits, first, last, parts, fetches in pages:
        results, fetched = fetched[: len(fetches)], fetched[len(fetches) :]
        ready = spliced(parts, results, last - first, fetches[0].form) if fetches else []
        body = phases.response(
            services, hits, asked, first, last, time.perf_counter(), agg_tree=None, extra={}, ready=ready
        )
        out.append({"hits": body["hits"]})
    return out
