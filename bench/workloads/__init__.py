"""The workloads, by the name used on the command line; each returns its rows."""

from __future__ import annotations

from collections.abc import Callable

from bench.harness import Context, Row
from bench.workloads import (
    attacks,
    fresh_snapshot,
    hit_options,
    indexing,
    offset,
    scroll,
    search_after,
    top_pages,
    under_writes,
)

WORKLOADS: dict[str, tuple[str, Callable[[Context], list[Row]]]] = {
    "W0": ("indexing: bulk throughput, disk, memory, restart", indexing.run),
    "W1": ("offset paging with from/size", offset.run),
    "W2": ("search_after over a PIT, all documents", search_after.run_all),
    "W3": ("search_after over a PIT, match + term query", search_after.run_query),
    "W4": ("export with scroll, sliced scroll, open scroll memory", scroll.run),
    "W6": ("distinct term + range queries sorted by time, first page", top_pages.run_service_range),
    "W7": ("first page of match_all by time on a new snapshot", fresh_snapshot.run),
    "W8": ("distinct range queries sorted by bytes", top_pages.run_bytes_sort),
    "W9": ("search_after without a PIT, deep; size 0 terms aggregation", top_pages.run_cursors),
    "W10": ("W6 queries while 5,000 docs/s are indexed", under_writes.run),
    "W11": ("GET / latency while heavy or pathological searches run", attacks.run),
    "W12": ("a page of 5,000 hits with version, seq_no or docvalue_fields vs plain", hit_options.run),
}
