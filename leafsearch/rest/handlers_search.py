"""Search endpoints: `_search`, `_count`, scroll, clear-scroll, point in time.

This layer parses: a body and its query parameters become a typed `SearchRequest`
(request/search_request.py validates every value as Elasticsearch does), which the node executes.
It also decides where the scroll and PIT ids come from (body, path or query string).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ActionRequestValidation
from leafsearch.node.slowlog import timed_search
from leafsearch.request.export_request import parse_export_request
from leafsearch.request.search_request import (
    parse_clear_scroll,
    parse_count_request,
    parse_scroll_request,
    parse_search_request,
)
from leafsearch.request.timevalue import parse_time_value
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.search import export as export_stream
from leafsearch.search import opensearch_pit
from leafsearch.search.msearch import Authorize, parse_msearch
from leafsearch.search.msearch import msearch as run_msearch
from leafsearch.search.socket_sink import Lend, Sink, Written
from leafsearch.security.narrowing import narrow_expression

if TYPE_CHECKING:
    from leafsearch.node.node import Node

SEARCH_ACTION = "indices:data/read/search"


def search(node: Node, req: RestRequest) -> RestResponse:
    index, body = req.path_params.get("index"), req.json_object()
    # The path's indices take part in validation: a PIT search must not name any.
    request = parse_search_request(body, req.action_params(), indices=index)
    with timed_search(node, index, body, req.headers.get("x-opaque-id")) as outcome:
        result = node.search(request, raw_hits=True, cancelled=req.cancelled, lend=_lend(node, req))
        outcome.response = result.summary() if isinstance(result, Written) else result
    return _answered(result)


def _lend(node: Node, req: RestRequest) -> Lend | None:
    """The request's socket loan; a park offer (search/workers/parking.py) ends with the API
    key's expiration when it was authenticated by one that expires."""
    lend, subject = req.lend, req.subject
    if lend is None or subject is None or subject.api_key_id is None:
        return lend
    until = node.security.key_expiration(subject.api_key_id)
    if until is None:
        return lend

    def expiring() -> Sink | None:
        sink = lend()
        if sink is None or sink.park is None:
            return sink
        return dataclasses.replace(sink, park=dataclasses.replace(sink.park, until=until))

    return expiring


def _answered(result: dict[str, Any] | Written) -> RestResponse:
    """A search's response, or what its renderer wrote of it to the client's socket."""
    return RestResponse(written=result) if isinstance(result, Written) else RestResponse(result)


def export(node: Node, req: RestRequest) -> RestResponse:
    """`GET|POST [/<target>]/_export`, a leafsearch extension: every matching document of a
    snapshot (the target's, taken now, or a PIT's) streamed as NDJSON (search/export.py). Read
    as a search of its indices; a PIT's were checked when it was opened, and it is its opener's."""
    request = parse_export_request(
        req.json_object(), req.action_params(), indices=req.path_params.get("index")
    )
    return RestResponse(stream=export_stream.start(node.search_services, request, req.cancelled))


def msearch(node: Node, req: RestRequest) -> RestResponse:
    """`_msearch`: each search is authorized as a search of its own indices, as `_search` is."""
    items = parse_msearch(req.body, req.path_params.get("index"), req.action_params())
    return RestResponse(
        run_msearch(
            node.search_services,
            items,
            max_concurrent=req.int_param("max_concurrent_searches"),
            authorize=_search_item_check(node, req),
            raw_hits=True,
            cancelled=req.cancelled,
        )
    )


def _search_item_check(node: Node, req: RestRequest) -> Authorize | None:
    subject = req.subject
    if subject is None or subject.superuser:
        return None

    def check(index: str | None, params: dict[str, str], body: dict[str, Any] | None) -> str | None:
        if index is None and isinstance(body, dict) and "pit" in body:
            return None  # a PIT's indices were checked when it was opened, and it is its opener's
        expand = params.get("expand_wildcards", "open")
        return narrow_expression(node.resolve_names, subject, SEARCH_ACTION, index, expand_wildcards=expand)

    return check


