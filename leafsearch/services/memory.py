"""The process's memory: how much the machine gives it, how much it holds, and giving it back.

Memory limits written as a percentage (`indices.breaker.request.limit: 60%`) are shares of the
memory this process may use: the machine's physical memory, or the cgroup's limit when the server
runs in a container that has a lower one. That is what a JVM heap is to Elasticsearch.

Why the allocator needs help: numpy arrays bigger than glibc's mmap threshold are mapped and
unmapped on their own, but glibc raises that threshold (up to 32 MiB) each time such an array is
freed, so after one large request every later array of a few MiB comes from the heap arenas, and
arena memory freed in the middle is kept by the process. RSS then stays at the worst request's
peak. Pinning the thresholds at start-up stops that drift; trimming after a request that
allocated a lot hands back what the arenas still hold.

glibc also gives threads arenas of their own (up to 8 per core), each keeping its freed memory
apart: during a bulk load the server's 13 to 15 threads held 50 to 90 MB in thread arenas. Python
allocates under the interpreter lock, so threads gain little from arenas of their own: two
(`ARENA_MAX`) share the freed memory among all of them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from functools import cache
from io import FileIO
from pathlib import Path

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: Arrays from this size up are mapped on their own and unmapped when freed.
MMAP_THRESHOLD = 1 << 20
#: The same in a search worker: a segment build's arrays of 1 to 8 MB reuse the heap (trimmed after
#: the build) instead of each faulting in fresh pages. 300,000-document transfers: with 1 MB the
#: workers spent 5.6-5.9 ms of CPU per 1,000 bulk documents against 4.1-4.3 unpinned, at 8 MB
#: 4.5-5.4, and their processes peaked at 678-705 MB together, 761-939 unpinned, 708-725 at 8 MB.
WORKER_MMAP_THRESHOLD = 8 << 20
#: Free memory at the top of an arena beyond this goes back to the system at once.
TRIM_THRESHOLD = 8 << 20
#: glibc arenas the process's threads share.
ARENA_MAX = 2
#: A request after which the process holds this much more than after the last trim trims again.
TRIM_AFTER_GROWTH = 64 << 20
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


@cache
def machine_memory() -> int:
    """Bytes of memory the process may use: physical memory, or a lower cgroup limit."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            return int(text)
    return total


def anonymous_rss(statm: FileIO | None = None) -> int:
    """The process's resident memory that is not a mapped file (0 where /proc is missing): what
    the heap holds. Segment files read through mmap are resident too, but they are not memory the
    node could run out of or give back, and a walk over them would look like growth. `statm`:
    this process's /proc/self/statm kept open (`open_statm`), read again in one call (1.4 µs
    against 25 for an open, read and close: a request's `Trimmer` check)."""
    try:
        if statm is None:
            with open("/proc/self/statm", "rb") as fh:
                raw = fh.read()
        else:
            raw = os.pread(statm.fileno(), 256, 0)
        fields = raw.split()
        return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def open_statm() -> FileIO | None:
    """This process's /proc/self/statm, open for `anonymous_rss` (None where /proc is missing)."""
    try:
        return FileIO("/proc/self/statm", "rb")
    except OSError:
        return None


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc only: other C libraries have no mallopt / malloc_trim
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def tune_allocator(mmap_threshold: int = MMAP_THRESHOLD) -> None:
    """Pin glibc's mmap and trim thresholds and its number of arenas (see the module docstring),
    before the process starts its threads; a no-op elsewhere."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        libc.mallopt(_M_ARENA_MAX, ARENA_MAX)


def trim() -> None:
    """Give the heap arenas' free pages back to the system (glibc's `malloc_trim(0)`)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


class Trimmer:
    """Trims after a request that left the process much bigger than the last trim did: a request
    that allocated a lot (its arrays freed, their pages still held by the arenas of the worker
    threads) pays one `malloc_trim`; ordinary requests pay one read of /proc/self/statm (kept open).

    Young reference cycles are collected first. The server raises the collector's thresholds
    (cli.py), so a cycle left by a request (none should be: errors.release_frames and the tests
    see to it) could otherwise hold its memory for hundreds of requests; here it costs at most
    `growth`. Only the young generations: a request's cycle is young unless a collection of
    generation 1 ran while it was still in use (one per 5,000,000 allocations with the server's
    thresholds), and a full collection traverses everything the node holds, under a bulk load the
    buffers' lists: 5 to 25 ms each time, 2.5% of the server's CPU (bench/RESULTS.md, "Bulk with 4
    clients (session 17)"). Older garbage waits for the thresholds' full collection."""

    def __init__(self, growth: int = TRIM_AFTER_GROWTH) -> None:
        self.growth = growth
        self._statm = open_statm()
        self.baseline = anonymous_rss(self._statm)
        self.trims = 0

    def after_request(self) -> None:
        if anonymous_rss(self._statm) > self.baseline + self.growth:
            gc.collect(1)
            trim()
            self.trims += 1
            self.baseline = anonymous_rss(self._statm)
