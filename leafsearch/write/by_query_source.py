"""What a by-query operation reads: the matches of one slice of its snapshot, batch by batch.

Each batch is a page of a walk on the operation's snapshot (search/walks.py): its top hits after
a cursor, sorted by the operation's sort (`_doc` unless the body sorts) then `_shard_doc`, a total
order (`walks.walk_request`); the next batch starts `search_after` the last hit of this one. The
snapshot is the targets the operation holds, or, when a shard of the source is a Ray actor
(ray_backend/), the shard contexts pinned once for the whole operation
(`top_hits.open_shard_contexts`). Every slice and batch reads the same snapshot, so each match
comes exactly once; a batch at any depth costs what the first costs, the first batch costs what
a page of a search costs, and nothing holds a list of every match. The first batch counts the
matches (`total`, known before anything is written); the others do not.

A shard that fails during a walk (its actor died) ends the operation with Elasticsearch's search
failure in `failures` (index, shard, node, status, reason), as a reindex whose scroll response
reports shard failures stops there: writing the other shards' documents alone would look like
success.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from leafsearch.request.search_types import SearchRequest
from leafsearch.search import phases, walks
from leafsearch.search.fetch_phase import last_sort_values
from leafsearch.search.shard_api import ShardContextId

if TYPE_CHECKING:
    from leafsearch.search.targets import Target
    from leafsearch.write.services import WriteServices


class Batches(Protocol):
    """One slice's matches, read batch by batch."""

    #: Matches of the slice in the snapshot.
    total: int
    #: True once every match was handed out (or a shard failed).
    exhausted: bool
    #: Search failures (Elasticsearch's SearchFailure bodies) that ended the walk.
    failures: list[dict[str, Any]]

    def next(self, wanted: int) -> list[dict[str, Any]]:
        """The next (at most) `wanted` matches, fetched: their hits as a search renders them."""
        ...


def walks_on_contexts(targets: list[Target]) -> bool:
    """Whether the source is walked on pinned shard contexts (a shard of it is a Ray actor)."""
    return any(t.remote for t in targets)


def batches(
    services: WriteServices,
    targets: list[Target],
    contexts: list[ShardContextId] | None,
    search: SearchRequest,
    cancelled: threading.Event,
) -> Batches:
    """The batches of one slice (`search.slice`, `search.size` the batch size), on `contexts`
    when given, else on the snapshots `targets` hold."""
    phases.check_limits(services.search, search, targets)
    return WalkBatches(services, targets, contexts, search, cancelled)


class WalkBatches:
    """A `search_after` walk on the operation's snapshot (see the module's docstring). The first
    batch's query runs at once, so `total` is known before anything is written."""

    def __init__(
        self,
        services: WriteServices,
        targets: list[Target],
        contexts: list[ShardContextId] | None,
        search: SearchRequest,
        cancelled: threading.Event,
    ) -> None:
        self.services = services
        self.targets = targets
        self.contexts = contexts
        self.cancelled = cancelled
        walk, _ = walks.walk_request(search, None)
        self.walk = replace(walk, track_total_hits=True)
        self.fetch = replace(search, sort=[])
        self.failures: list[dict[str, Any]] = []
        self.exhausted = False
        self._pending = self._query(search.size)
        self.total = self._pending[0].total
        self.exhausted = self.total == 0 and not self.failures
        self.walk = replace(self.walk, track_total_hits=False)  # counted once

    def _query(self, size: int) -> tuple[Any, int, int]:
        """The page of `size` hits after the cursor: (hit list, where the page starts in it, size)."""
        walk = replace(self.walk, size=size)
        hitlist, _ = phases.query_phase(
            self.services.search,
            self.targets,
            walk,
            aggs=False,
            cancelled=self.cancelled,
            contexts=self.contexts,
        )
        if hitlist.failures:
            self.failures = [_search_failure(self.services, f) for f in hitlist.failures]
        start, _ = phases.page_bounds(hitlist, walk)
        return hitlist, start, size

    def next(self, wanted: int) -> list[dict[str, Any]]:
        if self.exhausted:
            return []
        pending, self._pending = self._pending, None
        hitlist, start, size = pending if pending is not None else self._query(wanted)
        if self.failures:
            self.exhausted = True
            return []
        available = len(hitlist) - start
        end = start + min(wanted, available)
        if end == len(hitlist) and available < size:
            self.exhausted = True  # the shards had no more than these
        if end == start:
            self.exhausted = True
            return []
        self.walk = replace(self.walk, search_after=last_sort_values(hitlist, end))
        return phases.fetch_page(self.services.search, hitlist, start, end, self.fetch)


def _search_failure(services: WriteServices, failed: Any) -> dict[str, Any]:
    """Elasticsearch's SearchFailure of a by-query operation (ScrollableHitSource.SearchFailure)."""
    entry = failed.failure(services.search.node_id)
    return {
        "index": entry["index"],
        "shard": entry["shard"],
        "node": entry["node"],
        "status": failed.status,
        "reason": entry["reason"],
    }
