"""`GET /_stats`, `/<index>/_stats[/<metric>]`: Elasticsearch's CommonStats per shard, summed.

Every figure comes from the shard that counts it (`index/shard_stats.py`, the shard's
`SearchStats`, its translog, its Searcher and files), so one function renders a shard's stats and
`_stats` (per shard, per index, `_all`) and `_nodes/stats` (the node's `indices` section) only sum
them (`request_cache` and `fielddata` are the node's, per shard). Sections leafsearch has no
counterpart for (the query cache, completion, warmers, recoveries between nodes, dense vectors)
are there with Elasticsearch's names and zeros, as a node
without those caches reports them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ActionRequestValidation, ShardUnavailable
from leafsearch.index import shard_listing
from leafsearch.index.shard import Shard, file_sizes
from leafsearch.index.shard_listing import ShardListing
from leafsearch.index.shard_stats import ShardStats, sections
from leafsearch.indices import admin
from leafsearch.indices.admin import index_health, shards_header
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.search.stats import SearchStats

if TYPE_CHECKING:
    from leafsearch.index.searcher import SegmentView
    from leafsearch.index.shard import Shard
    from leafsearch.indices.owner import IndicesOwner

#: The metrics `_stats/<metric>` accepts, in Elasticsearch's rendering order (`merge` renders
#: `merges`, `shard_stats` before `store`).
METRICS = (
    "docs",
    "shard_stats",
    "store",
    "indexing",
    "get",
    "search",
    "merge",
    "refresh",
    "flush",
    "warmer",
    "query_cache",
    "fielddata",
    "completion",
    "segments",
    "translog",
    "request_cache",
    "recovery",
    "bulk",
    "dense_vector",
)
_SECTION = {"merge": "merges"}
LEVELS = ("cluster", "indices", "shards")

_ZEROS: dict[str, dict[str, Any]] = {
    "warmer": {"current": 0, "total": 0, "total_time_in_millis": 0},
    "query_cache": {
        "memory_size_in_bytes": 0,
        "total_count": 0,
        "hit_count": 0,
        "miss_count": 0,
        "cache_size": 0,
        "cache_count": 0,
        "evictions": 0,
    },
    "fielddata": {"memory_size_in_bytes": 0, "evictions": 0, "global_ordinals": {"build_time_in_millis": 0}},
    "completion": {"size_in_bytes": 0},
    "request_cache": {"memory_size_in_bytes": 0, "evictions": 0, "hit_count": 0, "miss_count": 0},
    "recovery": {"current_as_source": 0, "current_as_target": 0, "throttle_time_in_millis": 0},
    "dense_vector": {"value_count": 0},
}


def _file_sizes(views: list[SegmentView]) -> dict[str, dict[str, Any]]:
    """Bytes of the snapshot's segment files by extension (`include_segment_file_sizes`)."""
    sizes: dict[str, int] = defaultdict(int)
    for view in views:
        for name, size in file_sizes(view.segment.folder):
            sizes[name.rpartition(".")[2]] += size
    return {
        ext: {"size_in_bytes": size, "description": f"{ext} files"} for ext, size in sorted(sizes.items())
    }


def _segments(shard: Shard | None, include_file_sizes: bool) -> dict[str, Any]:
    views = shard.published_views() if shard is not None else []
    # In memory: the live-docs arrays of the snapshot and the unrefreshed buffer's sources;
    # segment columns are memory-mapped files (counted by the page cache, not here).
    live_bytes = sum(v.live.nbytes for v in views if v.live is not None)
    return {
        "count": len(views),
        "memory_in_bytes": live_bytes,
        "terms_memory_in_bytes": 0,
        "stored_fields_memory_in_bytes": 0,
        "term_vectors_memory_in_bytes": 0,
        "norms_memory_in_bytes": 0,
        "points_memory_in_bytes": 0,
        "doc_values_memory_in_bytes": 0,
        "index_writer_memory_in_bytes": shard.buffer.source_bytes if shard is not None else 0,
        "version_map_memory_in_bytes": 0,
        "fixed_bit_set_memory_in_bytes": 0,
        "max_unsafe_auto_id_timestamp": -1,
        "file_sizes": _file_sizes(views) if include_file_sizes else {},
    }


