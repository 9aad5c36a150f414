"""Circuit breakers: a request whose arrays would not fit in memory is refused before it allocates.

As in Elasticsearch, the `request` breaker counts the bytes that requests in flight have reserved
for their large arrays (a search reserves its per-segment masks and scores, its match arrays and
sort key columns from counts it knows before allocating them), and refuses a reservation that
would take the total over `indices.breaker.request.limit` (60% by default). The `parent` breaker
(`indices.breaker.total.limit`, 95%) compares the process's real memory use (its anonymous
resident memory, what a heap is to the JVM) plus the new reservation with its limit, so a request
is refused when the node is already full whatever the other requests reserved. A percentage is a
share of the memory the process may use (`memory.machine_memory`: physical memory or a lower
cgroup limit). Refusals are 429 `circuit_breaking_exception`, which clients retry later.

The `fielddata` breaker (`indices.breaker.fielddata.limit`, 40%) counts the bytes of the
uninverted text fields (`fielddata: true`) this process holds (index/fielddata.py): charged
before a field is uninverted, released when it is cleared (`_cache/clear`) or its segment goes.
Its refusal is PERMANENT in Elasticsearch's terms (a 500: the same request would trip again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from leafsearch.common.settings import human_size
from leafsearch.errors import CircuitBreaking
from leafsearch.services.memory import anonymous_rss

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings

#: What Elasticsearch's BigArrays name their reservations in a breaker's message.
ARRAYS_LABEL = "<reused_arrays>"
#: The parent breaker reads the process's memory at most this often (a read costs ~40 µs, and a
#: search reserves once per segment); the bytes reserved since the reading are added to it.
RSS_SAMPLE_SECONDS = 0.05


def _sized(size: int) -> str:
    return f"{size}/{human_size(size)}"


class Breakers:
    """The node's breakers: `request` (bytes reserved by requests in flight) and its parent."""

    def __init__(self, settings: ClusterSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self.request_used = 0
        self.request_tripped = 0
        self.parent_tripped = 0
        self.fielddata_used = 0
        self.fielddata_tripped = 0
        self._rss = 0  # the last reading of the process's anonymous memory
        self._rss_at = -RSS_SAMPLE_SECONDS  # when it was read (monotonic)
        self._rss_used = 0  # `request_used` at that reading

    def _real_usage(self) -> int:
        """The process's anonymous memory, read at most every `RSS_SAMPLE_SECONDS`, plus what
        requests reserved since (caller holds the lock)."""
        now = time.monotonic()
        if now - self._rss_at >= RSS_SAMPLE_SECONDS:
            self._rss, self._rss_at, self._rss_used = anonymous_rss(), now, self.request_used
        return self._rss + max(0, self.request_used - self._rss_used)

    def request_limit(self) -> int:
        return int(self._settings.get("indices.breaker.request.limit"))

    def total_limit(self) -> int:
        return int(self._settings.get("indices.breaker.total.limit"))

    def reserve(self, size: int, label: str = ARRAYS_LABEL) -> None:
        """Add `size` bytes to the request breaker, or raise `CircuitBreaking` and add nothing."""
        if size <= 0:
            return
        limit, total_limit = self.request_limit(), self.total_limit()
        with self._lock:
            wanted = self.request_used + size
            if limit >= 0 and wanted > limit:
                self.request_tripped += 1
                raise CircuitBreaking(
                    f"[request] Data too large, data for [{label}] would be [{_sized(wanted)}], which is "
                    f"larger than the limit of [{_sized(limit)}]",
                    bytes_wanted=wanted,
                    bytes_limit=limit,
                )
            real = self._real_usage()
            if total_limit >= 0 and real + size > total_limit:
                self.parent_tripped += 1
                raise CircuitBreaking(
                    f"[parent] Data too large, data for [{label}] would be [{_sized(real + size)}], which is "
                    f"larger than the limit of [{_sized(total_limit)}], real usage: [{_sized(real)}], new "
                    f"bytes reserved: [{_sized(size)}], usages [request={_sized(self.request_used)}]",
                    bytes_wanted=real + size,
                    bytes_limit=total_limit,
                )
            self.request_used = wanted

    def release(self, size: int) -> None:
        with self._lock:
            self.request_used -= size

    def fielddata_limit(self) -> int:
        return int(self._settings.get("indices.breaker.fielddata.limit"))

    def charge_fielddata(self, size: int, field: str) -> None:
        """Add `size` bytes of `field`'s fielddata to the fielddata breaker, or raise
        `CircuitBreaking` (PERMANENT) and add nothing."""
        limit, total_limit = self.fielddata_limit(), self.total_limit()
        with self._lock:
            wanted = self.fielddata_used + size
            if limit >= 0 and wanted > limit:
                self.fielddata_tripped += 1
                raise CircuitBreaking(
                    f"[fielddata] Data too large, data for [{field}] would be [{_sized(wanted)}], which is "
                    f"larger than the limit of [{_sized(limit)}]",
                    bytes_wanted=wanted,
                    bytes_limit=limit,
                    durability="PERMANENT",
                )
            real = self._real_usage()
            if total_limit >= 0 and real + size > total_limit:
                self.parent_tripped += 1
                raise CircuitBreaking(
                    f"[parent] Data too large, data for [{field}] would be [{_sized(real + size)}], which is "
                    f"larger than the limit of [{_sized(total_limit)}], real usage: [{_sized(real)}], new "
                    f"bytes reserved: [{_sized(size)}], usages [fielddata={_sized(self.fielddata_used)}]",
                    bytes_wanted=real + size,
                    bytes_limit=total_limit,
                )
            self.fielddata_used = wanted

    def release_fielddata(self, size: int) -> None:
        with self._lock:
            self.fielddata_used -= size

    def counts(self) -> dict[str, int]:
        """What a search worker's breakers report to the server process's `stats`."""
        return {
            "request_used": self.request_used,
            "request_tripped": self.request_tripped,
            "parent_tripped": self.parent_tripped,
            "fielddata_used": self.fielddata_used,
            "fielddata_tripped": self.fielddata_tripped,
        }

    def stats(self, workers: Iterable[dict[str, int]] = ()) -> dict[str, Any]:
        """`breakers` of `GET _nodes/stats`: this process's, plus the `counts` of the search
        workers' (each worker reserves its searches' arrays in its own breakers). The parent's
        estimate is this process's memory: each process's parent compares its own."""
        used, request_tripped, parent_tripped = self.request_used, self.request_tripped, self.parent_tripped
        fielddata_used, fielddata_tripped = self.fielddata_used, self.fielddata_tripped
        for counts in workers:
            used += counts["request_used"]
            request_tripped += counts["request_tripped"]
            parent_tripped += counts["parent_tripped"]
            fielddata_used += counts["fielddata_used"]
            fielddata_tripped += counts["fielddata_tripped"]
        return {
            "request": _breaker_stats(self.request_limit(), used, request_tripped),
            "fielddata": _breaker_stats(self.fielddata_limit(), fielddata_used, fielddata_tripped),
            "parent": _breaker_stats(self.total_limit(), anonymous_rss(), parent_tripped),
        }


def _breaker_stats(limit: int, used: int, tripped: int) -> dict[str, Any]:
    return {
        "limit_size_in_bytes": limit,
        "limit_size": human_size(limit) if limit >= 0 else "-1b",
        "estimated_size_in_bytes": used,
        "estimated_size": human_size(used),
        "overhead": 1.0,
        "tripped": tripped,
    }
