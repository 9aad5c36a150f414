"""Reader-context APIs: point in time (open, search, close) and scroll (open, next batch, clear).

Both hold shard snapshots in a context (contexts.py); these functions are what the Node exposes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ActionRequestValidation
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import phases
from leafsearch.search.hitlist import HitList

if TYPE_CHECKING:
    from leafsearch.node import Node


def search_pit(node: Node, request: SearchRequest, started: float) -> dict[str, Any]:
    assert request.pit is not None
    ctx = node.contexts.get(request.pit.id, "pit")
    keep_alive = (
        node.contexts.keep_alive_seconds(request.pit.keep_alive, "keep_alive")
        if request.pit.keep_alive
        else None
    )
    node.contexts.touch(ctx, keep_alive, extend_only=True)
    phases.with_tiebreaker(request)
    phases.check_limits(request, ctx.targets)
    hitlist, tree = phases.query_phase(node, ctx.targets, request, aggs=True)
    start, end = phases.page_bounds(hitlist, request)
    return phases.response(
        node, hitlist, request, start, end, started, agg_tree=tree, extra={"pit_id": ctx.public_id}
    )


def first_scroll_page(node: Node, ctx, request: SearchRequest, started: float) -> dict[str, Any]:
    request.track_total_hits = True
    try:
        hitlist, tree = phases.query_phase(node, ctx.targets, request, aggs=True)
    except Exception:
        node.contexts.free(ctx)
        raise
    ctx.request = request
    ctx.hitlist = hitlist
    ctx.requests = 1
    end = min(request.size, len(hitlist))
    ctx.position = end
    return phases.response(
        node, hitlist, request, 0, end, started, agg_tree=tree, extra={"_scroll_id": ctx.public_id}
    )


def scroll(node: Node, scroll_id: str, keep_alive: str | None) -> dict[str, Any]:
    started = time.perf_counter()
    ctx = node.contexts.get(scroll_id, "scroll")
    seconds = node.contexts.keep_alive_seconds(keep_alive, "scroll") if keep_alive else None
    with ctx.lock:
        node.contexts.touch(ctx, seconds, extend_only=False)
        hitlist: HitList = ctx.hitlist
        request: SearchRequest = ctx.request
        start = ctx.position
        end = min(start + request.size, len(hitlist))
        ctx.position = end
        body = phases.response(
            node, hitlist, request, start, end, started, agg_tree=None, extra={"_scroll_id": ctx.public_id}
        )
    if keep_alive is None:
        node.contexts.free(ctx, "freed by a scroll request without [scroll]")
    return body


def clear_scroll(node: Node, scroll_ids: list[str]) -> dict[str, Any]:
    if scroll_ids == ["_all"]:
        freed = node.contexts.free_all("scroll")
    else:
        freed = sum(1 for sid in scroll_ids if node.contexts.free_id(sid, "scroll"))
    # Nothing freed is answered 404 by the REST layer, with this same body (as Elasticsearch).
    return {"succeeded": True, "num_freed": freed}


def open_pit(node: Node, index_expr: str, keep_alive: str | None, params: dict[str, str]) -> dict[str, Any]:
    if not keep_alive:
        raise ActionRequestValidation("[keep_alive] is not specified")
    seconds = node.contexts.keep_alive_seconds(keep_alive, "keep_alive")
    targets = phases.resolve_targets(node, index_expr, params)
    ctx = node.contexts.open("pit", targets, seconds)
    n = len(targets)
    return {"id": ctx.public_id, "_shards": {"total": n, "successful": n, "skipped": 0, "failed": 0}}


def close_pit(node: Node, pit_id: str) -> dict[str, Any]:
    freed = 1 if node.contexts.free_id(pit_id, "pit") else 0
    return {"succeeded": True, "num_freed": freed}
