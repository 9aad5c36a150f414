"""Search counters (`search` of `_nodes/stats` and `_stats`), as Elasticsearch names them.

The node keeps one `SearchStats` (each request's phases, counted once) and each shard one (each
phase that read the shard): `_nodes/stats` shows the node's, `_stats` sums the shards'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leafsearch.search.targets import Target

from leafsearch.services.slowlog import phase_timed


class SearchStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters = {
            "query_total": 0,
            "query_time_in_millis": 0,
            "query_current": 0,
            "fetch_total": 0,
            "fetch_time_in_millis": 0,
            "fetch_current": 0,
            "scroll_total": 0,
            "scroll_time_in_millis": 0,
            "scroll_current": 0,
            "suggest_total": 0,
            "suggest_time_in_millis": 0,
            "suggest_current": 0,
        }

    @contextmanager
    def phase(self, name: str, targets: Iterable[Target] = ()) -> Iterator[None]:
        """Count one query or fetch phase: `<name>_current` while it runs, then total and time;
        the same in the stats of every shard `targets` read."""
        with ExitStack() as stack:
            for shard_stats in _shard_stats(targets):
                stack.enter_context(shard_stats.phase(name))
            with self._count(name):
                yield

    @contextmanager
    def _count(self, name: str) -> Iterator[None]:
        with self._lock:
            self.counters[f"{name}_current"] += 1
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            phase_timed(name, seconds)  # the request's slow log (leafsearch/services/slowlog.py)
            with self._lock:
                self.counters[f"{name}_current"] -= 1
            self._add(name, seconds)

    def _add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.counters[f"{name}_total"] += 1
            self.counters[f"{name}_time_in_millis"] += int(seconds * 1000)

    def record(self, name: str, seconds: float, targets: Iterable[Target] = ()) -> None:
        """A phase that ran in a search worker process (search/workers/), counted as `phase`
        counts one that runs here, slow log included."""
        phase_timed(name, seconds)
        for stats in (self, *_shard_stats(targets)):
            stats._add(name, seconds)

    def scroll_opened(self, targets: Iterable[Target] = ()) -> None:
        for stats in (self, *_shard_stats(targets)):
            with stats._lock:
                stats.counters["scroll_current"] += 1

    def scroll_closed(self, lifetime_seconds: float, targets: Iterable[Target] = ()) -> None:
        """Elasticsearch counts a scroll once, when it ends, with its whole lifetime as time."""
        for stats in (self, *_shard_stats(targets)):
            with stats._lock:
                stats.counters["scroll_current"] -= 1
                stats.counters["scroll_total"] += 1
                stats.counters["scroll_time_in_millis"] += int(lifetime_seconds * 1000)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counters)


def _shard_stats(targets: Iterable[Target]) -> list[SearchStats]:
    """The search stats of each shard the targets read, once each."""
    seen: dict[int, SearchStats] = {}
    for target in targets:
        shards = target.index.shards
        if target.shard_id < len(shards):
            stats = shards[target.shard_id].search_stats
            seen[id(stats)] = stats
    return list(seen.values())
