"""`_cat` (the list), `_cat/indices`, `_cat/health`, `_cat/count`, `_cat/search_contexts`,
`_cat/shards`, `_cat/recovery`, `_cat/segments`, `_cat/nodes`."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from leafsearch.errors import IllegalArgument
from leafsearch.index import shard_listing
from leafsearch.index.shard_listing import CopyListing, ShardListing, ShardMissing
from leafsearch.indices import admin
from leafsearch.rest.cat import Column, render_table
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.node.node import Node

INDICES_COLUMNS = [
    Column("health", "current health status", ("h",)),
    Column("status", "open/close status", ("s",)),
    Column("index", "index name", ("i", "idx")),
    Column("uuid", "index uuid", ("id",)),
    Column("pri", "number of primary shards", ("p", "shards.primary", "shardsPrimary"), right=True),
    Column("rep", "number of replica shards", ("r", "shards.replica", "shardsReplica"), right=True),
    Column("docs.count", "available docs", ("dc", "docsCount"), right=True),
    Column("docs.deleted", "deleted docs", ("dd", "docsDeleted"), right=True),
    Column("creation.date", "index creation date (millisecond value)", ("cd",), right=True, default=False),
    Column("store.size", "store size of primaries & replicas", ("ss", "storeSize"), right=True, size=True),
    Column("pri.store.size", "store size of primaries", (), right=True, size=True),
    Column("dataset.size", "total size of dataset", (), right=True, size=True),
]

HEALTH_COLUMNS = [
    Column("epoch", "seconds since 1970-01-01 00:00:00", ("t", "time"), right=True),
    Column("timestamp", "time in HH:MM:SS", ("ts", "hms", "hhmmss")),
    Column("cluster", "cluster name", ("cl",)),
    Column("status", "health status", ("st",)),
    Column("node.total", "total number of nodes", ("nt", "nodeTotal"), right=True),
    Column("node.data", "number of nodes that can store data", ("nd", "nodeData"), right=True),
    Column("shards", "total number of shards", ("t", "sh", "shards.total", "shardsTotal"), right=True),
    Column("pri", "number of primary shards", ("p", "shards.primary", "shardsPrimary"), right=True),
    Column("relo", "number of relocating nodes", ("r", "shards.relocating", "shardsRelocating"), right=True),
    Column(
        "init", "number of initializing nodes", ("i", "shards.initializing", "shardsInitializing"), right=True
    ),
    Column(
        "unassign", "number of unassigned shards", ("u", "shards.unassigned", "shardsUnassigned"), right=True
    ),
    Column(
        "unassign.pri", "number of unassigned primary shards", ("up", "shards.unassigned.primary"), right=True
    ),
    Column("pending_tasks", "number of pending tasks", ("pt", "pendingTasks"), right=True),
    Column(
        "max_task_wait_time", "wait time of longest task pending", ("mtwt", "maxTaskWaitTime"), right=True
    ),
    Column(
        "active_shards_percent",
        "active number of shards in percent",
        ("asp", "activeShardsPercent"),
        right=True,
    ),
]

COUNT_COLUMNS = [
    Column("epoch", "seconds since 1970-01-01 00:00:00", ("t", "time"), right=True),
    Column("timestamp", "time in HH:MM:SS", ("ts", "hms", "hhmmss")),
    Column("count", "the document count", ("dc", "docs.count", "docsCount"), right=True),
]

SEARCH_CONTEXT_COLUMNS = [
    Column("id", "scroll id or point-in-time id"),
    Column("type", "scroll or pit", ("t",)),
    Column("owner", "who opened it (user:<name> or api_key:<id>), - without authentication", ("o",)),
    Column("indices", "indices the context reads", ("i", "index")),
    Column("age", "time since the context was opened", ("a",)),
    Column("keep_alive", "how long the context lives after its last request", ("ka", "keepAlive")),
    Column("time_left", "time until it expires unless used again", ("tl", "expiresIn")),
    Column("requests", "requests served, its opening included", ("r",), right=True),
    Column("docs", "documents of the segments it pins, deleted ones included", ("d",), right=True),
    Column("segments", "segments it pins", ("seg",), right=True),
]


def _clock() -> dict[str, object]:
    now = int(time.time())
    return {"epoch": now, "timestamp": time.strftime("%H:%M:%S", time.gmtime(now))}


def cat_list(node: Node, req: RestRequest) -> RestResponse:
    """`GET /_cat`: Elasticsearch's cat banner, then every cat endpoint of the route table."""
    from leafsearch.rest.routes import ROUTES  # the table imports these handlers

    paths = [route.path for route in ROUTES if route.path.startswith("/_cat/")]
    return RestResponse(text="=^.^=\n" + "".join(f"{path}\n" for path in paths))


