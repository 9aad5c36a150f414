"""Reader-context APIs: point in time (open, search, close) and scroll (open, next batch, clear).

Both hold shard snapshots in a context (contexts.py); these functions are what the Node exposes.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING, Any

from leafsearch.common.settings import index_setting
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    SearchContextMissing,
    SearchPhaseExecution,
)
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import page_relay, phases
from leafsearch.search.contexts import ReaderContext
from leafsearch.search.execution import (
    RECORDED_AHEAD,
    PitTask,
    ScrollAhead,
    ScrollTask,
    dispatch,
    reads_ahead,
    run,
)
from leafsearch.search.socket_sink import Confirm, Lend, Sink, Written
from leafsearch.search.targets import Target, release_targets

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices


def search_pit(
    services: CoordinatorServices,
    request: SearchRequest,
    started: float,
    *,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
    lend: Lend | None = None,
    parkable: bool = False,
) -> dict[str, Any] | Written:
    """A search on a PIT's snapshots. The PIT is in use meanwhile (a close waits for the search);
    its keep-alive becomes the larger of the old and the requested one, counted from the end of
    this search, as Elasticsearch's ReaderContext does. `lend`: the client's socket, to which a
    search worker writes the response (`Written` is answered; socket_sink.py); `parkable`: the
    request is as the client sent it (nothing resolved against the data), so the worker may keep
    the connection and serve the walk's next pages (search/workers/parking.py)."""
    assert request.pit is not None
    ctx = acquire_context(services, request.pit.id, "pit")
    keep_alive = None
    try:
        if request.pit.keep_alive:
            try:
                requested = services.contexts.keep_alive_seconds(request.pit.keep_alive, "keep_alive")
            except ElasticError as exc:  # checked by each shard in Elasticsearch
                raise SearchPhaseExecution(exc) from None
            keep_alive = max(ctx.keep_alive, requested)
        phases.check_limits(services, request, ctx.targets)
        if raw_hits and services.workers is None and page_relay.relayable(request, ctx.targets):
            relayed = page_relay.relay(services, ctx, request, started, lend=lend, cancelled=cancelled)
            if relayed is not None:
                return relayed
        # The shard contexts are this process's: a search worker reads the same snapshots rebuilt.
        pins = ctx.shard_contexts if services.workers is None else None
        sink = _sink(services, lend, raw_hits)
        if sink is not None and sink.park is not None:
            # The connection may stay with the worker for the walk's next pages (parking.py):
            # not for a context the cluster's coordinators share (each keeps its expiry), nor
            # for a request resolved against the data (a terms lookup, a stored script), nor on
            # indices with a search slow log (this process logs what it times).
            kept = parkable and services.contexts.records_ahead("pit") and not _slow_logged(ctx.targets)
            park = dataclasses.replace(sink.park, keep_alive=keep_alive or ctx.keep_alive, ctx_id=ctx.ctx_id)
            sink = dataclasses.replace(sink, park=park if kept else None)
        task = PitTask(
            ctx.targets,
            request,
            time.perf_counter() - started,
            raw_hits,
            ctx.ctx_id,
            ctx.public_id,
            pins,
            sink,
        )
        # The pages of one walk (one slice of it) go where its hit list and read-ahead are.
        slice_id = None if request.slice is None else request.slice.id
        return dispatch(services, task, cancelled, affinity=(ctx.ctx_id, slice_id), relayed=sink is None)
    finally:
        services.contexts.release(ctx, keep_alive)


def _slow_logged(targets: list[Target]) -> bool:
    """Whether any of the indices logs slow searches (a threshold set)."""
    return any(
        index_setting(target.index.settings, f"index.search.slowlog.threshold.{phase}.{level}") >= 0
        for target in targets
        for phase in ("query", "fetch")
        for level in ("warn", "info", "debug", "trace")
    )


def _sink(services: CoordinatorServices, lend: Lend | None, raw_hits: bool) -> Sink | None:
    """The client's socket for a page a search worker renders (none without workers: the page is
    rendered here, nothing to relay)."""
    return lend() if lend is not None and raw_hits and services.workers is not None else None


def open_scroll(
    services: CoordinatorServices,
    targets: list[Target],
    request: SearchRequest,
    started: float,
    *,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
    lend: Lend | None = None,
) -> dict[str, Any] | Written:
    """`?scroll=` on a search: a context owning `targets` (released with it) and the first batch.

    Refusals at this point (keep-alive too long, too many open scrolls, a failing query) are shard
    failures in Elasticsearch, reported as such with the cause's status.
    """
    try:
        keep_alive = services.contexts.keep_alive_seconds(request.scroll, "scroll")
        ctx = services.contexts.open("scroll", targets, keep_alive, in_use=True)
    except ElasticError as exc:
        release_targets(targets)
        raise SearchPhaseExecution(exc) from None
    request.track_total_hits = True
    try:
        ctx.request = request
        with ctx.lock:
            body = _next_batch(
                services,
                ctx,
                started,
                raw_hits,
                cancelled,
                opening=True,
                read_ahead=False,
                lend=lend,
                kept=False,
            )
        return body
    except BaseException:
        services.contexts.free(ctx, "freed because its first batch failed")
        raise
    finally:
        services.contexts.release(ctx)


