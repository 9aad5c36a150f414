"""A PIT page of shard actors relayed as bytes: the machine renders the page's hits, the
coordinator writes them to the client's socket as they came off the machine's channel.

Why: a `_shard_doc` walk's page (a sliced export's, a PIT walk's) is mostly one shard's, which
its machine queries and fetches in one call (query_and_fetch.py). Through the general path the
coordinator then unpickled the shard's answer (its docs, sort columns, page), merged it into a
hit list, found the page's bounds and spliced the page (its read-ahead on a thread, for the next
page), and Starlette encoded and sent the body: about 0.3 of the ~1.1 ms of its CPU a page
costs it, the rest being the request's own path (bench/RESULTS.md "Pages relayed as bytes").
Here the coordinator keeps what it must do (the request's parse, the context's acquire, which
checks the PIT is still the cluster's and its owner's, the limits) and sends the cursor's shard
one `relay` call; the
answer is the page's hits as one JSON array (`[` first: a pickled answer starts otherwise), which
becomes the response with a head of a few fields (`pit_id`, `took`, `_shards`), written with one
`writev` to the client's socket when the HTTP layer lends it (socket_sink.py). No object per
hit, no copy of the page in the coordinator.

The bytes are the general path's byte for byte: the shard builds the page as the coordinator
would from its answer alone (query_and_fetch.py), and a page is relayed only when the general
path would take its hits from that one answer (`relayed_hits`): the shard asked first of a
`_shard_doc` walk (top_hits.py `shard_walk`) fills the page, or it is the only shard asked.
Every other page goes the general path, as does everything the shard did not answer plainly (a
refusal, a lost context, a machine gone or restarted, a timeout): the general path asks again
and reports it as it always does (a failed shard, a 404, a failover). The response's other
fields are then those of a page with nothing counted, no score and no shard failed, which is
what the requests `relayable` lets through answer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from leafsearch.common.rawjson import RawJSON
from leafsearch.request.search_types import SHARD_DOC, SearchRequest
from leafsearch.search import query_and_fetch, top_hits
from leafsearch.search.fetch_phase import renders_raw
from leafsearch.search.hitlist import needs_scores
from leafsearch.search.shard_api import ShardQuery, ShardTopDocs
from leafsearch.search.socket_sink import Lend, Written, write_response

if TYPE_CHECKING:
    from leafsearch.search.contexts import ReaderContext
    from leafsearch.search.services import SearchServices
    from leafsearch.search.targets import Target


def relayable(request: SearchRequest, targets: list[Target]) -> bool:
    """Whether a PIT page's response is its hits and a fixed head (no total, no score, no
    aggregation, suggestion or profile, nothing decorated after the fetch, no timeout), its hits
    bytes the shards render (`renders_raw`), its shards actors walked one by one in
    `_shard_doc` order (`top_hits.shard_walk`)."""
    return (
        bool(targets)
        and all(t.remote for t in targets)
        and request.size > 0
        and bool(request.sort)
        and request.sort[0].field == SHARD_DOC
        and not needs_scores(request)
        and request.track_total_hits is False
        and request.aggs is None
        and not request.suggest
        and not request.profile
        and request.timeout is None
        and request.terminate_after is None
        and not request.rescore
        and not request.backwards
        and request.collapse is None
        and renders_raw(request)
    )


def relay(
    services: SearchServices,
    ctx: ReaderContext,
    request: SearchRequest,
    started: float,
    *,
    lend: Lend | None,
    cancelled: threading.Event | None,
) -> dict[str, Any] | Written | None:
    """The page relayed (written to the lent socket, else a body whose hits are the machine's
    bytes), or None: the page is not one to relay (the caller serves it the general way)."""
    targets, pins = ctx.targets, ctx.shard_contexts
    n = len(targets)
    asked = [i for i in range(n) if top_hits.may_match(request, i, n, None)]
    # (a shard asked alone is asked so by the general path too, its page fetched with its query)
    walked = asked if len(asked) == 1 else top_hits.shard_walk(request, targets, asked, pins)
    if not walked:
        return None
    first = walked[0]
    plan = top_hits.sort_plan(request, targets)
    types = tuple(top_hits.sort_field_types(spec, targets) for spec in plan.specs)
    along = replace(query_and_fetch.along(request, True, last_phase=False), targets=n, field_types=types)
    now = int(time.time() * 1000)
    query = ShardQuery(request, first, now, plan, False, None, pins[first], n, fetch=along)
    target = targets[first]
    with services.search_stats.phase("query", targets):
        hits = target.searcher.handle(target).relay(query, len(walked) == 1)  # type: ignore[attr-defined]
    if hits is None:
        return None
    with services.search_stats.phase("fetch", targets):  # (fetched with the query, counted as there)
        pass
    body = {
        "pit_id": ctx.public_id,
        "took": int((time.perf_counter() - started) * 1000),
        "timed_out": False,
        "_shards": {"total": n, "successful": n, "skipped": 0, "failed": 0},
        "hits": {"max_score": None, "hits": RawJSON(hits)},
    }
    sink = None if lend is None else lend()
    return body if sink is None else write_response(sink, body, cancelled)


def relayed_hits(top: ShardTopDocs, request: SearchRequest, alone: bool) -> bytes | None:
    """On the shard: the bytes of the page's hits its query fetched (`top.page`, as the general
    path splices them: `fetch_phase.spliced`), when the general path would take the page from
    this answer alone: it fills the page, or no other shard is asked (`alone`); None otherwise."""
    page = top.page
    if page is None or page.error is not None or top.timed_out or top.terminated_early:
        return None
    if len(top.docs) < request.from_ + request.size and not alone:
        return None
    if page.end <= page.start:
        return b"[]"
    if page.form != "page" or page.result is None:
        return None
    return page.result.page
