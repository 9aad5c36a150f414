"""Stored scripts: `PUT|POST /_scripts/<id>`, `GET /_scripts/<id>`, `DELETE /_scripts/<id>`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.errors import ElasticError
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.node.node import Node


def put_script(node: Node, req: RestRequest) -> RestResponse:
    node.scripts.put(req.path_params["id"], req.json())
    return RestResponse({"acknowledged": True})


def get_script(node: Node, req: RestRequest) -> RestResponse:
    script_id = req.path_params["id"]
    script = node.scripts.get(script_id)
    if script is None:
        return RestResponse({"_id": script_id, "found": False}, status=404)
    return RestResponse({"_id": script_id, "found": True, "script": script})


def delete_script(node: Node, req: RestRequest) -> RestResponse:
    script_id = req.path_params["id"]
    if not node.scripts.delete(script_id):
        raise ElasticError(
            f"stored script [{script_id}] does not exist",
            status=404,
            error_type="resource_not_found_exception",
        )
    return RestResponse({"acknowledged": True})