def _next_batch(
    services: CoordinatorServices,
    ctx: ReaderContext,
    started: float,
    raw_hits: bool,
    cancelled: threading.Event | None,
    *,
    opening: bool,
    read_ahead: bool,
    lend: Lend | None,
    kept: bool,
) -> dict[str, Any] | Written:
    """The batch after the scroll's cursor (caller holds `ctx.lock`), answered with the id of
    the position after it; the context moves there and keeps what replays the batch (its start
    and `took`), its record written before the batch is answered. `kept`: the worker writing
    it may keep the connection and answer the next batches the record names on it
    (search/workers/parking.py; it is told them and their ids: `ScrollAhead`).

    The record names the ends of the next batches too, when the walk knows them (its window,
    `execution.RECORDED_AHEAD`): a batch ending where the record said needs no write, so one
    `fdatasync` serves several batches. After a restart, the id of any position the record
    named is answered (`_skip_to`): the client may have received those batches."""
    seq = ctx.seq + 1
    public_id = services.contexts.encode_id("scroll", ctx.key, seq, ctx.token)

    def advance(summary: tuple[list | None, int, int, list]) -> bool | ScrollAhead:
        """Move the context past the batch and record it, before the batch is answered."""
        cursor, total, took, ahead = summary
        ctx.moved(seq, public_id, cursor, total, took)
        if ctx.ahead and ctx.ahead[0] == cursor:  # its record named this position already
            del ctx.ahead[0]
            ctx.unrecorded = True
        else:
            ctx.ahead = list(ahead) if services.contexts.records_ahead("scroll") else []
            services.contexts.persist(ctx)
        if not kept:
            return True
        return _named_ahead(services, ctx, seq, ctx.ahead)

    body, cursor, total, ahead = _batch(
        services,
        ctx,
        ctx.cursor,
        public_id,
        started,
        raw_hits,
        cancelled,
        opening=opening,
        read_ahead=read_ahead,
        lend=lend,
        confirm=advance,
        kept=kept,
    )
    if not isinstance(body, Written):  # else the worker asked, before writing it
        advance((cursor, total, body["took"], ahead))
    return body


def extend_record(
    services: CoordinatorServices, public_id: str, seq: int, end: list | None, ends: list[list]
) -> ScrollAhead | None:
    """A search worker serving the scroll on a kept connection asks for its record to name
    `ends` too, the ends of the batches after position `seq` (the last its record names, ending
    at `end`; search/workers/parking.py): the record, written again with them (durable when this
    returns), still names every position from the context's, so any id its client may hold is
    answered after a restart. The answer names them with their ids; None: nothing written (the
    context is gone, or moved elsewhere meanwhile: its record names other positions)."""
    if not ends or len(ends) > RECORDED_AHEAD or not services.contexts.records_ahead("scroll"):
        return None
    try:
        ctx = services.contexts.get(public_id, "scroll")
    except SearchContextMissing:  # cleared or expired meanwhile
        return None
    if not ctx.lock.acquire(timeout=_NOTE_WAIT_SECONDS):  # (its holder moves it elsewhere)
        return None
    try:
        ctx.apply_notes()
        last = ctx.ahead[-1] if ctx.ahead else ctx.cursor
        if ctx.seq + len(ctx.ahead) != seq or last != end or len(ctx.ahead) > RECORDED_AHEAD:
            return None
        ctx.ahead = [*ctx.ahead, *ends]
        services.contexts.persist(ctx)
        if ctx.freed:  # (no record was written)
            return None
        return _named_ahead(services, ctx, seq, ends)
    finally:
        ctx.lock.release()


def _named_ahead(
    services: CoordinatorServices, ctx: ReaderContext, seq: int, ends: list[list]
) -> ScrollAhead:
    """The batches after position `seq` that the scroll's record names, each by its end and the
    id answered with it (a kept connection's worker serves them: workers/parking.py)."""
    encode = services.contexts.encode_id
    return ScrollAhead(
        seq, tuple((end, encode("scroll", ctx.key, seq + i, ctx.token)) for i, end in enumerate(ends, 1))
    )


