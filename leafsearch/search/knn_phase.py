"""A search's top-level `knn`: its `k` nearest over all the shards searched, as Elasticsearch's
DFS phase finds them before the query phase.

Each top-level `knn` is first searched alone (the same indices, or the same PIT, so the same
snapshots), `k` hits by score; the request then goes on with that `knn` replaced by its hits
(`KnnHits`), which each shard scores by `_id`. A `knn` query inside `query` is per shard, as in
Elasticsearch, and is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from leafsearch.request.query_dsl import Knn, KnnHits, Query, queries_within, replace_queries
from leafsearch.request.search_types import SearchRequest, SourceFilter

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices

Search = Callable[["CoordinatorServices", SearchRequest], dict[str, Any]]


def resolve_knn(services: CoordinatorServices, request: SearchRequest, search: Search) -> SearchRequest:
    """`request` with each top-level `knn` replaced by its global hits; itself when it has none."""
    if not any(isinstance(q, Knn) and q.top_level for q in queries_within(request.query)):
        return request

    def resolve(node: Query) -> Query | None:
        if not isinstance(node, Knn) or not node.top_level:
            return None
        alone = SearchRequest(
            query=replace(node, top_level=False, boost=1.0),
            indices=request.indices,
            indices_options=request.indices_options,
            size=node.k,
            pit=request.pit,
            routing=request.routing,
            source=SourceFilter(fetch=False),
            track_total_hits=False,
            timeout=request.timeout,
            allow_partial_search_results=request.allow_partial_search_results,
            request_cache=False,
        )
        hits = search(services, alone)["hits"]["hits"]
        return KnnHits(
            node.field, tuple((h["_index"], h["_id"], float(h["_score"])) for h in hits), node.boost
        )

    return replace(request, query=replace_queries(request.query, resolve))
