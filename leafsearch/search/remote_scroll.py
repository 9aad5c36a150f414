"""Scrolls over shards reached only through the shard interface (shard actors, ray_backend/).

A local scroll pages a list of every match over all its shards (a HitList, or the live documents
in `_doc` order), which cannot be built across processes. Over shard actors, a scroll is instead
a `search_after` walk on the contexts its shards pinned when it opened: each batch is a top-hits
page (top_hits.py) sorted by the scroll's sort then `_shard_doc`, which makes the order total,
and the scroll's cursor, kept in its context, is the last hit's sort values. So every batch costs
what the first costs, whatever its depth, each document of the pinned snapshots comes exactly
once, and a sliced scroll's slices are read in parallel on the machines holding the shards.
A scroll sorted by `_score` (alone, or then fields, or then `_doc`) is walked the same way, by
its sort then `_shard_doc`: its contexts pin the snapshots, so every batch scores every document
as the first did, and the cursor (score, the fields' values, `_shard_doc`) is exact among equal
scores: each shard compares its candidates tied with the cursor's score on the following keys
before its top-k cut (top_hits.LocalShard).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

from leafsearch.request.search_types import DOC, SHARD_DOC, SearchRequest, SortSpec
from leafsearch.search import phases, query_and_fetch
from leafsearch.search.fetch_phase import last_sort_values
from leafsearch.search.hitlist import effective_sort

if TYPE_CHECKING:
    from leafsearch.search.contexts import ReaderContext
    from leafsearch.search.services import CoordinatorServices


def walk_request(request: SearchRequest, cursor: list[Any] | None) -> tuple[SearchRequest, int]:
    """The top-hits request of the batch after `cursor`, and how many of its sorts the scroll's
    own are (the rest is the `_shard_doc` tiebreaker, not shown)."""
    specs = list(effective_sort(request))
    shown = len(specs)
    if specs[-1].field == DOC:  # (shard, doc) is `_shard_doc`'s order
        specs[-1] = SortSpec(SHARD_DOC, specs[-1].order)
    elif specs[-1].field != SHARD_DOC:
        specs.append(SortSpec(SHARD_DOC, "asc"))
    walk = dataclasses.replace(request, sort=specs, search_after=cursor, from_=0, scroll=None)
    return walk, shown


def batch(
    services: CoordinatorServices,
    ctx: ReaderContext,
    started: float,
    raw_hits: bool,
    cancelled: threading.Event | None,
    *,
    opening: bool,
) -> dict[str, Any]:
    """The scroll's next batch on its shard contexts (caller holds `ctx.lock`); its cursor moves
    past it. An exhausted scroll answers empty batches."""
    request = ctx.request
    walk, shown = walk_request(request, ctx.cursor)
    fetch = query_and_fetch.along(request, raw_hits, last_phase=False, query=walk, shown=shown)
    hitlist, tree = phases.query_phase(
        services,
        ctx.targets,
        walk,
        aggs=opening,
        cancelled=cancelled,
        contexts=ctx.shard_contexts,
        fetch=fetch,
    )
    start, _ = phases.page_bounds(hitlist, walk)  # (a segment without a sort order gave it all)
    end = min(len(hitlist), start + request.size)
    if end > start:
        ctx.cursor = last_sort_values(hitlist, end)
    if len(hitlist.columns) > shown:  # the tiebreaker is the walk's, not the client's
        hitlist.columns = hitlist.columns[:shown]
    return phases.response(
        services,
        hitlist,
        request,
        start,
        end,
        started,
        agg_tree=tree,
        extra={"_scroll_id": ctx.public_id},
        raw_hits=raw_hits,
    )
