"""Shard-level reader contexts: the snapshots a node's shards pinned for a coordinator, by id.

The shard side of `ShardSearch.open_context` / `free_context` (shard_api.py), as Elasticsearch's
SearchService keeps its ReaderContexts by ShardSearchContextId: a coordinator (a PIT or a scroll
of the REST-facing ContextRegistry, contexts.py) asks each shard to pin its current snapshot, names
the pin in the query and fetch phases that must read it, and frees it when the walk ends (close,
clear, expiry). A pin holds one reference on the snapshot, so the shard keeps its segment files
until every holder released them.

Ids carry this registry's session: an id from before a restart, or from another process, is
unknown rather than another snapshot. The registry is the Node's (`node.shard_contexts`).
"""

from __future__ import annotations

import itertools
import threading
import uuid

from leafsearch.errors import SearchContextMissing
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.targets import Target


class ShardContexts:
    """Pinned shard snapshots by id. Cost: one reference on a Searcher per open context."""

    def __init__(self) -> None:
        self.session = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._pins: dict[int, Target] = {}
        self._numbers = itertools.count(1)

    def open(self, target: Target) -> ShardContextId:
        """Pin `target`'s snapshot (one more reference on it) until `free`."""
        target.searcher.acquire()
        with self._lock:
            number = next(self._numbers)
            self._pins[number] = target
        searcher = target.searcher
        return ShardContextId(self.session, number, searcher.max_doc, len(searcher.views))

    def get(self, context: ShardContextId) -> Target:
        """The pinned snapshot of an open context; a freed or unknown one is missing (404)."""
        with self._lock:
            target = self._pins.get(context.number) if context.session == self.session else None
        if target is None:
            raise SearchContextMissing(f"No search context found for id [{context.number}]")
        return target

    def free(self, context: ShardContextId) -> bool:
        """Release a pin; False when it was not open."""
        with self._lock:
            target = self._pins.pop(context.number, None) if context.session == self.session else None
        if target is None:
            return False
        target.searcher.release()
        return True

    def open_count(self) -> int:
        with self._lock:
            return len(self._pins)

    def close_all(self) -> None:
        """Release every pin (the node is closing)."""
        with self._lock:
            pins, self._pins = list(self._pins.values()), {}
        for target in pins:
            target.searcher.release()
