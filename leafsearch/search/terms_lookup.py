"""Terms lookup: a `terms` query whose values are read from a document (`{"terms": {"user":
{"index": "users", "id": "2", "path": "followers"}}}`).

As Elasticsearch's TermsQueryBuilder rewrites it on the coordinating node, the document is read
once per request, before any shard searches (a realtime get: its unrefreshed last write counts),
and the lookup becomes a plain `terms` query of the values at `path` (dotted, through objects and
arrays; nulls and objects skipped). A missing document gives no values (nothing matches); a
missing index is the get's 404. The values then meet the searched index's
`index.max_terms_count` like any `terms` query's.

A `percolate` query naming an indexed document (`index`, `id`, `routing`, `version`) is resolved
here the same way, into the `percolate` of its source (a missing document is Elasticsearch's 404).

Security: the document is read as the caller: without `read` on the lookup index (or alias, by its
own name) the search is refused with the get action's 403, as Elasticsearch authorizes the get it
sends on the caller's behalf.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import orjson

from leafsearch.common.json_paths import path_values
from leafsearch.errors import IllegalArgument, ResourceNotFound
from leafsearch.request.query_dsl import Percolate, Query, Terms, TermsLookup, queries_within, replace_queries
from leafsearch.request.search_types import SearchRequest
from leafsearch.security.subject import current

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices

#: The action a lookup's get is authorized as.
GET_ACTION = "indices:data/read/get"


def resolve_lookups(services: CoordinatorServices, request: SearchRequest) -> SearchRequest:
    """`request` with each terms lookup of its query (and post filter) replaced by the `terms`
    query of the values it reads; the request itself when it has none. O(query nodes) without one."""
    query = _resolved(services, request.query)
    post_filter = _resolved(services, request.post_filter) if request.post_filter is not None else None
    if query is request.query and post_filter is request.post_filter:
        return request
    return replace(request, query=query, post_filter=post_filter)


def _is_lookup(q: Query) -> bool:
    return isinstance(q, TermsLookup) or (isinstance(q, Percolate) and q.id is not None)


def _resolved(services: CoordinatorServices, query: Query) -> Query:
    if not any(_is_lookup(q) for q in queries_within(query)):
        return query
    subject = current()

    def lookup(node: Query) -> Query | None:
        if isinstance(node, Percolate) and node.id is not None:
            if subject is not None:
                subject.check_index(GET_ACTION, node.index)
            return _percolated(services, node)
        if not isinstance(node, TermsLookup):
            return None
        if subject is not None:
            subject.check_index(GET_ACTION, node.index)
        doc = services.get_document(node.index, node.id, routing=node.routing)
        source = doc.get("_source") if doc is not None else None
        values = list(path_values(orjson.loads(source.data), node.path)) if source is not None else []
        return Terms(node.field, tuple(values), node.boost)

    return replace_queries(query, lookup)


def _percolated(services: CoordinatorServices, node: Percolate) -> Percolate:
    """A `percolate` of an indexed document as the `percolate` of its source (Elasticsearch's
    PercolateQueryBuilder rewrite: a get, its version checked)."""
    doc = services.get_document(node.index, node.id, routing=node.routing, version=node.version)
    if doc is None:
        raise ResourceNotFound(f"indexed document [{node.index}/{node.id}] couldn't be found")
    if "_source" not in doc:
        raise IllegalArgument(f"indexed document [{node.index}/{node.id}] source disabled")
    return replace(node, documents=(doc["_source"].data,), index=None, id=None, routing=None, version=None)
