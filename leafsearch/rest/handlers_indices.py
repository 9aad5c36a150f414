"""Index administration endpoints: create/get/exists/delete, mappings, settings, refresh, flush."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.common.settings import active_shard_count
from leafsearch.errors import ActionRequestValidation, IllegalArgument, IndexNotFound, XContentParseError
from leafsearch.indices import admin, cache_clear
from leafsearch.indices import field_caps as field_caps_api
from leafsearch.request.query_dsl import parse_query
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.security.narrowing import permitted
from leafsearch.unsupported import NotSupported

if TYPE_CHECKING:
    from leafsearch.node.node import Node

#: `GET` and `HEAD /<index>`; the `aliases` of an index show only those the caller may use.
GET_ACTION = "indices:admin/get"


def create_index(node: Node, req: RestRequest) -> RestResponse:
    wait = active_shard_count(req.param("wait_for_active_shards"))
    return RestResponse(
        admin.create_index(node, req.path_params["index"], req.json_object(), wait_for_active_shards=wait)
    )


def get_index(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        admin.get_indices(
            node,
            req.path_params["index"],
            req.indices_options(),
            shown=permitted(req.subject, GET_ACTION),
            flat=req.flag("flat_settings"),
            include_defaults=req.flag("include_defaults"),
        )
    )


def index_exists(node: Node, req: RestRequest) -> RestResponse:
    try:
        found = admin.indices_of(node, req.indices_options(), req.path_params["index"])
    except IndexNotFound:
        found = []
    return RestResponse(status=200 if found else 404)


def delete_index(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(admin.delete_indices(node, req.path_params["index"], req.indices_options()))


def get_mapping(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(admin.get_mappings(node, req.path_params.get("index"), req.indices_options()))


def put_mapping(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        admin.put_mapping(node, req.path_params["index"], req.json_object(), req.indices_options())
    )


def get_settings(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        admin.get_settings(
            node,
            req.path_params.get("index"),
            req.indices_options(),
            names=req.path_params.get("name"),
            flat=req.flag("flat_settings"),
            include_defaults=req.flag("include_defaults"),
        )
    )


def put_settings(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        admin.put_settings(
            node,
            req.path_params.get("index"),
            req.json_object(),
            req.indices_options(),
            preserve_existing=req.flag("preserve_existing"),
        )
    )


def refresh(node: Node, req: RestRequest) -> RestResponse:
    options = req.indices_options(forbid_closed=True)
    return RestResponse(admin.refresh(node, req.path_params.get("index"), options))


def clear_cache(node: Node, req: RestRequest) -> RestResponse:
    options = req.indices_options()
    flags = {name: req.flag(name) for name in ("fielddata", "request", "query")}
    return RestResponse(cache_clear.clear_cache(node, req.path_params.get("index"), options, **flags))


def flush(node: Node, req: RestRequest) -> RestResponse:
    options = req.indices_options(forbid_closed=True)
    return RestResponse(admin.flush(node, req.path_params.get("index"), options))


_FIELD_CAPS_BODY = frozenset({"fields", "index_filter", "runtime_mappings"})


def field_caps(node: Node, req: RestRequest) -> RestResponse:
    """`GET|POST [/<index>]/_field_caps`: `fields` from the query string or the body, not both."""
    body = req.json_object() or {}
    for key in body:
        if key not in _FIELD_CAPS_BODY:
            raise XContentParseError(f"[field_caps_request] unknown field [{key}]")
    if body.get("runtime_mappings"):
        raise NotSupported("[runtime_mappings]")
    fields = _comma_list(req.param("fields"))
    if "fields" in body:
        if fields:
            raise IllegalArgument(
                "can't specify a request body and [fields] request parameter, either specify a request "
                "body or the [fields] request parameter"
            )
        value = body["fields"]
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in values):
            raise XContentParseError("[field_caps_request] failed to parse field [fields]")
        fields = values
    if not fields:
        raise ActionRequestValidation("specified fields can't be null or empty")
    filters = _comma_list(req.param("filters"))
    field_caps_api.check_filters(filters)
    types = _comma_list(req.param("types"))
    index_filter = body.get("index_filter")
    if index_filter is not None:
        parse_query(index_filter)  # a bad filter fails the request before any index is read
    indices = admin.indices_of(node, req.indices_options(forbid_closed=True), req.path_params.get("index"))
    kept = field_caps_api.matching_indices(node, indices, index_filter)
    per_index = {
        index.name: field_caps_api.index_capabilities(index, fields, filters, types) for index in kept
    }
    return RestResponse(field_caps_api.merge(per_index, req.flag("include_unmapped")))


def _comma_list(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]
