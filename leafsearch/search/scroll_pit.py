"""Reader-context APIs: point in time (open, search, close) and scroll (open, next batch, clear).

Both hold shard snapshots in a context (contexts.py); these functions are what the Node exposes.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from leafsearch.admin import IndicesOptions
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    SearchContextMissing,
    SearchPhaseExecution,
)
from leafsearch.request.search_types import DOC, SearchRequest
from leafsearch.search import phases, slicing
from leafsearch.search.contexts import ReaderContext
from leafsearch.search.fetch_phase import render_hits, renders_raw
from leafsearch.search.hitlist import HitList, LiveDocs
from leafsearch.search.sort_keys import SortColumn
from leafsearch.search.targets import Target, release_targets

if TYPE_CHECKING:
    from leafsearch.node import Node


def search_pit(
    node: Node,
    request: SearchRequest,
    started: float,
    *,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
) -> dict[str, Any]:
    """A search on a PIT's snapshots. The PIT is in use meanwhile (a close waits for the search);
    its keep-alive becomes the larger of the old and the requested one, counted from the end of
    this search, as Elasticsearch's ReaderContext does."""
    assert request.pit is not None
    ctx = _acquire(node, request.pit.id, "pit")
    keep_alive = None
    try:
        if request.pit.keep_alive:
            try:
                requested = node.contexts.keep_alive_seconds(request.pit.keep_alive, "keep_alive")
            except ElasticError as exc:  # checked by each shard in Elasticsearch
                raise SearchPhaseExecution(exc) from None
            keep_alive = max(ctx.keep_alive, requested)
        phases.check_limits(request, ctx.targets)
        hitlist, tree = phases.query_phase(node, ctx.targets, request, aggs=True, cancelled=cancelled)
        start, end = phases.page_bounds(hitlist, request)
        read_ahead = raw_hits and not hitlist.window and renders_raw(request)
        served = _pit_page_key(hitlist, request, start, end)
        ready = node.contexts.read_ahead.take(ctx.ctx_id, served, hitlist) if read_ahead else None
        body = phases.response(
            node,
            hitlist,
            request,
            start,
            end,
            started,
            agg_tree=tree,
            extra={"pit_id": ctx.public_id},
            raw_hits=raw_hits,
            ready=ready,
        )
        if read_ahead and end - start == request.size and end < len(hitlist):
            # The walk's next page: `search_after` the last hit (or `from` the end) starts here.
            following = min(end + request.size, len(hitlist))
            node.contexts.read_ahead.continue_walk(
                ctx.ctx_id,
                served,
                _pit_page_key(hitlist, request, end, following),
                hitlist,
                ctx.targets,
                lambda: render_hits(hitlist, end, following, request, raw_hits=True),
            )
        return body
    finally:
        node.contexts.release(ctx, keep_alive)


def _pit_page_key(hitlist: HitList, request: SearchRequest, start: int, end: int) -> tuple:
    """What makes two plain PIT pages the same bytes: the hit list (by identity), the range, and
    the request options a plain page's rendering reads."""
    return ("pit", id(hitlist), start, end, request.source.fetch, request.track_scores)


def _walks_docs(request: SearchRequest) -> bool:
    """Whether a scroll walks every document (or a slice's) in `_doc` order: no sort is needed.

    Such a scroll (SPEC 4.1 r12, the fastest export) reads the snapshots' live documents in
    (shard, doc) order; its batches are ranges of them, located by binary search, so opening it
    costs no O(matches) work and each batch costs only its own documents.
    """
    return request.plain_walk(DOC) and not request.sort[0].descending


def open_scroll(
    node: Node,
    targets: list[Target],
    request: SearchRequest,
    started: float,
    *,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
) -> dict[str, Any]:
    """`?scroll=` on a search: a context owning `targets` (released with it) and the first batch.

    Refusals at this point (keep-alive too long, too many open scrolls, a failing query) are shard
    failures in Elasticsearch, reported as such with the cause's status.
    """
    try:
        keep_alive = node.contexts.keep_alive_seconds(request.scroll, "scroll")
        ctx = node.contexts.open("scroll", targets, keep_alive, in_use=True)
    except ElasticError as exc:
        release_targets(targets)
        raise SearchPhaseExecution(exc) from None
    request.track_total_hits = True
    try:
        if _walks_docs(request) and not any(t.alias_filter for t in targets):
            with node.search_stats.phase("query", targets):
                selected = slicing.scroll_selection(request.slice, targets) if request.slice else None
                ctx.matches = LiveDocs(targets, selected)
            tree = None
        else:
            ctx.matches, tree = phases.query_phase(node, targets, request, aggs=True, cancelled=cancelled)
        ctx.request = request
        page, start, end = _next_batch(ctx)
        return phases.response(
            node,
            page,
            request,
            start,
            end,
            started,
            agg_tree=tree,
            extra={"_scroll_id": ctx.public_id},
            raw_hits=raw_hits,
        )
    except BaseException:
        node.contexts.free(ctx, "freed because its first batch failed")
        raise
    finally:
        node.contexts.release(ctx)


def _next_batch(ctx: ReaderContext) -> tuple[HitList, int, int]:
    """The next batch of a scroll as (hit list, start, end), advancing the context's position."""
    page, start, end, ctx.position = _batch_at(ctx, ctx.position)
    return page, start, end


