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
name (`adopt`). A shard actor's registry (one shard: a name is one context) also takes an id of
another session that names a context for that context (the name is a random key of the
coordinator's, and names one snapshot whatever process pinned it), so that an actor Ray restarted
serves the ids its coordinator holds. The registry is the Node's (`node.shard_contexts`) or a
shard actor's.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from leafsearch.errors import SearchContextMissing
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.targets import Target

if TYPE_CHECKING:
    from leafsearch.index.shard import Shard


def engine_shard(target: Target) -> Shard:
    """The engine shard of a target of this process."""
    return target.index.shards[target.shard_id]


class ShardContexts:
    """Pinned shard snapshots by id. Cost: one reference on a Searcher per open context, and for
    a named one a pin file (about 1 bit per document) and the segments it keeps."""

    def __init__(self, shard_of: Callable[[Target], Shard] | None = None) -> None:
        """`shard_of`: a shard actor's, the engine shard of its one shard; its contexts are also
        found by name."""
        self.session = uuid.uuid4().hex[:12]
        self._shard_of = shard_of or engine_shard
        self._by_name = shard_of is not None
        self._lock = threading.Lock()
        self._pins: dict[int, tuple[Target, str | None]] = {}
        self._names: dict[str, int] = {}
        self._opened: dict[int, float] = {}  # wall time each context was opened (`retain`)
        self._numbers = itertools.count(1)

    def open(self, target: Target, name: str | None = None) -> ShardContextId:
        """Pin `target`'s snapshot (one more reference on it) until `free`; with `name`, on disk
        too (durable when this returns)."""
        target.searcher.acquire()
        if name is not None:
            try:
                self._shard_of(target).pin(name, target.searcher)
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
            self._opened[number] = time.time()
            if name is not None and self._by_name:
                self._names[name] = number
        searcher = target.searcher
        return ShardContextId(self.session, number, searcher.max_doc, len(searcher.views), name)

    def _number(self, context: ShardContextId) -> int | None:
        """This registry's number for a context (lock held): its own, or by name one of another
        session."""
        if context.session == self.session:
            return context.number
        return None if context.name is None or not self._by_name else self._names.get(context.name)

    def get(self, context: ShardContextId) -> Target:
        """The pinned snapshot of an open context; a freed or unknown one is missing (404)."""
        with self._lock:
            number = self._number(context)
            pin = None if number is None else self._pins.get(number)
        if pin is None:
            raise SearchContextMissing(f"No search context found for id [{context.number}]")
        return pin[0]

    def free(self, context: ShardContextId) -> bool:
        """Release a pin (and delete it from disk); False when it was not open."""
        with self._lock:
            number = self._number(context)
            pin = None if number is None else self._pins.pop(number, None)
            if pin is not None:
                del self._opened[number]  # type: ignore[arg-type]
                if pin[1] is not None:
                    self._names.pop(pin[1], None)
        if pin is None:
            return False
        target, name = pin
        try:
            if name is not None:
                self._shard_of(target).unpin(name)
        finally:
            target.searcher.release()
        return True

    def retain(self, names: set[str], since: float) -> int:
        """Free every context opened before `since` (wall time) but those kept on disk under one
        of `names` (what a restarted coordinator still holds); how many were freed. Those opened
        since are the new coordinator's, should this call arrive late."""
        with self._lock:
            victims = [
                ShardContextId(self.session, n)
                for n, (_, name) in self._pins.items()
                if name not in names and self._opened[n] < since
            ]
        return sum(self.free(victim) for victim in victims)

    def open_count(self) -> int:
        with self._lock:
            return len(self._pins)

    def close_all(self) -> None:
        """Release every pin's snapshot (the node is closing); pins on disk stay, for the restart."""
        with self._lock:
            pins, self._pins, self._names, self._opened = list(self._pins.values()), {}, {}, {}
        for target, _ in pins:
            target.searcher.release()
