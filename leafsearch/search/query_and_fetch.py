"""The query and fetch of a search that asks one shard, in one call (Elasticsearch's
QUERY_AND_FETCH, which its coordinator runs when a search reaches a single shard).

A search of shard actors otherwise costs a query call, then a fetch call to each shard holding
hits of the page: two round trips where one would do when a single shard is asked (an index of
one shard, a routed search, a PIT slice the slice rule gives to one shard, a `_shard_doc` walk
whose cursor leaves one shard), and each call costs the coordinator about 0.9 ms of CPU. So the
coordinator (`top_hits.top_hits`, told by its caller which fetch will follow: `along`) adds a
`FetchAlong` to that one shard's `ShardQuery`, and the shard (`run`) answers its top hits with
the page already fetched (`ShardTopDocs.page`), which the coordinator's fetch phase takes
instead of sending a fetch (`fetch_phase.fetched_with_query`).

Why the answer is the two-call path's, byte for byte: the shard builds the coordinator's hit
list from its own answer alone by the coordinator's functions (`merge_top_docs`, with the field
types of the coordinator's mappings, which render the sort values), finds the page in it by
`page_bounds`, and builds the fetch by `page_fetches`, the very message the coordinator would
send (with the request the page renders with, and only the sort columns it shows: a scroll's
batch); the coordinator takes the page only if its fetch is that one (same request, range, form,
phase), and sends its fetch otherwise. A fetch error the shard meets travels in the answer and
is raised where the coordinator's fetch would raise it (a fetch-phase failure); a failed query
fails the call as before. The snapshot: a PIT page reads its context; a one-shot search's query
pins the shard's current snapshot, fetches from it and frees it as it answers (what the fetch
of the search's last phase did), so no release follows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from leafsearch.errors import ElasticError
from leafsearch.request.search_types import SearchRequest
from leafsearch.search.fetch_phase import fetch_shard, last_sort_values, page_fetches, renders_raw
from leafsearch.search.hitlist import backwards_page, sort_hits
from leafsearch.search.phases import page_bounds
from leafsearch.search.shard_api import FetchAlong, FetchedPage, ShardQuery, ShardTopDocs, merge_columns
from leafsearch.search.top_hits import LocalShard, merge_top_docs


def along(
    request: SearchRequest,
    raw_hits: bool,
    *,
    last_phase: bool,
    query: SearchRequest | None = None,
    shown: int | None = None,
) -> FetchAlong:
    """The fetch that follows a page's query phase in `phases.response` (`raw_hits`, the REST
    layer's bytes; `last_phase`, a one-shot search's), for a shard asked alone to run with it.
    `query`: the request the query phase runs when it is not `request`, and `shown`, how many of
    its sorts the page shows (a scroll's batch: walks.walk_request)."""
    raw = raw_hits and renders_raw(request) and not request.profile
    return FetchAlong(raw, last_phase, None if query is None else request, shown)


def run(shard: LocalShard, query: ShardQuery) -> ShardTopDocs:
    """The shard's query phase, and with it the fetch of the page (when `query.fetch`) on the
    same snapshot (`query.context`, which names it). O(the query) + O(k log k) for the hit list
    + the page's own fetch."""
    return run_to_cursor(shard, query, cursor=False)[0]


def run_to_cursor(
    shard: LocalShard, query: ShardQuery, cursor: bool = True
) -> tuple[ShardTopDocs, list[Any] | None]:
    """As `run`, and with `cursor` the sort values of the page's last hit as a client sends
    them back (`search_after` of a walk's next page; None: the page has no hit)."""
    top = shard.query(query)
    along = query.fetch
    if along is None:
        return top, None
    request = query.request
    target = shard.target if query.context is None else shard.pins().get(query.context)
    hits = merge_top_docs([target] * along.targets, request, query.sort, [top])
    hits.columns = [replace(c, field_types=t) for c, t in zip(hits.columns, along.field_types, strict=True)]
    # (candidates: every hit the shard answers, each its own bytes)
    start, end = (0, len(hits)) if along.candidates else page_bounds(hits, request)
    if end <= start:  # (the coordinator fetches nothing either)
        top.page = FetchedPage(start, end, "page", None)
        return top, None
    if along.shown is not None:
        hits.columns = hits.columns[: along.shown]
    following = last_sort_values(hits, end) if cursor else None
    rendered = request if along.request is None else along.request
    if rendered.backwards:  # as `phases.fetch_page` renders it
        hits, start, end = backwards_page(hits, start, end)
    _, (fetch,) = page_fetches(hits, start, end, rendered, raw=along.raw, last_phase=along.last_phase)
    fetch = replace(fetch, context=query.context, form="hits" if along.candidates else fetch.form)
    try:
        top.page = FetchedPage(start, end, fetch.form, fetch_shard(target, fetch))
    except ElasticError as exc:
        top.page = FetchedPage(start, end, fetch.form, None, exc)
    return top, following


def machine_candidates(answered: list[tuple[ShardQuery, ShardTopDocs]]) -> None:
    """The candidates of a machine's shards of one search (`FetchAlong.candidates`: each shard's
    best `from + size` hits, rendered) cut, in place, to those among the best `from + size` of
    them all, in the order the coordinator merges them (its `sort_hits` over the shards' hits
    gathered in shard order, ties kept in that order): a hit not among its machine's best is
    among no page's, so the coordinator's merge and page are the same, from fewer hits (bench/
    RESULTS.md, "W6's answers: fewer hits, cheaper pickles (session 20, `ray6`)"). What a shard
    keeps is the first hits of its answer (its own sort order); answers not all such candidates
    (a failed fetch among them) are left as they are. O(the hits)."""
    if len(answered) < 2:
        return
    request, plan = answered[0][0].request, answered[0][0].sort
    k = request.from_ + request.size
    tops = [top for _, top in answered]
    for query, top in answered:
        page = top.page
        if (
            query.request is not request
            or query.fetch is None
            or not query.fetch.candidates
            or query.collapse is not None
            or page is None
            or page.error is not None
            or page.result is None
            or page.result.hits is None
            or (page.start, page.end, len(page.result.hits)) != (0, len(top.docs), len(top.docs))
        ):
            return
    if sum(len(top.docs) for top in tops) <= k:
        return
    columns = [
        merge_columns(spec, kind, [top.columns[i] for top in tops], ())
        for i, (spec, (kind, _)) in enumerate(zip(plan.specs, plan.resolved, strict=True))
    ]
    owner = np.concatenate([np.full(len(top.docs), j, np.int32) for j, top in enumerate(tops)])
    position = np.concatenate([np.arange(len(top.docs), dtype=np.int64) for top in tops])
    owner, position, _, _, _ = sort_hits(columns, owner, position, None)
    owner, position = owner[:k], position[:k]
    kept = np.bincount(owner, minlength=len(tops))
    # (each shard's kept hits are the first of its answer; checked: its order is the merge's)
    firsts = np.concatenate([np.arange(n) for n in kept])
    if not np.array_equal(position[np.lexsort((position, owner))], firsts):
        return
    for top, n in zip(tops, kept.tolist(), strict=True):
        _keep_first(top, n)


def _keep_first(top: ShardTopDocs, n: int) -> None:
    """A shard's candidates cut to their first `n` (`machine_candidates`)."""
    if n == len(top.docs):
        return
    first = slice(0, n)
    top.docs = top.docs[first]
    top.scores = None if top.scores is None else top.scores[first]
    top.columns = [column.take(first) for column in top.columns]
    page = top.page
    assert page is not None and page.result is not None and page.result.hits is not None
    page.end = n
    page.result.hits = page.result.hits[first]