def count(node: Node, req: RestRequest) -> RestResponse:
    request = parse_count_request(
        req.json_object(), req.action_params(), indices=req.path_params.get("index")
    )
    return RestResponse(node.count(request, cancelled=req.cancelled))


def _hits_total_as_int(body: dict[str, Any]) -> dict[str, Any]:
    total = body.get("hits", {}).get("total")
    if isinstance(total, dict):
        body["hits"]["total"] = total.get("value")
    return body


def scroll(node: Node, req: RestRequest) -> RestResponse:
    """The body's `scroll_id` / `scroll` win over the path and query string, as in Elasticsearch."""
    scroll_id, keep_alive = parse_scroll_request(req.json(), req.params, req.path_params.get("scroll_id"))
    if req.flag("rest_total_hits_as_int"):  # rewritten here: rendered here
        return RestResponse(_hits_total_as_int(node.scroll(scroll_id, keep_alive, raw_hits=True)))  # type: ignore[arg-type]
    return _answered(node.scroll(scroll_id, keep_alive, raw_hits=True, lend=_lend(node, req)))


def _freed(body: dict[str, Any]) -> RestResponse:
    """Elasticsearch answers 404 (with the normal body) when nothing was freed."""
    return RestResponse(body, status=200 if body.get("num_freed", 0) > 0 else 404)


def clear_scroll(node: Node, req: RestRequest) -> RestResponse:
    """Ids from the path or `scroll_id` parameter, replaced entirely by a body's (as Elasticsearch)."""
    ids = parse_clear_scroll(req.json(), req.params, req.path_params.get("scroll_id"))
    body = node.clear_scroll(ids)
    if ids == ["_all"]:  # Elasticsearch counts the nodes that cleared theirs: never 404
        return RestResponse(body)
    return _freed(body)


def open_pit(node: Node, req: RestRequest) -> RestResponse:
    """`POST /<index>/_pit`, or `POST /_pit?index=...` as Elasticsearch also routes it."""
    index = req.path_params.get("index", req.param("index"))
    keep_alive = req.param("keep_alive")
    if keep_alive is not None:
        parse_time_value(keep_alive, "keep_alive")  # refused before validation, as Elasticsearch does
    problems = []
    if not index:
        problems.append("[index] is not specified")
    if keep_alive is None:
        problems.append("[keep_alive] is not specified")
    if problems:
        raise ActionRequestValidation(*problems)
    return RestResponse(node.open_pit(index, keep_alive, req.indices_options(), req.param("routing")))


def close_pit(node: Node, req: RestRequest) -> RestResponse:
    """`DELETE /_pit`; also `DELETE /<index>/_pit`, which elasticdump sends (a leafsearch extension:
    the id names the PIT, the path's index is not read)."""
    body = req.json_object() or {}
    pit_id = body.get("id")
    if not isinstance(pit_id, str) or not pit_id:
        raise ActionRequestValidation("id is missing")
    return _freed(node.close_pit(pit_id))


def create_pit(node: Node, req: RestRequest) -> RestResponse:
    """OpenSearch's `POST /<index>/_search/point_in_time?keep_alive=`."""
    keep_alive = req.param("keep_alive")
    if keep_alive is not None:
        parse_time_value(keep_alive, "keep_alive")
    req.flag("allow_partial_pit_creation")  # every shard is local: a PIT is never partial
    options, routing = req.indices_options(), req.param("routing")
    return RestResponse(
        opensearch_pit.create_pit(
            node.search_services, req.path_params["index"], keep_alive, options, routing
        )
    )


def delete_pits(node: Node, req: RestRequest) -> RestResponse:
    """OpenSearch's `DELETE /_search/point_in_time` (body `pit_id`) and `.../_all`."""
    if req.path.rstrip("/").endswith("/" + opensearch_pit.ALL):
        return RestResponse(opensearch_pit.delete_pits(node.search_services, [opensearch_pit.ALL]))
    return RestResponse(
        opensearch_pit.delete_pits(node.search_services, opensearch_pit.pit_ids_of(req.json()))
    )


def all_pits(node: Node, req: RestRequest) -> RestResponse:
    """OpenSearch's `GET /_search/point_in_time/_all`."""
    return RestResponse(opensearch_pit.all_pits(node.search_services))
