"""`_cat` (the list), `_cat/indices`, `_cat/health`, `_cat/count`, `_cat/search_contexts`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from leafsearch import admin
from leafsearch.rest.cat import Column, render_table
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.node import Node

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
        rows = [r for r in rows if r["health"] == health]
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
    indices = req.indices_options().resolve(node, req.path_params.get("index"))
    row = {**_clock(), "count": sum(index.doc_count() for index in indices)}
    return render_table(req, COUNT_COLUMNS, [row])


def cat_search_contexts(node: Node, req: RestRequest) -> RestResponse:
    """Every open scroll and point in time, oldest first: leaked contexts show up here.

    With authentication on, only a superuser sees every context and their ids (an id is all it
    takes to use a context); anyone else sees the contexts it opened, their ids hidden."""
    rows = node.search_contexts()
    subject = req.subject
    if subject is not None and not subject.superuser:
        rows = [{**row, "id": "-"} for row in rows if row["owner"] == subject.owner_key]
    return render_table(req, SEARCH_CONTEXT_COLUMNS, rows)