def cat_indices(node: Node, req: RestRequest) -> RestResponse:
    options = req.indices_options(expand_wildcards="all")
    rows = admin.cat_indices_rows(node, req.path_params.get("index"), options)
    health = req.param("health")
    if health is not None:
        wanted = health.lower()  # ClusterHealthStatus.fromString ignores case
        if wanted not in ("green", "yellow", "red"):
            raise IllegalArgument(f"unknown cluster health status [{health}]")
        rows = [r for r in rows if r["health"] == wanted]
    return render_table(req, INDICES_COLUMNS, rows)


def cat_health(node: Node, req: RestRequest) -> RestResponse:
    _, health = admin.cluster_health(node, None, timeout=0.0)
    row = {
        **_clock(),
        "cluster": health["cluster_name"],
        "status": health["status"],
        "node.total": 1,
        "node.data": 1,
        "shards": health["active_shards"],
        "pri": health["active_primary_shards"],
        "relo": 0,
        "init": 0,
        "unassign": health["unassigned_shards"],
        "unassign.pri": 0,
        "pending_tasks": 0,
        "max_task_wait_time": "-",
        "active_shards_percent": f"{health['active_shards_percent_as_number']:.1f}%",
    }
    timestamped = req.flag("ts", True)
    columns = [c for c in HEALTH_COLUMNS if timestamped or c.name not in ("epoch", "timestamp")]
    return render_table(req, columns, [row])


def cat_count(node: Node, req: RestRequest) -> RestResponse:
    indices = admin.indices_of(node, req.indices_options(forbid_closed=True), req.path_params.get("index"))
    row = {**_clock(), "count": sum(index.doc_count() for index in indices)}
    return render_table(req, COUNT_COLUMNS, [row])


def cat_search_contexts(node: Node, req: RestRequest) -> RestResponse:
    """Every open scroll and point in time, oldest first: leaked contexts show up here.

    With authentication on, only a superuser sees every context and their ids (an id is all it
    takes to use a context); anyone else sees the contexts it opened, their ids hidden."""
    rows = [{**row, "owner": row["owner"] or "-"} for row in node.search_contexts()]
    subject = req.subject
    if subject is not None and not subject.superuser:
        rows = [{**row, "id": "-"} for row in rows if row["owner"] == subject.owner_key]
    return render_table(req, SEARCH_CONTEXT_COLUMNS, rows)


TASKS_COLUMNS = [
    Column("id", "id of the task with the node", default=False),
    Column("action", "task action", ("ac",)),
    Column("task_id", "unique task id", ("ti",)),
    Column("parent_task_id", "parent task id", ("pti",)),
    Column("type", "task type", ("ty",)),
    Column("start_time", "start time in ms", ("start",)),
    Column("timestamp", "start time in HH:MM:SS", ("ts", "hms", "hhmmss")),
    Column("running_time_ns", "running time ns", ("time",), default=False),
    Column("running_time", "running time", ("time",)),
    Column("node_id", "unique node id", ("ni",), default=False),
    Column("ip", "ip address", ("i",)),
    Column("port", "bound transport port", ("po",), default=False),
    Column("node", "node name", ("n",)),
    Column("version", "es version", ("v",), default=False),
    Column("x_opaque_id", "X-Opaque-ID header", ("x",), default=False),
]


