"""Snapshot repositories and snapshots (`_snapshot`): register, create, list, status, restore,
delete (indices/snapshots.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.indices import snapshots
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.node.node import Node


def put_repository(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(snapshots.put_repository(node, req.path_params["repository"], req.json_object()))


def get_repositories(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(snapshots.get_repositories(node, req.path_params.get("repository")))


def delete_repository(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(snapshots.delete_repository(node, req.path_params["repository"]))


def verify_repository(node: Node, req: RestRequest) -> RestResponse:
    node.repositories.get(req.path_params["repository"])
    return RestResponse({"nodes": {node.node_id: {"name": node.name}}})


def create_snapshot(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        snapshots.create_snapshot(
            node,
            req.path_params["repository"],
            req.path_params["snapshot"],
            req.json_object(),
            wait_for_completion=req.flag("wait_for_completion"),
        )
    )


def get_snapshots(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        snapshots.get_snapshots(
            node,
            req.path_params["repository"],
            req.path_params["snapshot"],
            ignore_unavailable=req.flag("ignore_unavailable"),
        )
    )


def snapshot_status(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        snapshots.snapshot_status(node, req.path_params.get("repository"), req.path_params.get("snapshot"))
    )


def delete_snapshot(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        snapshots.delete_snapshots(node, req.path_params["repository"], req.path_params["snapshot"])
    )


def restore_snapshot(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        snapshots.restore_snapshot(
            node,
            req.path_params["repository"],
            req.path_params["snapshot"],
            req.json_object(),
            wait_for_completion=req.flag("wait_for_completion"),
        )
    )
