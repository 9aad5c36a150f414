"""Node and cluster endpoints: `GET /`, `_nodes`, `_cluster/health`, `_cluster/settings`,
`_cluster/pending_tasks` (`_cluster/state` is in handlers_templates.py, beside the metadata it shows).

Every user may monitor the cluster, but the sections of an answer that each describe one index
(`level=indices` or `shards`) name only the indices the caller may see: those its `*` reaches,
the indices it may read and those of the aliases it may read. The cluster's own figures stay the
whole cluster's, as `_cat/health` shows them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.common.settings import active_shard_count
from leafsearch.errors import IllegalArgument
from leafsearch.indices import admin
from leafsearch.node import stats as node_stats
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.rest.unrecognized import unrecognized
from leafsearch.security.narrowing import narrow_expression
from leafsearch.version import LUCENE_VERSION
from leafsearch.version import VERSION as ES_VERSION

if TYPE_CHECKING:
    from leafsearch.node.node import Node

HEALTH_ACTION = "cluster:monitor/health"
NODES_STATS_ACTION = "cluster:monitor/nodes/stats"

# What an Elasticsearch 8.17.0 node reports; clients check `version.number` and the tagline.
VERSION = {
    "number": ES_VERSION,
    "build_flavor": "default",
    "build_type": "tar",
    "build_hash": "2b6a7fed44faa321997703718f07ee0420804b41",
    "build_date": "2024-12-11T12:08:05.663969764Z",
    "build_snapshot": False,
    "lucene_version": LUCENE_VERSION,
    "minimum_wire_compatibility_version": "7.17.0",
    "minimum_index_compatibility_version": "7.0.0",
}

NODE_METRICS = frozenset(
    [
        "_all",
        "adaptive_selection",
        "allocations",
        "breaker",
        "discovery",
        "fs",
        "http",
        "indexing_pressure",
        "indices",
        "ingest",
        "jvm",
        "os",
        "process",
        "repositories",
        "script",
        "script_cache",
        "search_workers",
        "thread_pool",
        "transport",
        "walks",
    ]
)
#: `_nodes/stats/indices/<index_metric>`: the node's sections (`_stats`' own and its own), or all.
INDEX_METRICS = frozenset(("_all", *node_stats.INDEX_METRICS))


def info(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        {
            "name": node.name,
            "cluster_name": node.cluster_name,
            "cluster_uuid": node.cluster_uuid,
            "version": VERSION,
            "tagline": "You Know, for Search",
        }
    )


# `GET /_nodes/{x}` takes either node ids or info metrics in that place, as Elasticsearch does.
INFO_METRICS = frozenset(
    [
        "_all",
        "_none",
        "aggregations",
        "http",
        "indices",
        "ingest",
        "jvm",
        "os",
        "plugins",
        "process",
        "remote_cluster_server",
        "settings",
        "thread_pool",
        "transport",
    ]
)


def _selects_this_node(node: Node, node_ids: str | None) -> bool:
    if not node_ids:
        return True
    return any(i in ("_all", "_local", "_master", "*", node.node_id, node.name) for i in node_ids.split(","))


def _no_nodes(node: Node) -> dict:
    return {
        "_nodes": {"total": 0, "successful": 0, "failed": 0},
        "cluster_name": node.cluster_name,
        "nodes": {},
    }


def nodes_info(node: Node, req: RestRequest) -> RestResponse:
    target = req.path_params.get("node_id")
    if target is not None and set(target.split(",")) <= INFO_METRICS:
        target = None
    if not _selects_this_node(node, target):
        return RestResponse(_no_nodes(node))
    return RestResponse(node.nodes_info())


def nodes_stats(node: Node, req: RestRequest) -> RestResponse:
    metric = req.path_params.get("metric")
    index_metric = req.path_params.get("index_metric")
    metric_path: list[str] = []
    if metric is not None:
        names = set(metric.split(","))
        if names - NODE_METRICS:
            raise IllegalArgument(unrecognized(req.path, names - NODE_METRICS, NODE_METRICS, "metric"))
        metric_path.append(metric)
    if index_metric is not None:
        names = set(index_metric.split(","))
        if names - INDEX_METRICS:
            raise IllegalArgument(
                unrecognized(req.path, names - INDEX_METRICS, INDEX_METRICS, "index metric")
            )
        metric_path.append(index_metric)
    if not _selects_this_node(node, req.path_params.get("node_id")):
        return RestResponse(_no_nodes(node))
    level = req.param("level", "node") or "node"
    if level not in ("node", "indices", "shards"):
        raise IllegalArgument(
            f"level parameter must be one of [node] or [indices] or [shards] but was [{level}]"
        )
    file_sizes = req.flag("include_segment_file_sizes")
    body = node.nodes_stats(metric_path, level=level, file_sizes=file_sizes)
    others_hidden = req.subject is not None and not req.subject.superuser
    for stats in body["nodes"].values():
        section = stats.get("indices", {})
        if level in section:  # `indices` or `shards`: by index name
            section[level] = _only_shown(node, req, NODES_STATS_ACTION, section[level])
        if others_hidden and "clients" in stats.get("http", {}):
            # every connection's addresses, agent and last request line: other users' work
            del stats["http"]["clients"]
    return RestResponse(body)


def pending_tasks(node: Node, req: RestRequest) -> RestResponse:
    """`GET /_cluster/pending_tasks`: a single node applies every cluster change as it is asked,
    so nothing is ever waiting."""
    return RestResponse({"tasks": []})


def cluster_health(node: Node, req: RestRequest) -> RestResponse:
    active_shard_count(req.param("wait_for_active_shards"))  # validated; every primary is active
    status, body = admin.cluster_health(
        node,
        req.path_params.get("index"),
        level=req.param("level", "cluster") or "cluster",
        wait_for_status=req.param("wait_for_status"),
        timeout=req.time_param("timeout", 30.0) or 0.0,
    )
    if "indices" in body:
        body["indices"] = _only_shown(node, req, HEALTH_ACTION, body["indices"])
    return RestResponse(body, status=status)


def _only_shown(node: Node, req: RestRequest, action: str, sections: dict[str, Any]) -> dict[str, Any]:
    """`sections` (by index name) without those of the indices the caller may not see."""
    subject = req.subject
    if subject is None or subject.superuser:
        return sections
    narrowed = narrow_expression(node.resolve_names, subject, action, None, expand_wildcards="all")
    if narrowed is None:
        return sections
    shown = {index.name for index in admin.indices_of(node, IndicesOptions(expand_wildcards="all"), narrowed)}
    return {name: section for name, section in sections.items() if name in shown}


def get_cluster_settings(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        node.cluster_settings.to_body(
            flat=req.flag("flat_settings"), include_defaults=req.flag("include_defaults")
        )
    )


def put_cluster_settings(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(node.cluster_settings.update(req.json_object(), flat=req.flag("flat_settings")))
