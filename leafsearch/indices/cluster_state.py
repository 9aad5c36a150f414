"""`GET /_cluster/state[/<metrics>[/<index>]]`: the node's metadata in Elasticsearch's shape.

One node holds everything, so the state is built on request from the live tables (indices,
aliases, templates, data streams, repositories). Its `version` is the sum of what those tables
count of their own changes, so a client comparing two answers sees it grow when one changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.common.settings import nest
from leafsearch.errors import IllegalArgument
from leafsearch.indices.admin import index_settings
from leafsearch.request.indices_options import IndicesOptions

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.indices.owner import IndicesOwner

METRICS = (
    "version",
    "master_node",
    "blocks",
    "nodes",
    "metadata",
    "routing_table",
    "routing_nodes",
    "customs",
)
#: Elasticsearch's block of a closed index (`MetadataIndexStateService.INDEX_CLOSED_BLOCK`).
_CLOSED_BLOCK = {"4": {"description": "index closed", "retryable": False, "levels": ["read", "write"]}}


def parse_metrics(text: str | None, path: str) -> set[str]:
    """The sections a `{metric}` path part asks for (all when absent or `_all`)."""
    if text is None:
        return set(METRICS)
    names = {name for name in text.split(",") if name}
    if "_all" in names:
        return set(METRICS)
    unknown = sorted(names - set(METRICS))
    if unknown:
        raise IllegalArgument(
            f"request [{path}] contains unrecognized metric{'s' if len(unknown) > 1 else ''}: "
            f"[{', '.join(unknown)}]"
        )
    return names


def cluster_state(
    node: IndicesOwner,
    *,
    cluster_uuid: str,
    node_name: str,
    node_header: dict[str, Any],
    metrics: set[str],
    index_expr: str | None,
    options: IndicesOptions,
) -> dict[str, Any]:
    """The state's sections named by `metrics`, its indices narrowed to `index_expr`."""
    with node.lock:
        names = node.resolve_indices(
            index_expr,
            ignore_unavailable=options.ignore_unavailable,
            allow_no_indices=options.allow_no_indices,
            expand_wildcards=options.expand_wildcards,
            forbid_closed=False,
        )
        indices = [node.indices[name] for name in sorted(names)]
    body: dict[str, Any] = {"cluster_name": node.cluster_name, "cluster_uuid": cluster_uuid}
    version = _version(node)
    if "version" in metrics:
        body["version"] = version
        body["state_uuid"] = f"{cluster_uuid[:12]}{version:010d}"
    if "master_node" in metrics:
        body["master_node"] = node.node_id
    if "blocks" in metrics:
        closed = {index.name: _CLOSED_BLOCK for index in indices if index.closed}
        body["blocks"] = {"indices": closed} if closed else {}
    if "nodes" in metrics:
        header = {key: node_header[key] for key in ("transport_address", "attributes", "roles")}
        body["nodes"] = {
            node.node_id: {
                "name": node_name,
                "ephemeral_id": node.node_id,
                **header,
                "external_id": node_name,
            }
        }
    if "metadata" in metrics:
        body["metadata"] = _metadata(node, indices, cluster_uuid, version)
    if "routing_table" in metrics:
        body["routing_table"] = {
            "indices": {index.name: {"shards": _shards(node, index)} for index in indices if not index.closed}
        }
    if "routing_nodes" in metrics:
        assigned = [
            copy
            for index in indices
            if not index.closed
            for copies in _shards(node, index).values()
            for copy in copies
        ]
        body["routing_nodes"] = {"unassigned": [], "nodes": {node.node_id: assigned}}
    return body


def _version(node: IndicesOwner) -> int:
    indices = list(node.indices.values())
    changes = len(indices) + sum(index.mapping.version for index in indices)
    return 1 + changes + node.templates.version + node.data_streams.version + node.repositories.version


def _metadata(node: IndicesOwner, indices: list[Index], cluster_uuid: str, version: int) -> dict[str, Any]:
    aliases = node.aliases
    templates = node.templates.state_sections()
    return {
        "cluster_uuid": cluster_uuid,
        "cluster_uuid_committed": True,
        "cluster_coordination": {
            "term": 1,
            "last_committed_config": [node.node_id],
            "last_accepted_config": [node.node_id],
            "voting_config_exclusions": [],
        },
        "templates": templates["templates"],
        "indices": {
            index.name: {
                "version": version,
                "mapping_version": index.mapping.version + 1,
                "settings_version": 1,
                "aliases_version": 1,
                "routing_num_shards": index.routing_num_shards,
                "state": "close" if index.closed else "open",
                "settings": nest(index_settings(index)),
                "mappings": _mappings(index),
                "aliases": list(aliases.of_index(index.name)),
                "primary_terms": {str(n): 1 for n in range(index.num_shards)},
                "in_sync_allocations": {str(n): [f"{index.uuid}-{n}"] for n in range(index.num_shards)},
                "rollover_info": {},
                "system": False,
                "timestamp_range": {"shards": []},
            }
            for index in indices
        },
        "index_template": {"index_template": templates["index_template"]},
        "component_template": {"component_template": templates["component_template"]},
        "data_stream": node.data_streams.state_section(),
        "index-graveyard": {"tombstones": []},
        "repositories": node.repositories.state_section(),
    }


def _mappings(index: Index) -> dict[str, Any]:
    """As Elasticsearch's state holds them: under `_doc`, or nothing for an empty mapping."""
    body = index.mapping.to_body()
    return {"_doc": body} if body else {}


def _shards(node: IndicesOwner, index: Index) -> dict[str, list[dict[str, Any]]]:
    return {
        str(n): [
            {
                "state": "STARTED",
                "primary": True,
                "node": node.node_id,
                "relocating_node": None,
                "shard": n,
                "index": index.name,
                "allocation_id": {"id": f"{index.uuid}-{n}"},
            }
        ]
        for n in range(index.num_shards)
    }
