"""Shard-level reader contexts: the snapshots a node's shards pinned for a coordinator, by id.

The shard side of `ShardSearch.open_context` / `free_context` (shard_api.py), as Elasticsearch's
SearchService keeps its ReaderContexts by ShardSearchContextId: a coordinator (a PIT or a scroll
of the REST-facing ContextRegistry, contexts.py) asks each shard to pin its current snapshot, names
the pin in the query and fetch phases that must read it, and frees it when the walk ends (close,
clear, expiry). A pin holds one reference on the snapshot, so the shard keeps its segment files
until every holder released them.

Ids carry this registry's session: an id from another process is unknown rather than another
snapshot. A context opened with a name also keeps its snapshot on disk (`Shard.pin`, index/pins.py)
until it is freed: after a restart the node's contexts take the restored snapshots back by that
name (`adopt`). The registry is the Node's (`node.shard_contexts`) or a shard actor's.
"""

from __future__ import annotations

import itertools
import threading
import uuid

from leafsearch.errors import SearchContextMissing
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.targets import Target


def engine_shard(target: Target):
    """The engine shard of a target of this process (an `index.shard.Shard`)."""
    return target.index.shards[target.shard_id]


class ShardContexts:
    """Pinned shard snapshots by id. Cost: one reference on a Searcher per open context, and for
    a named one a pin file (about 1 bit per document) and the segments it keeps."""

    def __init__(self) -> None:
        self.session = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._pins: dict[int, tuple[Target, str | None]] = {}
        self._numbers = itertools.count(1)

    def open(self, target: Target, name: str | None = None) -> ShardContextId:
        """Pin `target`'s snapshot (one more reference on it) until `free`; with `name`, on disk
        too (durable when this returns)."""
        target.searcher.acquire()
        if name is not None:
            try:
                engine_shard(target).pin(name, target.searcher)
            except BaseException:
                target.searcher.release()
                raise
        return self._register(target, name)

    def adopt(self, target: Target, name: str) -> ShardContextId:
        """A context on a snapshot restored from its pin (`Shard.take_restored`): the target's
        reference on it passes to the context."""
        return self._register(target, name)

    def _register(self, target: Target, name: str | None) -> ShardContextId:
        with self._lock:
            number = next(self._numbers)
            self._pins[number] = (target, name)
        searcher = target.searcher
        return ShardContextId(self.session, number, searcher.max_doc, len(searcher.views), name)

    def get(self, context: ShardContextId) -> Target:
        """The pinned snapshot of an open context; a freed or unknown one is missing (404)."""
        with self._lock:
            pin = self._pins.get(context.number) if context.session == self.session else None
        if pin is None:
            raise SearchContextMissing(f"No search context found for id [{context.number}]")
        return pin[0]

    def free(self, context: ShardContextId) -> bool:
        """Release a pin (and delete it from disk); False when it was not open."""
        with self._lock:
            pin = self._pins.pop(context.number, None) if context.session == self.session else None
        if pin is None:
            return False
        target, name = pin
        try:
            if name is not None:
                engine_shard(target).unpin(name)
        finally:
            target.searcher.release()
        return True

    def open_count(self) -> int:
        with self._lock:
            return len(self._pins)

    def close_all(self) -> None:
        """Release every pin's snapshot (the node is closing); pins on disk stay, for the restart."""
        with self._lock:
            pins, self._pins = list(self._pins.values()), {}
        for target, _ in pins:
            target.searcher.release()
