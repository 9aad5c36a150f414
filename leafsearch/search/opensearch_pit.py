"""OpenSearch's point-in-time API (`/<index>/_search/point_in_time`, `/_search/point_in_time[/_all]`)
over the same PIT contexts as Elasticsearch's `_pit`: a PIT opened either way is searched, listed
and closed either way. opensearch-py, opensearch-js and elasticdump speak this form when the
server says it is OpenSearch; the shapes are OpenSearch's (CreatePitResponse, DeletePitResponse,
GetAllPitNodesResponse): `pit_id`, `creation_time` and `keep_alive` in epoch milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.errors import ActionRequestValidation, IllegalArgument
from leafsearch.search import scroll_pit

if TYPE_CHECKING:
    from leafsearch.request.indices_options import IndicesOptions
    from leafsearch.search.services import CoordinatorServices

ALL = "_all"


def create_pit(
    services: CoordinatorServices,
    index_expr: str,
    keep_alive: str | None,
    options: IndicesOptions,
    routing: str | None,
) -> dict[str, Any]:
    """Open a PIT: OpenSearch's answer is Elasticsearch's with the id as `pit_id` and the
    context's `creation_time`."""
    if not keep_alive:
        raise ActionRequestValidation("keep alive not specified")
    opened = scroll_pit.open_pit(services, index_expr, keep_alive, options, routing)
    ctx = services.contexts.get(opened["id"], "pit")
    return {"pit_id": opened["id"], "_shards": opened["_shards"], "creation_time": _millis(ctx.opened_at)}


def pit_ids_of(body: Any) -> list[str]:
    """The `pit_id` entries of a delete body (one id or a list), refused as DeletePitRequest does."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise IllegalArgument("Malformed content, must start with an object")
    ids: list[str] = []
    for key, value in body.items():
        if key != "pit_id":
            kind = (
                "START_ARRAY"
                if isinstance(value, list)
                else "START_OBJECT"
                if isinstance(value, dict)
                else "VALUE"
            )
            raise IllegalArgument(
                f"Unknown parameter [{key}] in request body or parameter is of the wrong type[{kind}] "
            )
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (dict, list)) or item is None:
                where = "pit_id array element" if isinstance(value, list) else "pit_id element"
                raise IllegalArgument(f"{where} should only contain PIT identifier")
            ids.append(item if isinstance(item, str) else str(item).lower())
    if not ids:
        raise ActionRequestValidation("no pit ids specified")
    return ids


def delete_pits(services: CoordinatorServices, pit_ids: list[str]) -> dict[str, Any]:
    """Close PITs by id, or every one the caller may use (`_all`). As in OpenSearch an id whose
    context is already gone counts as deleted; an id that is no PIT id at all does not."""
    if pit_ids == [ALL]:
        results = []
        for ctx in services.contexts.visible("pit"):
            services.contexts.free_id(ctx.public_id, "pit")
            results.append({"successful": True, "pit_id": ctx.public_id})
        return {"pits": results}
    results = []
    for pit_id in pit_ids:
        services.contexts.free_id(pit_id, "pit")
        ours = services.contexts.decode_id(pit_id, "pit") is not None
        results.append({"successful": ours, "pit_id": pit_id})
    return {"pits": results}


def all_pits(services: CoordinatorServices) -> dict[str, Any]:
    """Every open PIT the caller may use, with when it was opened and its keep-alive (ms)."""
    return {
        "pits": [
            {
                "pit_id": ctx.public_id,
                "creation_time": _millis(ctx.opened_at),
                "keep_alive": int(round(ctx.keep_alive * 1000)),
            }
            for ctx in services.contexts.visible("pit")
        ]
    }


def _millis(seconds: float) -> int:
    return int(seconds * 1000)