def _batch_at(ctx: ReaderContext, position: int) -> tuple[HitList, int, int, int]:
    """The scroll batch that starts at `position`: (hit list, start, end, the next position)."""
    matches = ctx.matches
    request: SearchRequest = ctx.request
    if isinstance(matches, LiveDocs):
        end = min(position + request.size, matches.total)
        target_arr, doc_arr = matches.take(position, end)
        column = SortColumn(request.sort[0], "doc", doc_arr, None)
        page = HitList(ctx.targets, target_arr, doc_arr, None, [column], [], matches.total, None, window=True)
        return page, 0, end - position, end
    end = min(position + request.size, len(matches))
    return matches, position, end, end


def _read_ahead_batch(node: Node, ctx: ReaderContext, served: int) -> None:
    """After serving the batch at position `served`: the next one, rendered in the background
    (the caller holds the context's lock)."""
    total = ctx.matches.total if isinstance(ctx.matches, LiveDocs) else len(ctx.matches)
    position = ctx.position
    if position >= total:
        return

    def render() -> Any:
        page, start, end, _ = _batch_at(ctx, position)
        return render_hits(page, start, end, ctx.request, raw_hits=True)

    node.contexts.read_ahead.continue_walk(
        ctx.ctx_id, ("scroll", served), ("scroll", position), ctx, ctx.targets, render
    )


def _acquire(node: Node, context_id: str, kind: str) -> ReaderContext:
    """A PIT or scroll context, in use until released; a missing one fails the search phase."""
    try:
        return node.contexts.acquire(context_id, kind)
    except SearchContextMissing as exc:
        raise SearchPhaseExecution(exc) from None


def scroll(node: Node, scroll_id: str, keep_alive: str | None, *, raw_hits: bool = False) -> dict[str, Any]:
    """The next batch. `keep_alive` resets the expiry; without it the context is freed (SPEC 3.1).

    An exhausted scroll keeps answering empty batches until it is cleared or expires.
    """
    started = time.perf_counter()
    if node.contexts.decode_id(scroll_id, "scroll") is None:
        raise IllegalArgument("Cannot parse scroll id")
    ctx = _acquire(node, scroll_id, "scroll")
    seconds = None
    try:
        if keep_alive is not None:
            try:
                seconds = node.contexts.keep_alive_seconds(keep_alive, "scroll")
            except ElasticError as exc:
                # As Elasticsearch: a scroll whose next request is refused this way is freed.
                node.contexts.free(ctx, "freed after a refused keep-alive")
                raise SearchPhaseExecution(exc) from None
        with ctx.lock:
            # Only a walk that goes on is read ahead: a request without `scroll` frees the context.
            read_ahead = raw_hits and keep_alive is not None and renders_raw(ctx.request)
            served = ctx.position
            ready = node.contexts.read_ahead.take(ctx.ctx_id, ("scroll", served), ctx) if read_ahead else None
            with node.search_stats.phase("query", ctx.targets):
                page, start, end = _next_batch(ctx)
            body = phases.response(
                node,
                page,
                ctx.request,
                start,
                end,
                started,
                agg_tree=None,
                extra={"_scroll_id": ctx.public_id},
                raw_hits=raw_hits,
                ready=ready,
            )
            if read_ahead:
                _read_ahead_batch(node, ctx, served)
    finally:
        node.contexts.release(ctx, seconds)
    if keep_alive is None:
        node.contexts.free(ctx, "freed by a scroll request without [scroll]")
    return body


def clear_scroll(node: Node, scroll_ids: list[str]) -> dict[str, Any]:
    """Free scroll contexts by id (or `_all`). Nothing freed is answered 404 by the REST layer,
    with this same body, as in Elasticsearch; an id that is no scroll id at all is refused."""
    if scroll_ids == ["_all"]:
        freed = node.contexts.free_all("scroll")
    else:
        if any(node.contexts.decode_id(sid, "scroll") is None for sid in scroll_ids):
            raise IllegalArgument("Cannot parse scroll id")
        freed = sum(1 for sid in scroll_ids if node.contexts.free_id(sid, "scroll"))
    return {"succeeded": True, "num_freed": freed}


def open_pit(
    node: Node,
    index_expr: str,
    keep_alive: str | None,
    options: IndicesOptions | None = None,
    routing: str | None = None,
) -> dict[str, Any]:
    if not keep_alive:
        raise ActionRequestValidation("[keep_alive] is not specified")
    seconds = node.contexts.keep_alive_seconds(keep_alive, "keep_alive")
    targets = phases.acquire_index_targets(node, index_expr, options or IndicesOptions(), routing)
    try:
        ctx = node.contexts.open("pit", targets, seconds)
    except ElasticError:  # too many open PITs: the snapshots go back at once
        release_targets(targets)
        raise
    n = len(targets)
    return {"id": ctx.public_id, "_shards": {"total": n, "successful": n, "skipped": 0, "failed": 0}}


def close_pit(node: Node, pit_id: str) -> dict[str, Any]:
    freed = 1 if node.contexts.free_id(pit_id, "pit") else 0
    return {"succeeded": True, "num_freed": freed}