def cat_tasks(node: Node, req: RestRequest) -> RestResponse:
    """The running tasks the caller may see (as `_tasks` lists them), oldest first, in
    Elasticsearch's `_cat/tasks` columns (`description` with `detailed`)."""
    from leafsearch.rest.human import human_time
    from leafsearch.version import VERSION

    detailed = req.flag("detailed", False)
    columns = [*TASKS_COLUMNS, Column("description", "task action", ("desc",))] if detailed else TASKS_COLUMNS
    tasks = node.tasks.matching(actions=req.param("actions"), parent=req.param("parent_task_id"))
    now_ns = time.monotonic_ns()
    rows = []
    for task in sorted(tasks, key=lambda t: (t.start_millis, t.id)):
        running = now_ns - task.start_ns
        rows.append(
            {
                "id": task.id,
                "action": task.action,
                "task_id": task.task_id,
                "parent_task_id": task.parent.task_id if task.parent is not None else "-",
                "type": "transport",
                "start_time": task.start_millis,
                "timestamp": time.strftime("%H:%M:%S", time.gmtime(task.start_millis / 1000)),
                "running_time_ns": running,
                "running_time": human_time(running),
                "node_id": node.node_id if req.flag("full_id") else node.node_id[:4],
                "ip": "127.0.0.1",
                "port": 9300,
                "node": node.name,
                "version": VERSION,
                "x_opaque_id": "-",
                "description": task.description,
            }
        )
    return render_table(req, columns, rows)


SHARDS_COLUMNS = [
    Column("index", "index name", ("i", "idx")),
    Column("shard", "shard name", ("s", "sh"), right=True),
    Column("prirep", "primary or replica", ("p", "pr", "primaryOrReplica")),
    Column("state", "shard state", ("st",)),
    Column("docs", "number of docs in shard", ("d", "dc"), right=True),
    Column("store", "store size of shard (how much disk it uses)", ("sto",), right=True, size=True),
    Column("dataset", "total size of dataset", (), right=True, size=True),
    Column("ip", "ip of node where it lives"),
    Column("id", "unique id of node where it lives", (), default=False),
    Column("node", "name of node where it lives", ("n",)),
    Column("unassigned.reason", "reason shard became unassigned", ("ur",), default=False),
    Column("seq_no.max", "max sequence number", ("sqm", "maxSeqNo"), right=True, default=False),
    Column("segments.count", "number of segments", ("sc", "segmentsCount"), right=True, default=False),
    Column(
        "indexing.index_total",
        "number of indexing ops",
        ("iito", "indexingIndexTotal"),
        right=True,
        default=False,
    ),
    Column(
        "search.query_total", "total query phase ops", ("sqto", "searchQueryTotal"), right=True, default=False
    ),
]

SEGMENTS_COLUMNS = [
    Column("index", "index name", ("i", "idx")),
    Column("shard", "shard name", ("s", "sh"), right=True),
    Column("prirep", "primary or replica", ("p", "pr", "primaryOrReplica")),
    Column("ip", "ip of node where it lives"),
    Column("id", "unique id of node where it lives", (), default=False),
    Column("segment", "segment name", ("seg",)),
    Column("generation", "segment generation", ("g", "gen"), right=True),
    Column("docs.count", "number of docs in segment", ("dc", "docsCount"), right=True),
    Column("docs.deleted", "number of deleted docs in segment", ("dd", "docsDeleted"), right=True),
    Column("size", "segment size in bytes", ("si",), right=True, size=True),
    Column("size.memory", "segment memory in bytes", ("sm", "sizeMemory"), right=True, size=True),
    Column("committed", "is segment committed", ("ic", "isCommitted")),
    Column("searchable", "is segment searched", ("is", "isSearchable")),
    Column("version", "version", ("v",)),
    Column("compound", "is segment compound", ("ico", "isCompound")),
]

