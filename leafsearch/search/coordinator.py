"""Search and count entry points (bound as Node methods).

They take a typed, validated `SearchRequest` (request/search_request.py parses REST's body and
parameters into one), never a body: the engine does not know HTTP. `search` dispatches: a request
with `pit` reads the PIT's snapshots, one with `scroll` opens a scroll context (see
scroll_pit.py), any other reads the current snapshots of its indices. Here the indices are
resolved and the limits checked; the page itself is a task (execution.py), run in a search
worker process when the node has them.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from leafsearch.request.search_types import SearchRequest
from leafsearch.search import phases, scroll_pit
from leafsearch.search.execution import CountTask, SearchTask, dispatch
from leafsearch.search.knn_phase import resolve_knn
from leafsearch.search.socket_sink import Lend, Written
from leafsearch.search.stored_scripts import resolve_stored_scripts
from leafsearch.search.targets import release_targets
from leafsearch.search.terms_lookup import resolve_lookups

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices


def search(
    services: CoordinatorServices,
    request: SearchRequest,
    *,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
    lend: Lend | None = None,
) -> dict[str, Any] | Written:
    """`raw_hits`: render a plain page's hits as one pre-encoded array (the REST layer asks);
    `cancelled`: set when the client goes away, which stops the search (search/guard.py);
    `lend`: the client's socket, which a search worker writes a PIT page or a scroll's first
    batch to (socket_sink.py; then what it wrote is answered)."""
    started = time.perf_counter()
    sent = request
    request = resolve_stored_scripts(services.stored_script, request)
    request = resolve_knn(services, resolve_lookups(services, request), search)
    if request.pit is not None:
        parkable = request is sent
        return scroll_pit.search_pit(
            services, request, started, raw_hits=raw_hits, cancelled=cancelled, lend=lend, parkable=parkable
        )
    targets = phases.resolve_targets(services, request)
    try:
        phases.check_limits(services, request, targets)
        if request.scroll is not None:
            owned, targets = targets, []  # the scroll context owns them now
            return scroll_pit.open_scroll(
                services, owned, request, started, raw_hits=raw_hits, cancelled=cancelled, lend=lend
            )
        cache = services.request_cache
        key = cache.key(targets, request)
        if key is not None and (cached := cache.get(key, targets)) is not None:
            return {"took": int((time.perf_counter() - started) * 1000), **cached}
        task = SearchTask(targets, request, time.perf_counter() - started, raw_hits)
        body = dispatch(services, task, cancelled)
        if key is not None:
            cache.put(key, targets, body)
        return body
    finally:
        release_targets(targets)


def count(
    services: CoordinatorServices, request: SearchRequest, *, cancelled: threading.Event | None = None
) -> dict[str, Any]:
    """`_count` of a request parsed by `parse_count_request`."""
    request = resolve_lookups(services, resolve_stored_scripts(services.stored_script, request))
    targets = phases.resolve_targets(services, request)
    try:
        cache = services.request_cache
        key = cache.key(targets, request, count=True)
        if key is not None and (cached := cache.get(key, targets)) is not None:
            return cached
        body = dispatch(services, CountTask(targets, request), cancelled)
        if key is not None:
            cache.put(key, targets, body)
        return body
    finally:
        release_targets(targets)