def _skip_to(services: CoordinatorServices, ctx: ReaderContext, seq: int) -> None:
    """A restored scroll asked for position `seq`, past the one its record holds but among
    those it named ahead (caller holds `ctx.lock`): the client received the batches up to it
    before the restart (or from a worker that died before telling), so the context moves there.
    Their `took`s were not recorded: the last one asked again answers its own."""
    skipped = seq - ctx.seq
    ends = ctx.ahead
    ctx.prev_cursor = ends[skipped - 2] if skipped > 1 else ctx.cursor
    ctx.cursor, ctx.ahead = ends[skipped - 1], ends[skipped:]
    ctx.seq, ctx.prev_took = seq, None
    ctx.public_id = services.contexts.encode_id("scroll", ctx.key, seq, ctx.token)


def _replayed_batch(
    services: CoordinatorServices, ctx: ReaderContext, started: float, raw_hits: bool, lend: Lend | None
) -> dict[str, Any] | Written:
    """The last batch again (caller holds `ctx.lock`): the same hits from the same cursor on the
    same snapshot, its `took` as first answered, so the response is the same bytes."""
    body, _, _, _ = _batch(
        services,
        ctx,
        ctx.prev_cursor,
        ctx.public_id,
        started,
        raw_hits,
        None,
        opening=False,
        read_ahead=False,
        lend=lend,
        took=ctx.prev_took,
    )
    return body


def _batch(
    services: CoordinatorServices,
    ctx: ReaderContext,
    cursor: list | None,
    public_id: str,
    started: float,
    raw_hits: bool,
    cancelled: threading.Event | None,
    *,
    opening: bool,
    read_ahead: bool,
    lend: Lend | None,
    took: int | None = None,
    confirm: Confirm | None = None,
    kept: bool = False,
) -> tuple[dict[str, Any] | Written, list | None, int, list]:
    """The scroll's batch after `cursor`, run as a task (caller holds `ctx.lock`): its body
    (answering `public_id`; `took` replaces its own: a replay's), or what a search worker wrote
    of it to the client's socket (`lend`; `confirm` is called with the cursor, total, took and
    the ends ahead before it writes), the cursor after it, the scroll's total and the ends of
    the next batches the walk knows (`execution.ScrollTask`); `kept`: as in `_next_batch`.
    Over shard actors, the task runs here (no search worker holds their snapshots), on their
    contexts."""
    remote = any(t.remote for t in ctx.targets)
    sink = None if remote else _sink(services, lend, raw_hits)
    if sink is not None and confirm is not None:
        sink = dataclasses.replace(sink, confirm=True)
    if sink is not None and sink.park is not None:
        park = dataclasses.replace(sink.park, keep_alive=ctx.keep_alive, ctx_id=ctx.ctx_id)
        sink = dataclasses.replace(sink, park=park if kept and confirm is not None else None)
    task = ScrollTask(
        ctx.targets,
        ctx.request,
        time.perf_counter() - started,
        raw_hits,
        ctx.ctx_id,
        public_id,
        cursor,
        ctx.total,
        opening,
        read_ahead,
        # The shard contexts are this process's: a search worker reads the same snapshots rebuilt.
        ctx.shard_contexts if services.workers is None or remote else None,
        sink,
        took,
        len(ctx.ahead),
    )
    if remote:
        return run(services, task, cancelled)
    return dispatch(
        services,
        task,
        cancelled,
        affinity=(ctx.ctx_id, None),
        relayed=sink is None,
        confirm=confirm if sink is not None else None,
    )


def acquire_context(services: CoordinatorServices, context_id: str, kind: str) -> ReaderContext:
    """A PIT or scroll context, in use until released; a missing one fails the search phase."""
    try:
        return services.contexts.acquire(context_id, kind)
    except SearchContextMissing as exc:
        raise SearchPhaseExecution(exc) from None