NODES_COLUMNS = [
    Column("id", "unique node id", ("nodeId",), default=False),
    Column("pid", "process id", ("p",), right=True, default=False),
    Column("ip", "ip address", ("i",)),
    Column("port", "bound transport port", ("po",), right=True, default=False),
    Column("http_address", "bound http address", ("http",), default=False),
    Column("version", "es version", ("v",), default=False),
    Column("heap.percent", "used heap ratio", ("hp", "heapPercent"), right=True),
    Column("ram.current", "used machine memory", ("rc", "ramCurrent"), right=True, size=True, default=False),
    Column("ram.percent", "used machine memory ratio", ("rp", "ramPercent"), right=True),
    Column("ram.max", "total machine memory", ("rm", "ramMax"), right=True, size=True, default=False),
    Column("cpu", "recent cpu usage", (), right=True),
    Column("load_1m", "1m load avg", ("l",), right=True),
    Column("load_5m", "5m load avg", ("l",), right=True),
    Column("load_15m", "15m load avg", ("l",), right=True),
    Column("uptime", "node uptime", ("u",), right=True, default=False),
    Column("node.role", "node roles", ("r", "role", "nodeRole")),
    Column("master", "*:current master", ("m",)),
    Column("name", "node name", ("n",)),
    Column("docs.count", "documents on the node", ("dc", "docsCount"), right=True, default=False),
    Column("segments.count", "number of segments", ("sc", "segmentsCount"), right=True, default=False),
    Column(
        "search.open_contexts",
        "open search contexts",
        ("so", "searchOpenContexts"),
        right=True,
        default=False,
    ),
]


def _segment_generation(name: str) -> int:
    return int(name.rpartition("_")[2])


def _where(node: Node, listing: ShardListing) -> dict[str, str]:
    """The node columns of a shard's rows: this node, or the Ray node its actor runs on."""
    if listing.node is None:
        return {"ip": "127.0.0.1", "id": node.node_id, "node": node.name}
    node_id, ip = listing.node
    return {"ip": ip, "id": node_id, "node": node_id}


def cat_shards(node: Node, req: RestRequest) -> RestResponse:
    """Every shard copy: a Ray-backed index's as its machines answer (primary and replicas,
    STARTED, INITIALIZING or UNASSIGNED with the reason, ray_backend/remote.py); this node's own
    indices' primaries, and their replicas unassigned (no other node holds a copy)."""
    rows = []
    for index in admin.indices_of(
        node, req.indices_options(expand_wildcards="all"), req.path_params.get("index")
    ):
        if index.remote is not None and not index.closed:
            for copy in index.remote.copies(listed=True):
                rows.append(_copy_row(node, index, copy))
            continue
        replicas = int(index.setting("index.number_of_replicas"))
        found = [None] * index.num_shards if index.closed else shard_listing.listings(index)
        for shard_id, listing in enumerate(found):
            if isinstance(listing, ShardMissing):
                reason = "NODE_LEFT" if listing.node_left else "ALLOCATION_FAILED"
                rows.append(_copy_row(node, index, CopyListing(shard_id, True, "UNASSIGNED", reason=reason)))
            elif listing is None:  # a closed index's shards, where they were
                row = {"index": index.name, "shard": shard_id, "prirep": "p", "state": "STARTED"}
                rows.append(row | {"ip": "127.0.0.1", "id": node.node_id, "node": node.name})
            else:
                rows.append(_copy_row(node, index, CopyListing(shard_id, True, "STARTED", listing)))
            rows.extend(
                _copy_row(node, index, CopyListing(shard_id, False, "UNASSIGNED", reason="INDEX_CREATED"))
                for _ in range(replicas)
            )
    return render_table(req, SHARDS_COLUMNS, rows)


