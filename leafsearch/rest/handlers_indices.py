"""Index administration endpoints: create/get/exists/delete, mappings, settings, refresh, flush."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch import admin
from leafsearch.errors import IndexNotFound
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.settings import active_shard_count

if TYPE_CHECKING:
    from leafsearch.node import Node


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
            flat=req.flag("flat_settings"),
            include_defaults=req.flag("include_defaults"),
        )
    )


def index_exists(node: Node, req: RestRequest) -> RestResponse:
    try:
        found = req.indices_options().resolve(node, req.path_params["index"])
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
        admin.put_settings(node, req.path_params.get("index"), req.json_object(), req.indices_options())
    )


def refresh(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(admin.refresh(node, req.path_params.get("index"), req.indices_options()))


def flush(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(admin.flush(node, req.path_params.get("index"), req.indices_options()))
