"""Snapshot repositories and snapshots (`_snapshot`): register, create, list, status, restore,
delete (indices/snapshots.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.indices import snapshots
from leafsearch.rest.cat import Column, render_table
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


CAT_COLUMNS = [
    Column("id", "unique snapshot", ("snapshot",)),
    Column("repository", "repository name", ("re", "repo")),
    Column("status", "snapshot name", ("s",)),
    Column(
        "start_epoch", "start time in seconds since 1970-01-01 00:00:00", ("ste", "startEpoch"), right=True
    ),
    Column("start_time", "start time in HH:MM:SS", ("sti", "startTime")),
    Column("end_epoch", "end time in seconds since 1970-01-01 00:00:00", ("ete", "endEpoch"), right=True),
    Column("end_time", "end time in HH:MM:SS", ("eti", "endTime")),
    Column("duration", "duration", ("dur",), right=True),
    Column("indices", "number of indices", ("i",), right=True),
    Column("successful_shards", "number of successful shards", ("ss",), right=True),
    Column("failed_shards", "number of failed shards", ("fs",), right=True),
    Column("total_shards", "number of total shards", ("ts",), right=True),
    Column("reason", "reason for failures", ("r",)),
]


def cat_snapshots(node: Node, req: RestRequest) -> RestResponse:
    return render_table(req, CAT_COLUMNS, snapshots.cat_rows(node, req.path_params["repository"]))