def _copy_row(node: Node, index: Index, copy: CopyListing) -> dict[str, Any]:
    row: dict[str, Any] = {
        "index": index.name,
        "shard": copy.shard_id,
        "prirep": "p" if copy.primary else "r",
        "state": copy.state,
    }
    if copy.reason is not None:
        row["unassigned.reason"] = copy.reason
    listing = copy.listing
    if listing is None:
        return row
    return row | {
        "docs": listing.docs,
        "store": listing.store_bytes,
        "dataset": listing.store_bytes,
        **_where(node, listing),
        "seq_no.max": listing.max_seq_no,
        "segments.count": listing.segment_count,
        "indexing.index_total": listing.index_total,
        "search.query_total": index.shards[copy.shard_id].search_stats.snapshot()["query_total"]
        if copy.primary
        else 0,
    }


RECOVERY_COLUMNS = [
    Column("index", "index name", ("i", "idx")),
    Column("shard", "shard name", ("s", "sh"), right=True),
    Column("start_time", "recovery start time", ("start",), default=False),
    Column(
        "start_time_millis", "recovery start time in epoch milliseconds", ("start_millis",), default=False
    ),
    Column("stop_time", "recovery stop time", ("stop",), default=False),
    Column("stop_time_millis", "recovery stop time in epoch milliseconds", ("stop_millis",), default=False),
    Column("time", "recovery time", ("t", "ti"), right=True),
    Column("type", "recovery type", ("ty",)),
    Column("stage", "recovery stage", ("st",)),
    Column("source_host", "source host", ("shost",)),
    Column("source_node", "source node name", ("snode",)),
    Column("target_host", "target host", ("thost",)),
    Column("target_node", "target node name", ("tnode",)),
    Column("repository", "repository", ("rep",)),
    Column("snapshot", "snapshot", ("snap",)),
    Column("files", "number of files to recover", ("f",), right=True),
    Column("files_recovered", "files recovered", ("fr",), right=True),
    Column("files_percent", "percent of files recovered", ("fp",), right=True),
    Column("files_total", "total number of files", ("tf",), right=True),
    Column("bytes", "number of bytes to recover", ("b",), right=True),
    Column("bytes_recovered", "bytes recovered", ("br",), right=True),
    Column("bytes_percent", "percent of bytes recovered", ("bp",), right=True),
    Column("bytes_total", "total number of bytes", ("tb",), right=True),
    Column("translog_ops", "number of translog ops to recover", ("to",), right=True),
    Column("translog_ops_recovered", "translog ops recovered", ("tor",), right=True),
    Column("translog_ops_percent", "percent of translog ops recovered", ("top",), right=True),
]


