"""`POST [/<index>]/_cache/clear`: the node's caches of these indices emptied, as Elasticsearch's
clear cache API does. `fielddata=true` drops the uninverted text fields (`fielddata: true`)
held by the server and every search worker (index/fielddata.py), giving their bytes back to the
fielddata breaker; `request=true` the request cache's answers of these indices; `query=true`
answers as Elasticsearch's (leafsearch has no query cache). With none of them, every cache goes.
`fields` names the fields whose fielddata to clear in Elasticsearch; here the fielddata of the
indices' shards is cleared whole (a superset: what was dropped is built again when asked)."""

from __future__ import annotations

from typing import Any

from leafsearch.indices import admin
from leafsearch.indices.owner import IndicesOwner
from leafsearch.request.indices_options import IndicesOptions


def clear_cache(
    node: IndicesOwner,
    expr: str | None,
    options: IndicesOptions,
    *,
    fielddata: bool = False,
    request: bool = False,
    query: bool = False,
) -> dict[str, Any]:
    targets = admin.indices_of(node, options, expr)
    every = not (fielddata or request or query)
    if every or fielddata:
        folders = {
            str(shard.folder) for index in targets for shard in index.shards if hasattr(shard, "folder")
        }
        node.clear_fielddata(folders)
    if every or request:
        node.request_cache.clear({index.uuid for index in targets})
    return {"_shards": admin.shards_header(targets)}