def shard_stats(
    shard: Shard | None, metrics: Iterable[str], *, open_contexts: int = 0, file_sizes: bool = False
) -> dict[str, Any]:
    """One shard's CommonStats, the sections of `metrics` in Elasticsearch's order; None: the
    zeros of a node without shards. A shard actor (ray_backend/) computes its own with this
    function and the coordinator adds its search counters."""
    if shard is not None and not isinstance(shard, Shard):
        return shard.stats_sections(tuple(metrics), open_contexts=open_contexts, file_sizes=file_sizes)
    wanted = set(metrics)
    counted = sections((shard.stats if shard is not None else ShardStats()).snapshot())
    docs = deleted = size = 0
    if shard is not None:
        docs, deleted, size = shard.lucene_doc_count(), shard.deleted_count(), shard.store_size_bytes()
    out: dict[str, Any] = {}
    for metric in METRICS:
        if metric not in wanted:
            continue
        name = _SECTION.get(metric, metric)
        if metric == "docs":
            out[name] = {"count": docs, "deleted": deleted, "total_size_in_bytes": size}
        elif metric == "shard_stats":
            out[name] = {"total_count": int(shard is not None)}
        elif metric == "store":
            out[name] = {"size_in_bytes": size, "total_data_set_size_in_bytes": size, "reserved_in_bytes": 0}
            # leafsearch's: the part of it only open PITs and scrolls hold (index/pins.py)
            out[name]["contexts_size_in_bytes"] = shard.pinned_store_bytes() if shard is not None else 0
        elif metric == "search":
            searches = shard.search_stats if shard is not None else SearchStats()
            out[name] = {"open_contexts": open_contexts, **searches.snapshot()}
        elif metric == "segments":
            out[name] = _segments(shard, file_sizes)
        elif metric == "translog":
            out[name] = (
                shard.translog.stats() if shard is not None and not shard.closed else _empty_translog()
            )
        elif metric in _ZEROS:
            out[name] = _copy(_ZEROS[metric])
        else:
            out[name] = counted[name]
    return out


def _with_request_cache(
    node: IndicesOwner, index: Any, shard: Any, stats: dict[str, Any], fielddata: dict[str, int]
) -> dict[str, Any]:
    """A shard's stats with its `request_cache` section: the node's cache counts per shard
    (search/request_cache.py), wherever the shard itself lives; and its `fielddata` memory, what
    the node's processes hold of its segments (`fielddata`: `fielddata_memory()`, by folder)."""
    if "request_cache" in stats:
        stats["request_cache"] = node.request_cache.shard_stats(index.uuid, shard.shard_id)
    if "fielddata" in stats:
        stats["fielddata"]["memory_size_in_bytes"] = fielddata.get(str(getattr(shard, "folder", "")), 0)
    return stats


def _empty_translog() -> dict[str, int]:
    return {
        "operations": 0,
        "size_in_bytes": 0,
        "uncommitted_operations": 0,
        "uncommitted_size_in_bytes": 0,
        "earliest_last_modified_age": 0,
    }


def _copy(section: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in section.items()}


