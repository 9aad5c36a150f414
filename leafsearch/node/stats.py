"""`GET /_nodes` and `GET /_nodes/stats`: the node's identity and counters, Elasticsearch-shaped.

The `indices` section sums the shards' stats (`index_stats.py`), except search, which is the
node's own per-request counters. The search section is the one users watch for leaked contexts:
`open_contexts` counts every open scroll and point in time, `scroll_current` the open scrolls.
"""

from __future__ import annotations

import os
import resource
import time
from typing import TYPE_CHECKING, Any

from leafsearch.indices.stats import METRICS, node_indices_stats
from leafsearch.search.walks import MAX_MEMORY as MAX_WALK_MEMORY
from leafsearch.search.walks import walk_stats
from leafsearch.version import VERSION

if TYPE_CHECKING:
    from leafsearch.node.node import Node

#: The index metrics of `_nodes/stats/indices/<index_metric>`: `_stats`' own, then the node's.
INDEX_METRICS = (*METRICS, "mappings", "sort_orders")


def node_header(name: str) -> dict[str, Any]:
    """The node's identity fields of `_nodes` and `_tasks` bodies."""
    return {
        "name": name,
        "transport_address": "127.0.0.1:9300",
        "host": "127.0.0.1",
        "ip": "127.0.0.1",
        "roles": ["data", "ingest", "master"],
        "attributes": {},
    }


def _indices_section(node: Node, metrics: tuple[str, ...], *, level: str, file_sizes: bool) -> dict[str, Any]:
    wanted = [m for m in metrics if m in METRICS]
    section = node_indices_stats(node, wanted, level=level, file_sizes=file_sizes)
    if "indexing" in section:
        # leafsearch's own (OpenSearch 2.x reports it): the node's document writes by status family.
        section["indexing"]["doc_status"] = node.doc_status.stats()
    if "mappings" in metrics:
        indices = list(node.indices.values())
        section["mappings"] = {
            "total_count": sum(len(index.mapping.fields()) for index in indices),
            "total_estimated_overhead_in_bytes": 0,
        }
    if "sort_orders" in metrics:
        # leafsearch's own: the sort orders per segment (segment_orders.py) and their bound.
        section["sort_orders"] = {
            **node.sort_orders.stats(),
            "limit_size_in_bytes": node.sort_orders.max_bytes,
        }
    return section


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


def _walks_section(node: Node, in_workers: list[dict[str, Any]]) -> dict[str, Any]:
    """leafsearch's own: what the open walks hold (search/walks.py), in the server process and
    the search workers together: the lists of every match kept for `_score` walks, the windows
    of hits walks page through (both bounded by `search.walks.max_memory`) and the pages read
    ahead, in all and per reader context (those the caller may use)."""
    parts = [walk_stats(node.contexts), *in_workers]
    kinds = ("lists_in_bytes", "windows_in_bytes", "pages_read_ahead_in_bytes")
    held: dict[int, dict[str, int]] = {}
    for part in parts:
        for entry in part["contexts"]:
            sums = held.setdefault(entry["context"], dict.fromkeys(kinds, 0))
            for kind in kinds:
                sums[kind] += entry[kind]
    contexts = []
    visible = node.contexts.visible("pit") + node.contexts.visible("scroll") + node.contexts.visible("export")
    for ctx in sorted(visible, key=lambda c: c.ctx_id):
        sums = held.get(ctx.ctx_id, dict.fromkeys(kinds, 0))
        entry = {
            "context": ctx.ctx_id,
            "type": ctx.kind,
            "indices": ",".join(ctx.indices),
            "store_size_in_bytes": ctx.store_bytes(),
        }
        contexts.append({**entry, "held_in_bytes": sum(sums.values()), **sums})
    counters = ("lists", "lists_kept", "lists_refused", "windows", *kinds)
    totals = {key: sum(part[key] for part in parts) for key in counters}
    return {
        "open_contexts": node.contexts.open_count(),
        "held_in_bytes": sum(totals[kind] for kind in kinds),
        **totals,
        "limit_in_bytes": int(node.cluster_settings.get(MAX_WALK_MEMORY)),
        "contexts": contexts,
        "exports": node.search_services.exports.stats(),
    }


def nodes_stats(
    node: Node, metric_path: list[str], *, level: str = "node", file_sizes: bool = False
) -> dict[str, Any]:
    """`metric_path` is what follows `/_nodes/stats` (e.g. ["indices", "search"]); `level`:
    node, indices or shards; `file_sizes`: `include_segment_file_sizes`."""
    metric = metric_path[0] if metric_path else "_all"
    index_metrics = tuple(metric_path[1].split(",")) if len(metric_path) > 1 else INDEX_METRICS
    if "_all" in index_metrics:
        index_metrics = INDEX_METRICS
    stats: dict[str, Any] = {**node_header(node.name), "timestamp": int(time.time() * 1000)}
    wanted = set(metric.split(","))
    if wanted & {"_all", "indices"}:
        stats["indices"] = _indices_section(node, index_metrics, level=level, file_sizes=file_sizes)
    if wanted & {"_all", "process"}:
        stats["process"] = _process_section()
    if wanted & {"_all", "http"}:
        stats["http"] = node.http_connections.stats()
    workers = None
    if node.search_workers is not None and wanted & {"_all", "breaker", "search_workers"}:
        workers = node.search_workers.stats()
    if wanted & {"_all", "breaker"}:
        stats["breakers"] = node.breakers.stats(w["breakers"] for w in (workers or {}).get("workers", ()))
    if workers is not None and wanted & {"_all", "search_workers"}:
        # leafsearch's own: the search worker processes and what each holds (a leak shows here).
        stats["search_workers"] = workers
    if wanted & {"_all", "walks"}:
        if workers is None and node.search_workers is not None:
            workers = node.search_workers.stats()
        stats["walks"] = _walks_section(node, [w["walk_memory"] for w in (workers or {}).get("workers", ())])
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
                **node_header(node.name),
                "version": VERSION,
                "build_flavor": "default",
                "build_type": "tar",
                "http": {"bound_address": ["127.0.0.1:9200"], "publish_address": "127.0.0.1:9200"},
                "settings": {"cluster": {"name": node.cluster_name}, "node": {"name": node.name}},
            }
        },
    }
