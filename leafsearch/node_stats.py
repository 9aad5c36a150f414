"""`GET /_nodes` and `GET /_nodes/stats`: the node's identity and counters, Elasticsearch-shaped.

The search section is the one users watch for leaked contexts: `open_contexts` counts every open
scroll and point in time, `scroll_current` the open scrolls.
"""

from __future__ import annotations

import os
import resource
import time
from typing import TYPE_CHECKING, Any

from leafsearch.version import VERSION

if TYPE_CHECKING:
    from leafsearch.node import Node

_INDEX_METRICS = ("docs", "store", "indexing", "search", "refresh", "merges", "flush", "get", "sort_orders")


def _node_header(node: Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "transport_address": "127.0.0.1:9300",
        "host": "127.0.0.1",
        "ip": "127.0.0.1",
        "roles": ["data", "ingest", "master"],
        "attributes": {},
    }


def _indices_section(node: Node, metrics: tuple[str, ...]) -> dict[str, Any]:
    docs = deleted = size = indexed = deleted_ops = refreshes = merges = 0
    for index in list(node.indices.values()):
        docs += index.doc_count()
        deleted += index.deleted_count()
        size += index.store_size_bytes()
        for shard in index.shards:
            indexed += shard.stats["index_total"]
            deleted_ops += shard.stats["delete_total"]
            refreshes += shard.stats["refresh_total"]
            merges += shard.stats["merge_total"]
    search = node.search_stats.snapshot()
    search["open_contexts"] = node.contexts.open_count()
    full = {
        "docs": {"count": docs, "deleted": deleted},
        "store": {"size_in_bytes": size, "reserved_in_bytes": 0},
        "indexing": {
            "index_total": indexed,
            "index_time_in_millis": 0,
            "index_current": 0,
            "index_failed": 0,
            "delete_total": deleted_ops,
            "delete_time_in_millis": 0,
            "delete_current": 0,
            "noop_update_total": 0,
            "is_throttled": False,
            "throttle_time_in_millis": 0,
        },
        "get": {"total": 0, "time_in_millis": 0, "exists_total": 0, "missing_total": 0, "current": 0},
        "search": {"open_contexts": search.pop("open_contexts"), **search},
        "merges": {"current": 0, "total": merges, "total_time_in_millis": 0},
        "refresh": {"total": refreshes, "total_time_in_millis": 0},
        "flush": {"total": refreshes, "total_time_in_millis": 0},
        # leafsearch's own: the sort orders per segment (segment_orders.py) and their bound.
        "sort_orders": {**node.sort_orders.stats(), "limit_size_in_bytes": node.sort_orders.max_bytes},
    }
    return {k: v for k, v in full.items() if k in metrics}


def _process_section() -> dict[str, Any]:
    rss = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "timestamp": int(time.time() * 1000),
        "open_file_descriptors": len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0,
        "mem": {"total_virtual_in_bytes": 0, "resident_in_bytes": rss},
    }


def nodes_stats(node: Node, metric_path: list[str]) -> dict[str, Any]:
    """`metric_path` is what follows `/_nodes/stats` (e.g. ["indices", "search"])."""
    metric = metric_path[0] if metric_path else "_all"
    index_metrics = tuple(metric_path[1].split(",")) if len(metric_path) > 1 else _INDEX_METRICS
    if "_all" in index_metrics:
        index_metrics = _INDEX_METRICS
    stats: dict[str, Any] = {**_node_header(node), "timestamp": int(time.time() * 1000)}
    wanted = set(metric.split(","))
    if wanted & {"_all", "indices"}:
        stats["indices"] = _indices_section(node, index_metrics)
    if wanted & {"_all", "process"}:
        stats["process"] = _process_section()
    if wanted & {"_all", "breaker"}:
        stats["breakers"] = node.breakers.stats()
    return {
        "_nodes": {"total": 1, "successful": 1, "failed": 0},
        "cluster_name": node.cluster_name,
        "nodes": {node.node_id: stats},
    }


def nodes_info(node: Node) -> dict[str, Any]:
    return {
        "_nodes": {"total": 1, "successful": 1, "failed": 0},
        "cluster_name": node.cluster_name,
        "nodes": {
            node.node_id: {
                **_node_header(node),
                "version": VERSION,
                "build_flavor": "default",
                "build_type": "tar",
                "http": {"bound_address": ["127.0.0.1:9200"], "publish_address": "127.0.0.1:9200"},
                "settings": {"cluster": {"name": node.cluster_name}, "node": {"name": node.name}},
            }
        },
    }
