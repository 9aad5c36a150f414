"""The workloads, by the name used on the command line; each returns its rows."""

from __future__ import annotations

from collections.abc import Callable

from bench.harness import Context, Row
from bench.workloads import indexing, offset, scroll, search_after

WORKLOADS: dict[str, tuple[str, Callable[[Context], list[Row]]]] = {
    "W0": ("indexing: bulk throughput, disk, memory, restart", indexing.run),
    "W1": ("offset paging with from/size", offset.run),
    "W2": ("search_after over a PIT, all documents", search_after.run_all),
    "W3": ("search_after over a PIT, match + term query", search_after.run_query),
    "W4": ("export with scroll, sliced scroll, open scroll memory", scroll.run),
}
