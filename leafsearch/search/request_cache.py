"""The shard request cache: whole answers of repeated searches over unchanged snapshots.

As Elasticsearch's request cache, it keeps what a search answers for a set of shard snapshots, so
that the same request over the same snapshots (dashboards re-asking the same aggregations) is
answered without searching. What is cached, as Elasticsearch's `IndicesService.canCache` decides:

- by default, requests with `size: 0` (aggregations, counts, `hits.total`) on indices whose
  `index.requests.cache.enable` (dynamic, default true) is on;
- `request_cache=true` caches the request whatever its size; `request_cache=false` never;
- never a profiled, DFS, scroll or point-in-time search, a request whose query or aggregations
  name `now` (its answer depends on the clock), a search of Ray-backed shards (their snapshots
  live in the actors), nor an answer that timed out or lost shards.

The key is the request (every field but `request_cache`) with the identity of each snapshot it
reads (index, shard, snapshot generation, alias filter) and the settings and mapping versions its
answer depends on (limits such as `search.max_buckets`), so a refresh that publishes a new
snapshot makes the next request a miss; a released snapshot's entries are dropped with it. The
cache is the node's, in the server process (where the coordinator runs, before a task goes to a
search worker), bounded by `indices.requests.cache.size` (1% of the node's memory), least
recently used out. Its counters are per shard, as Elasticsearch's: each shard a cacheable
request reads counts a hit or a miss, an entry's bytes are shared among its shards, and an entry
pushed out by the bound counts an eviction on each (`request_cache` of `_stats` and
`_nodes/stats`).

Where Elasticsearch caches each shard's query-phase result, this caches the whole answer of the
shards read together: the same shards asked together again hit, which is what a repeated request
does; the same shard asked within another set of shards misses.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.bounded_cache import BoundedCache
from leafsearch.common.rawjson import RawJSON
from leafsearch.common.settings import index_setting
from leafsearch.request.search_types import SearchRequest
from leafsearch.search.targets import Target, snapshot_key

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings
    from leafsearch.index.events import ShardEvents
    from leafsearch.index.searcher import Searcher

ShardKey = tuple[str, int]  # (index uuid, shard id)


@dataclass(frozen=True, slots=True)
class _Entry:
    body: bytes  # the answer without `took`, as JSON
    shards: tuple[ShardKey, ...]
    searchers: frozenset[int]  # the snapshots read (Searcher.uid): the entry goes with any of them
    key_bytes: int

    def nbytes(self) -> int:
        return len(self.body) + self.key_bytes


class _ShardCounters:
    __slots__ = ("evictions", "hit_count", "memory_size_in_bytes", "miss_count")

    def __init__(self) -> None:
        self.memory_size_in_bytes = self.evictions = self.hit_count = self.miss_count = 0


class RequestCache:
    """The node's request cache (see the module's notes)."""

    def __init__(self, max_bytes: int, events: ShardEvents, cluster_settings: ClusterSettings) -> None:
        self._cluster_settings = cluster_settings
        self._counters: dict[ShardKey, _ShardCounters] = {}
        self._lock = threading.Lock()  # the counters
        self._entries: BoundedCache[tuple, _Entry] = BoundedCache(max_bytes, _Entry.nbytes, self._removed)
        self._events = events
        events.on_snapshot_closed(self._forget)

    def close(self) -> None:
        self._events.remove(self._forget)
        self._entries.clear()

    def resize(self, max_bytes: int) -> None:
        """Set the bound (`indices.requests.cache.size`); entries that no longer fit go."""
        self._entries.resize(max_bytes)

    def clear(self, index_uuids: set[str]) -> None:
        """Drop the answers that read a shard of these indices (`_cache/clear?request=true`)."""
        self._entries.discard_where(lambda _, entry: any(uuid in index_uuids for uuid, _ in entry.shards))

    # -- the coordinator's side --------------------------------------------------------------

    def key(self, targets: list[Target], request: SearchRequest, *, count: bool = False) -> tuple | None:
        """The request's key over these snapshots, None when it is not cached. `count`: a `_count`
        (which reads no hits, as a `size: 0` search). O(request size)."""
        if request.request_cache is False or request.profile or request.dfs:
            return None
        if request.scroll is not None or request.pit is not None or not targets:
            return None
        if any(t.remote for t in targets):  # a shard actor's snapshot: its identity is the actor's
            return None
        if request.request_cache is None:
            if not count and request.size != 0:
                return None
            indices = {id(t.index): t.index for t in targets}.values()
            if not all(index_setting(i.settings, "index.requests.cache.enable") for i in indices):
                return None
        text = repr(dataclasses.replace(request, request_cache=None))
        if "now" in text:  # date math on the clock somewhere: not the same answer twice
            return None
        # Limits and mappings decide answers too (a lowered `search.max_buckets` refuses what was
        # answered before): the settings and mapping versions read are part of the key.
        cluster = self._cluster_settings
        indices = {id(t.index): t.index for t in targets}.values()
        try:
            context = repr(
                (
                    sorted(cluster.persistent.items()),
                    sorted(cluster.transient.items()),
                    [(sorted(i.settings.items()), i.mapping.version) for i in indices],
                )
            )
        except RuntimeError:  # an index's settings changing under the read: not cached this time
            return None
        return (snapshot_key(targets), count, text, context)

    def get(self, key: tuple, targets: list[Target]) -> dict[str, Any] | None:
        """The cached answer (a fresh copy, without `took`) or None; counts a hit or a miss on
        each shard read."""
        entry = self._entries.get(key)
        with self._lock:
            for shard in _shards(targets):
                counters = self._counters.setdefault(shard, _ShardCounters())
                if entry is None:
                    counters.miss_count += 1
                else:
                    counters.hit_count += 1
        return orjson.loads(entry.body) if entry is not None else None

    def put(self, key: tuple, targets: list[Target], body: dict[str, Any]) -> None:
        """Keep a complete answer (one that timed out or lost a shard is not kept)."""
        if body.get("timed_out") or body.get("_shards", {}).get("failed", 0):
            return
        kept = orjson.dumps(
            {k: v for k, v in body.items() if k != "took"}, default=_raw, option=orjson.OPT_SERIALIZE_NUMPY
        )
        searchers = frozenset(t.searcher.uid for t in targets)
        entry = _Entry(kept, _shards(targets), searchers, len(key[2]) + len(key[3]))
        with self._lock:
            self._share(entry, +1)
        if not self._entries.put(key, entry):  # larger than the whole bound: not kept
            with self._lock:
                self._share(entry, -1)

    # -- stats ---------------------------------------------------------------------------------

    def shard_stats(self, index_uuid: str, shard_id: int) -> dict[str, int]:
        """`request_cache` of one shard's stats."""
        with self._lock:
            c = self._counters.get((index_uuid, shard_id)) or _ShardCounters()
            return {
                "memory_size_in_bytes": c.memory_size_in_bytes,
                "evictions": c.evictions,
                "hit_count": c.hit_count,
                "miss_count": c.miss_count,
            }

    # -- entries leaving -------------------------------------------------------------------------

    def _removed(self, key: tuple, entry: _Entry, evicted: bool) -> None:
        """Told by the bounded cache, under its lock (this takes only the counters' lock)."""
        with self._lock:
            self._share(entry, -1)
            if evicted:
                for shard in entry.shards:
                    self._counters.setdefault(shard, _ShardCounters()).evictions += 1

    def _share(self, entry: _Entry, sign: int) -> None:
        """Add (or take back) an entry's bytes, shared among its shards (the first takes the rest)."""
        size, n = entry.nbytes(), len(entry.shards)
        for i, shard in enumerate(entry.shards):
            part = size // n + (size % n if i == 0 else 0)
            self._counters.setdefault(shard, _ShardCounters()).memory_size_in_bytes += sign * part

    def _forget(self, searcher: Searcher) -> None:
        """Drop the entries of a released snapshot (a refresh published a newer one)."""
        uid = searcher.uid
        self._entries.discard_where(lambda _, entry: uid in entry.searchers)


def _shards(targets: list[Target]) -> tuple[ShardKey, ...]:
    return tuple(dict.fromkeys((t.index.uuid, t.shard_id) for t in targets))


def _raw(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return orjson.Fragment(value.data)
    raise TypeError(f"cannot cache a {type(value).__name__}")
