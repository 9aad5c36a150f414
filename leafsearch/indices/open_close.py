"""`POST /<index>/_close` and `POST /<index>/_open`.

A closed index keeps its files and its metadata (`state: close` in `meta.json`, so it stays closed
across restarts) and holds nothing in memory; its point-in-time and scroll contexts are freed, as
Elasticsearch frees the reader contexts of a closed index. Reads and writes of it answer
`index_closed_exception`, wildcards skip it unless `expand_wildcards` names `closed`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.indices import admin
from leafsearch.indices.admin import check_destructive
from leafsearch.request.indices_options import IndicesOptions

if TYPE_CHECKING:
    from leafsearch.indices.owner import IndicesOwner


def close_indices(node: IndicesOwner, expr: str, options: IndicesOptions) -> dict[str, Any]:
    check_destructive(node, expr)
    with node.lock:  # no index is created, deleted or opened meanwhile
        targets = admin.indices_of(node, options, expr)
        for index in targets:
            index.close_index()
            node.contexts.drop_index(index, "closed")
    return {
        "acknowledged": True,
        "shards_acknowledged": True,
        "indices": {index.name: {"closed": True} for index in targets},
    }


def open_indices(node: IndicesOwner, expr: str, options: IndicesOptions) -> dict[str, Any]:
    with node.lock:
        for index in admin.indices_of(node, options, expr):
            index.open_index()
    return {"acknowledged": True, "shards_acknowledged": True}