def cat_recovery(node: Node, req: RestRequest) -> RestResponse:
    """Every shard copy's recovery: a primary opened from its own folder (`existing_store`,
    done), and each replica of a Ray-backed index recovered from its primary (`peer`: files,
    then the operations sent meanwhile; ray_backend/remote.py `RemoteIndex.recover`), the last
    one of each copy. `active_only`: those not done."""
    from leafsearch.rest.human import human_time

    active_only = req.flag("active_only")
    rows = []
    for index in admin.indices_of(
        node, req.indices_options(expand_wildcards="all"), req.path_params.get("index")
    ):
        if index.closed:
            continue
        recoveries = index.remote.recoveries if index.remote is not None else {}
        ours = sorted(recoveries.values(), key=lambda r: r["shard"])
        started = index.creation_date
        for shard_id in range(index.num_shards):
            local = {"shard": shard_id, "type": "existing_store", "stage": "done", "start": started / 1000}
            for recovery in [local | {"stop": started / 1000}, *(r for r in ours if r["shard"] == shard_id)]:
                if active_only and recovery["stage"] == "done":
                    continue
                stop = recovery["stop"]
                took = (stop if stop is not None else time.time()) - recovery["start"]
                files, size, ops = (recovery.get(k, 0) for k in ("files", "bytes", "ops"))
                finished = recovery["stage"] == "done"
                rows.append(
                    {
                        "index": index.name,
                        "shard": shard_id,
                        "start_time": _iso(recovery["start"]),
                        "start_time_millis": int(recovery["start"] * 1000),
                        "stop_time": _iso(stop) if stop is not None else None,
                        "stop_time_millis": int(stop * 1000) if stop is not None else None,
                        "time": human_time(int(took * 1e9)),
                        "type": recovery["type"],
                        "stage": recovery["stage"],
                        "source_host": recovery.get("source_node", "n/a"),
                        "source_node": recovery.get("source_node", "n/a"),
                        "target_host": recovery.get("target_node", node.name),
                        "target_node": recovery.get("target_node", node.name),
                        "repository": "n/a",
                        "snapshot": "n/a",
                        "files": files,
                        "files_recovered": files if finished else 0,
                        "files_percent": "100.0%" if finished or not files else "0.0%",
                        "files_total": files,
                        "bytes": size,
                        "bytes_recovered": size if finished else 0,
                        "bytes_percent": "100.0%" if finished or not size else "0.0%",
                        "bytes_total": size,
                        "translog_ops": ops,
                        "translog_ops_recovered": ops if finished else 0,
                        "translog_ops_percent": "100.0%" if finished or not ops else "0.0%",
                    }
                )
    return render_table(req, RECOVERY_COLUMNS, rows)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cat_segments(node: Node, req: RestRequest) -> RestResponse:
    """The segments each shard's current snapshot reads (all committed: a refresh commits); a
    shard whose actor is down has none to list."""
    from leafsearch.version import LUCENE_VERSION

    rows = []
    for index in admin.indices_of(
        node, req.indices_options(forbid_closed=True), req.path_params.get("index")
    ):
        for listing in shard_listing.listings(index):
            if isinstance(listing, ShardMissing):
                continue
            where = _where(node, listing)
            for seg in listing.segments:
                rows.append(
                    {
                        "index": index.name,
                        "shard": listing.shard_id,
                        "prirep": "p",
                        "ip": where["ip"],
                        "id": where["id"],
                        "segment": seg.name,
                        "generation": _segment_generation(seg.name),
                        "docs.count": seg.live_count,
                        "docs.deleted": seg.max_doc - seg.live_count,
                        "size": seg.size_bytes,
                        "size.memory": seg.memory_bytes,
                        "committed": True,
                        "searchable": True,
                        "version": LUCENE_VERSION,
                        "compound": False,
                    }
                )
    return render_table(req, SEGMENTS_COLUMNS, rows)


def cat_nodes(node: Node, req: RestRequest) -> RestResponse:
    """The one node: memory against what the process may use, load, roles (`dim`), master `*`."""
    from leafsearch.services import memory
    from leafsearch.version import VERSION

    limit = memory.machine_memory()
    rss = memory.anonymous_rss()
    ram_total, ram_used = _machine_ram()
    load = os.getloadavg()
    shards = [shard for index in list(node.indices.values()) for shard in list(index.shards)]
    row = {
        "id": node.node_id if req.flag("full_id") else node.node_id[:4],
        "pid": os.getpid(),
        "ip": "127.0.0.1",
        "port": 9300,
        "http_address": "127.0.0.1:9200",
        "version": VERSION,
        "heap.percent": round(100 * rss / limit) if limit else 0,
        "ram.current": ram_used,
        "ram.percent": round(100 * ram_used / ram_total) if ram_total else 0,
        "ram.max": ram_total,
        "cpu": round(min(100.0, 100 * load[0] / (os.cpu_count() or 1))),
        "load_1m": f"{load[0]:.2f}",
        "load_5m": f"{load[1]:.2f}",
        "load_15m": f"{load[2]:.2f}",
        "uptime": f"{int(time.monotonic() - node.started)}s",
        "node.role": "dim",
        "master": "*",
        "name": node.name,
        "docs.count": sum(shard.doc_count() for shard in shards),
        "segments.count": sum(shard.segment_count() for shard in shards),
        "search.open_contexts": node.contexts.open_count(),
    }
    return render_table(req, NODES_COLUMNS, [row])


def _machine_ram() -> tuple[int, int]:
    """(total, used) bytes of the machine's memory, from /proc/meminfo (zeros elsewhere)."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    total = fields.get("MemTotal", 0)
    return total, total - fields.get("MemAvailable", total)