def scroll(
    services: CoordinatorServices,
    scroll_id: str,
    keep_alive: str | None,
    *,
    raw_hits: bool = False,
    lend: Lend | None = None,
) -> dict[str, Any] | Written:
    """The batch after the position `scroll_id` names. `keep_alive` resets the expiry; without it
    the context is freed (SPEC 3.1). `lend`: as in `search_pit`.

    The latest id asks for the next batch; the id before it (the latest not yet used) for the
    last batch again, the same bytes (a retry after a lost response); an older one is refused:
    its batch was let go when the newer id was used. An exhausted scroll keeps answering empty
    batches until it is cleared or expires.
    """
    started = time.perf_counter()
    decoded = services.contexts.decode_id(scroll_id, "scroll")
    if decoded is None:
        raise IllegalArgument("Cannot parse scroll id")
    ctx = acquire_context(services, scroll_id, "scroll")
    seconds = None
    try:
        if keep_alive is not None:
            try:
                seconds = services.contexts.keep_alive_seconds(keep_alive, "scroll")
            except ElasticError as exc:
                # As Elasticsearch: a scroll whose next request is refused this way is freed.
                services.contexts.free(ctx, "freed after a refused keep-alive")
                raise SearchPhaseExecution(exc) from None
        with ctx.lock:
            seq = decoded[2]
            if services.workers is not None:  # a worker keeping a connection of it: where it is
                services.workers.scroll_told(ctx.ctx_id)
            if ctx.restored and 0 < seq - ctx.seq <= len(ctx.ahead):
                _skip_to(services, ctx, seq)
            elif ctx.seq < seq <= ctx.seq + len(ctx.ahead):
                # A worker answered up to it on a kept connection (parking.py) and told this
                # process, or tells it: its note is on its way. Never told (the worker died
                # first, `WorkerPool._parks_lost`): taken as after a restart.
                ctx.apply_notes(seq, _NOTE_WAIT_SECONDS)
                if ctx.restored and 0 < seq - ctx.seq <= len(ctx.ahead):
                    _skip_to(services, ctx, seq)
            else:
                ctx.apply_notes()
            if seconds is not None:
                if seconds != ctx.keep_alive:
                    ctx.ahead = []  # the batch writes its record, with the new keep-alive
                ctx.keep_alive = seconds
            if services.workers is not None and seq in (ctx.seq, ctx.seq - 1):
                services.workers.scroll_moved(ctx.ctx_id)  # a kept connection's position is stale
            if seq == ctx.seq:
                read_ahead = reads_ahead(raw_hits, keep_alive, ctx.request)
                kept = read_ahead and services.contexts.records_ahead("scroll")
                body = _next_batch(
                    services,
                    ctx,
                    started,
                    raw_hits,
                    None,
                    opening=False,
                    read_ahead=read_ahead,
                    lend=lend,
                    kept=kept,
                )
            elif seq == ctx.seq - 1 and seq > 0:
                body = _replayed_batch(services, ctx, started, raw_hits, lend)
            else:
                raise SearchPhaseExecution(_moved_past(ctx, seq))
    finally:
        services.contexts.release(ctx, seconds)
    if keep_alive is None:
        services.contexts.free(ctx, "freed by a scroll request without [scroll]")
    return body


#: How long a request for a scroll id past the context's position, among those its record names
#: ahead, waits for the note of the worker that answered the batches before it on a kept
#: connection (in practice already read; a forged id waits this long for its 404).
_NOTE_WAIT_SECONDS = 2.0


def _moved_past(ctx: ReaderContext, seq: int) -> SearchContextMissing:
    if 0 < seq < ctx.seq:
        return SearchContextMissing(
            f"No search context found for id [{ctx.key}]: the scroll has moved past this batch "
            f"(a newer scroll id was used; only the latest two ids of a scroll are answered)"
        )
    return SearchContextMissing(
        f"No search context found for id [{ctx.key}]: it was never opened on this node"
    )


def clear_scroll(services: CoordinatorServices, scroll_ids: list[str]) -> dict[str, Any]:
    """Free scroll contexts by id (or `_all`). Nothing freed is answered 404 by the REST layer,
    with this same body, as in Elasticsearch; an id that is no scroll id at all is refused."""
    if scroll_ids == ["_all"]:
        freed = services.contexts.free_all("scroll")
    else:
        if any(services.contexts.decode_id(sid, "scroll") is None for sid in scroll_ids):
            raise IllegalArgument("Cannot parse scroll id")
        freed = sum(1 for sid in scroll_ids if services.contexts.free_id(sid, "scroll"))
    return {"succeeded": True, "num_freed": freed}


def open_pit(
    services: CoordinatorServices,
    index_expr: str,
    keep_alive: str | None,
    options: IndicesOptions | None = None,
    routing: str | None = None,
) -> dict[str, Any]:
    if not keep_alive:
        raise ActionRequestValidation("[keep_alive] is not specified")
    seconds = services.contexts.keep_alive_seconds(keep_alive, "keep_alive")
    targets = phases.acquire_index_targets(services, index_expr, options or IndicesOptions(), routing)
    try:
        ctx = services.contexts.open("pit", targets, seconds)
    except ElasticError:  # too many open PITs: the snapshots go back at once
        release_targets(targets)
        raise
    n = len(targets)
    return {"id": ctx.public_id, "_shards": {"total": n, "successful": n, "skipped": 0, "failed": 0}}


def close_pit(services: CoordinatorServices, pit_id: str) -> dict[str, Any]:
    freed = 1 if services.contexts.free_id(pit_id, "pit") else 0
    return {"succeeded": True, "num_freed": freed}
