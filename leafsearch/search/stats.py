"""Search counters (`search` of `_nodes/stats` and `_stats`), as Elasticsearch names them.

The node keeps one `SearchStats` (each request's phases, counted once) and each shard one (each
phase that read the shard): `_nodes/stats` shows the node's, `_stats` sums the shards'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol


class ShardRead(Protocol):
    """A shard one phase read (a `search.targets.Target`): its stats count the phase too. Named
    by shape so that shards (`index/shard.py`), which keep a `SearchStats` each, can import this
    module without the search side."""

    index: Any
    shard_id: int


@dataclass
class PhaseTimes:
    """The seconds each phase of one request took (for its slow log, node/slowlog.py)."""

    seconds: dict[str, float] = field(default_factory=dict)


_request_phases: ContextVar[PhaseTimes | None] = ContextVar("leafsearch_request_phases", default=None)


@contextmanager
def request_phases() -> Iterator[PhaseTimes]:
    """The phases that end inside the block, in this context, add their seconds to what it yields."""
    times = PhaseTimes()
    token = _request_phases.set(times)
    try:
        yield times
    finally:
        _request_phases.reset(token)


#: Where the phases (name, seconds) timed in this context go when another process counts them: a
#: search worker's task sends its list back with its reply (search/workers/process.py), and a page
#: read ahead keeps its own until a task takes the page (search/read_ahead.py). None: counted here.
TIMED: ContextVar[list[tuple[str, float]] | None] = ContextVar("leafsearch_timed_phases", default=None)


def _phase_timed(name: str, seconds: float) -> None:
    times = _request_phases.get()
    if times is not None:
        times.seconds[name] = times.seconds.get(name, 0.0) + seconds


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

    def phase(self, name: str, targets: Iterable[ShardRead] = ()) -> _Phase:
        """Count one query or fetch phase (a context manager): `<name>_current` while it runs,
        then total and time; the same in the stats of every shard `targets` read. One clock for
        all of them, and the request's slow log (node/slowlog.py) adds the phase's time once."""
        return _Phase(name, (self, *_shard_stats(targets)))

    def _add(self, name: str, seconds: float) -> None:
        total, millis = _KEYS[name][1:]
        with self._lock:
            self.counters[total] += 1
            self.counters[millis] += int(seconds * 1000)

    def record(self, name: str, seconds: float, targets: Iterable[ShardRead] = ()) -> None:
        """A phase that ran in a search worker process (search/workers/), counted as `phase`
        counts one that runs here, slow log included."""
        _phase_timed(name, seconds)
        for stats in (self, *_shard_stats(targets)):
            stats._add(name, seconds)

    def scroll_opened(self, targets: Iterable[ShardRead] = ()) -> None:
        for stats in (self, *_shard_stats(targets)):
            with stats._lock:
                stats.counters["scroll_current"] += 1

    def scroll_closed(self, lifetime_seconds: float, targets: Iterable[ShardRead] = ()) -> None:
        """Elasticsearch counts a scroll once, when it ends, with its whole lifetime as time."""
        for stats in (self, *_shard_stats(targets)):
            with stats._lock:
                stats.counters["scroll_current"] -= 1
                stats.counters["scroll_total"] += 1
                stats.counters["scroll_time_in_millis"] += int(lifetime_seconds * 1000)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counters)


#: Each phase's counters: (`<name>_current`, `<name>_total`, `<name>_time_in_millis`).
_KEYS = {
    name: (f"{name}_current", f"{name}_total", f"{name}_time_in_millis")
    for name in ("query", "fetch", "scroll", "suggest")
}


class _Phase:
    """`SearchStats.phase`'s block: a class, not a generator's context manager, and one lock
    taken per stats at each end (a scroll batch counts two phases: 4 us each as a generator)."""

    __slots__ = ("every", "keys", "name", "started")

    def __init__(self, name: str, every: tuple[SearchStats, ...]) -> None:
        self.name, self.every, self.keys = name, every, _KEYS[name]

    def __enter__(self) -> None:
        current = self.keys[0]
        for stats in self.every:
            with stats._lock:
                stats.counters[current] += 1
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        seconds = time.perf_counter() - self.started
        _phase_timed(self.name, seconds)
        current, total, millis = self.keys
        for stats in self.every:
            with stats._lock:
                counters = stats.counters
                counters[current] -= 1
                counters[total] += 1
                counters[millis] += int(seconds * 1000)


def _shard_stats(targets: Iterable[ShardRead]) -> list[SearchStats]:
    """The search stats of each shard the targets read, once each."""
    seen: dict[int, SearchStats] = {}
    for target in targets:
        shards = target.index.shards
        if target.shard_id < len(shards):
            stats = shards[target.shard_id].search_stats
            seen[id(stats)] = stats
    return list(seen.values())


class ExportStats:
    """What the node's exports do (`walks.exports` of `_nodes/stats`): running, finished, lines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = 0
        self.total = 0
        self.lines = 0
        self.cancelled = 0
        #: Exports whose pages after the first the renderer wrote to the client's socket.
        self.written_by_renderer = 0

    def started(self) -> None:
        with self._lock:
            self.current += 1
            self.total += 1

    def handed_over(self) -> None:
        with self._lock:
            self.written_by_renderer += 1

    def ended(self, lines: int, cancelled: bool) -> None:
        with self._lock:
            self.current -= 1
            self.lines += lines
            self.cancelled += int(cancelled)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "current": self.current,
                "total": self.total,
                "lines": self.lines,
                "cancelled": self.cancelled,
                "written_by_renderer": self.written_by_renderer,
            }
