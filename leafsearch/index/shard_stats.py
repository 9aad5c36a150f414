"""A shard's operation counters (indexing, get, merges, refresh, flush, bulk), as `_stats` shows them.

Each shard keeps its own (Elasticsearch's shard-level stats): `_stats` sums them per index and
for `_all`, `_nodes/stats` over the node. Counters change from request threads, the flush thread
and the merge thread, so every change takes the object's lock; times are kept in nanoseconds and
rendered in whole milliseconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Counters of each section, each starting at zero; `*_time` entries are nanoseconds.
_FIELDS = (
    "index_total",
    "index_time",
    "index_current",
    "index_failed",
    "delete_total",
    "delete_time",
    "delete_current",
    "noop_update_total",
    "get_total",
    "get_time",
    "get_exists_total",
    "get_exists_time",
    "get_missing_total",
    "get_missing_time",
    "get_current",
    "merge_current",
    "merge_current_docs",
    "merge_current_size",
    "merge_total",
    "merge_time",
    "merge_docs",
    "merge_size",
    "refresh_total",
    "refresh_time",
    "refresh_external_total",
    "refresh_external_time",
    "flush_total",
    "flush_periodic",
    "flush_time",
    "bulk_total",
    "bulk_time",
    "bulk_size",
)


def _ms(nanos: int) -> int:
    return nanos // 1_000_000


class ShardStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c = dict.fromkeys(_FIELDS, 0)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                self._c[name] += value

    @contextmanager
    def timed(self, operation: str, count: int = 1) -> Iterator[None]:
        """Count `count` index or delete operations: `<op>_current` while they run, then the
        total and the time; an exception counts them as failed (indexing) instead."""
        self.add(**{f"{operation}_current": count})
        started = time.perf_counter_ns()
        ok = False
        try:
            yield
            ok = True
        finally:
            elapsed = time.perf_counter_ns() - started
            done = {f"{operation}_current": -count, f"{operation}_time": elapsed}
            if ok:
                done[f"{operation}_total"] = count
            elif operation == "index":
                done["index_failed"] = count
            self.add(**done)

    @contextmanager
    def get(self) -> Iterator[list[bool]]:
        """Count one get; the caller sets `found[0]` (exists or missing, each with its time)."""
        found = [False]
        self.add(get_current=1)
        started = time.perf_counter_ns()
        try:
            yield found
        finally:
            elapsed = time.perf_counter_ns() - started
            kind = "exists" if found[0] else "missing"
            self.add(
                get_current=-1,
                get_total=1,
                get_time=elapsed,
                **{f"get_{kind}_total": 1, f"get_{kind}_time": elapsed},
            )

    @contextmanager
    def merging(self, docs: int, size: int) -> Iterator[None]:
        """One merge of `docs` documents and `size` bytes, current while it runs."""
        self.add(merge_current=1, merge_current_docs=docs, merge_current_size=size)
        started = time.perf_counter_ns()
        ok = False
        try:
            yield
            ok = True
        finally:
            done = {"merge_current": -1, "merge_current_docs": -docs, "merge_current_size": -size}
            if ok:
                done.update(
                    merge_total=1,
                    merge_time=time.perf_counter_ns() - started,
                    merge_docs=docs,
                    merge_size=size,
                )
            self.add(**done)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._c)


def sections(c: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The `indexing`, `get`, `merges`, `refresh`, `flush` and `bulk` sections of summed counters."""
    bulks = c["bulk_total"]
    return {
        "indexing": {
            "index_total": c["index_total"],
            "index_time_in_millis": _ms(c["index_time"]),
            "index_current": c["index_current"],
            "index_failed": c["index_failed"],
            "delete_total": c["delete_total"],
            "delete_time_in_millis": _ms(c["delete_time"]),
            "delete_current": c["delete_current"],
            "noop_update_total": c["noop_update_total"],
            "is_throttled": False,
            "throttle_time_in_millis": 0,
        },
        "get": {
            "total": c["get_total"],
            "time_in_millis": _ms(c["get_time"]),
            "exists_total": c["get_exists_total"],
            "exists_time_in_millis": _ms(c["get_exists_time"]),
            "missing_total": c["get_missing_total"],
            "missing_time_in_millis": _ms(c["get_missing_time"]),
            "current": c["get_current"],
        },
        "merges": {
            "current": c["merge_current"],
            "current_docs": c["merge_current_docs"],
            "current_size_in_bytes": c["merge_current_size"],
            "total": c["merge_total"],
            "total_time_in_millis": _ms(c["merge_time"]),
            "total_docs": c["merge_docs"],
            "total_size_in_bytes": c["merge_size"],
            "total_stopped_time_in_millis": 0,
            "total_throttled_time_in_millis": 0,
            "total_auto_throttle_in_bytes": 0,
        },
        "refresh": {
            "total": c["refresh_total"],
            "total_time_in_millis": _ms(c["refresh_time"]),
            "external_total": c["refresh_external_total"],
            "external_total_time_in_millis": _ms(c["refresh_external_time"]),
            "listeners": 0,
        },
        "flush": {
            "total": c["flush_total"],
            "periodic": c["flush_periodic"],
            "total_time_in_millis": _ms(c["flush_time"]),
            "total_time_excluding_waiting_on_lock_in_millis": _ms(c["flush_time"]),
        },
        "bulk": {
            "total_operations": bulks,
            "total_time_in_millis": _ms(c["bulk_time"]),
            "total_size_in_bytes": c["bulk_size"],
            "avg_time_in_millis": _ms(c["bulk_time"] // bulks) if bulks else 0,
            "avg_size_in_bytes": c["bulk_size"] // bulks if bulks else 0,
        },
    }