def add_stats(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Sum two stats trees: numbers add (`max_*` take the larger), flags keep the first value."""
    for key, value in more.items():
        if key not in total:
            total[key] = _copy(value) if isinstance(value, dict) else value
        elif isinstance(value, dict):
            add_stats(total[key], value)
        elif key.startswith("max_"):
            total[key] = max(total[key], value)
        elif isinstance(value, int) and not isinstance(value, bool):
            total[key] += value
    if "bulk" in total:  # averages are recomputed, never summed
        bulk = total["bulk"]
        ops = bulk["total_operations"]
        bulk["avg_time_in_millis"] = bulk["total_time_in_millis"] // ops if ops else 0
        bulk["avg_size_in_bytes"] = bulk["total_size_in_bytes"] // ops if ops else 0
    return total


def _shard_entry(node: IndicesOwner, listing: ShardListing, stats: dict[str, Any]) -> dict[str, Any]:
    """A shard's entry at `level=shards`: its routing (this node, or the Ray node of its actor),
    commit and sequence numbers, then its stats."""
    where = node.node_id if listing.node is None else listing.node[0]
    return {
        "routing": {"state": "STARTED", "primary": True, "node": where, "relocating_node": None},
        **stats,
        "commit": {"generation": listing.flush_total, "num_docs": listing.docs},
        "seq_no": {
            "max_seq_no": listing.max_seq_no,
            "local_checkpoint": listing.max_seq_no,
            "global_checkpoint": listing.max_seq_no,
        },
        "shard_path": {
            "state_path": str(node.path),
            "data_path": str(node.path),
            "is_custom_data_path": False,
        },
    }


def indices_stats(
    node: IndicesOwner,
    expr: str | None,
    options: IndicesOptions,
    metrics: tuple[str, ...],
    *,
    level: str = "indices",
    file_sizes: bool = False,
) -> dict[str, Any]:
    if level not in LEVELS:
        raise ActionRequestValidation(
            f"level parameter must be one of [cluster] or [indices] or [shards] but was [{level}]"
        )
    targets = admin.indices_of(node, options, expr)
    contexts = node.contexts.open_per_shard()
    fielddata = node.fielddata_memory() if "fielddata" in metrics else {}
    primaries: dict[str, Any] = {}
    per_index: dict[str, Any] = {}
    unavailable = 0
    for index in targets:
        index_total: dict[str, Any] = {}
        shards: dict[str, list[dict[str, Any]]] = {}
        listed = {}
        if level == "shards":
            listed = {listing.shard_id: listing for listing in shard_listing.listings(index)}
        down = 0
        for shard in list(index.shards):
            try:
                stats = _with_request_cache(
                    node,
                    index,
                    shard,
                    shard_stats(
                        shard, metrics, open_contexts=contexts.get(id(shard), 0), file_sizes=file_sizes
                    ),
                    fielddata,
                )
            except ShardUnavailable:  # a shard actor down: an unassigned primary, not counted
                down += 1
                continue
            add_stats(index_total, stats)
            listing = listed.get(shard.shard_id)
            if isinstance(listing, ShardListing):
                shards[str(shard.shard_id)] = [_shard_entry(node, listing, stats)]
        add_stats(primaries, index_total)
        entry: dict[str, Any] = {
            "uuid": index.uuid,
            "health": index_health(index, down or None),
            "status": "close" if index.closed else "open",
            "primaries": index_total,
            "total": _copy(index_total),
        }
        if level == "shards":
            entry["shards"] = shards
        per_index[index.name] = entry
        unavailable += down
    header = shards_header(targets)
    header["successful"] -= unavailable  # as Elasticsearch counts an unassigned primary: not failed
    body: dict[str, Any] = {
        "_shards": header,
        "_all": {"primaries": primaries, "total": _copy(primaries)},
    }
    if level != "cluster":
        body["indices"] = per_index
    return body


def node_indices_stats(
    node: IndicesOwner, metrics: Iterable[str], *, level: str = "node", file_sizes: bool = False
) -> dict[str, Any]:
    """Every shard of the node summed (`indices` of `_nodes/stats`); `search` is the node's own
    counters (each request once, deleted indices' included). `level=indices` adds each index's
    sum under `indices`, `level=shards` each shard's stats under `shards`."""
    metrics = tuple(metrics)
    total: dict[str, Any] = {}
    by_index: dict[str, Any] = {}
    by_shard: dict[str, list[dict[str, Any]]] = {}
    contexts = node.contexts.open_per_shard()
    fielddata = node.fielddata_memory() if "fielddata" in metrics else {}
    for index in list(node.indices.values()):
        index_total: dict[str, Any] = {}
        for shard in list(index.shards):
            own = shard_stats(shard, metrics, open_contexts=contexts.get(id(shard), 0), file_sizes=file_sizes)
            stats = _with_request_cache(node, index, shard, own, fielddata)
            add_stats(index_total, stats)
            by_shard.setdefault(index.name, []).append({str(shard.shard_id): stats})
        add_stats(total, index_total)
        if not index.closed:
            by_index[index.name] = index_total
    if not total:  # no shard: every section with its zeros
        total = shard_stats(None, metrics)
    if "search" in total:
        total["search"] = {"open_contexts": node.contexts.open_count(), **node.search_stats.snapshot()}
    if level == "indices":
        total["indices"] = by_index
    elif level == "shards":
        total["shards"] = by_shard
    return total
