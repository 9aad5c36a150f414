"""Merges in a worker process.

A merge is seconds of numpy and Python work over whole segments. Run on a thread of the server it
holds the interpreter lock most of that time, and every search and write in flight slows down;
Lucene runs merges on threads of their own for the same reason. Because segments are immutable
files, a merge is a pure function of segment folders and live-docs arrays, so it runs in a separate
process while the server keeps serving on the other core; the shard then opens the folder the
worker wrote. The process is its owner's (`MergeWorker`: a node's, or a shard actor's, in
`ShardServices`): started by the first merge, ended when the owner closes.

Merges run beside searches and writes, as Lucene's merge scheduler runs them, rather than waiting
for a quiet index: a busy index that never merged would search an ever longer list of small
segments, and each costs every query its own pass (on one million bench documents, 44 segments
cost a W6 query 13.5 million instructions, the same documents in 8 merged ones 12.3 million,
callgrind, the segments' sort orders already on disk). The worker runs at a
lower CPU priority (`NICENESS`), so on a machine whose cores are all busy the searches and writes
get them first and the merge takes what is left, instead of the throughput Lucene's merge
throttle bounds by bytes per second.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np

from leafsearch.index.index_sort import IndexSort

_PR_SET_PDEATHSIG = 1
#: How much lower the worker's CPU priority is than the server's (`nice` increment).
NICENESS = 10


def _merge_folders(
    parts: list[tuple[str, np.ndarray | None]], folder: str, index_sort: IndexSort | None
) -> np.ndarray | None:
    """The worker's side: open the segments by path and write the merged one. What the merge held
    (whole columns of the segments, their postings) goes back to the system at once, rather than
    staying in the worker's heap until its next merge."""
    from leafsearch.index.segment import Segment
    from leafsearch.index.segment_build import merge_segments
    from leafsearch.services.memory import trim

    try:
        return merge_segments([(Segment(Path(path)), live) for path, live in parts], Path(folder), index_sort)
    finally:
        trim()


def _start_worker(server: int) -> None:
    """Worker initializer: yield the CPU to the server's requests, die with the server, and map
    large arrays on their own as the server does (services/memory.py)."""
    from leafsearch.services.memory import tune_allocator

    os.nice(NICENESS)
    tune_allocator()
    _die_with_parent(server)


def _die_with_parent(server: int) -> None:
    """End with the server, even when the server is killed with SIGKILL
    (an orphaned worker would hold the server's files and output pipes, and keep the
    multiprocessing resource tracker alive, which ends only when every holder of its pipe has).

    `server` is the server's pid, passed in: the server may have died while this process was
    still starting (importing numpy), in which case the parent is already init and comparing with
    `os.getppid()` would watch the wrong process forever."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the watcher below still notices
    if os.getppid() != server:  # died before the death signal was asked for
        os._exit(1)

    def watch() -> None:
        while os.getppid() == server:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


class MergeWorker:
    """The merge worker process of one owner: started on the first merge, replaced by the next
    merge once it died, ended by `close`."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the server has threads (uvicorn, refresh, reaper) a fork would
                # copy mid-flight.
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(os.getpid(),),
                )
            return self._pool

    def merge(
        self, parts: list[tuple[Path, np.ndarray | None]], folder: Path, index_sort: IndexSort | None = None
    ) -> np.ndarray | None:
        """Write the merge of `parts` into `folder` in the worker process; raises what the merge
        raised. Returns what `merge_segments` returns: where each merged document came from, when
        sorted."""
        pool = self._executor()
        try:
            return pool.submit(
                _merge_folders, [(str(p), live) for p, live in parts], str(folder), index_sort
            ).result()
        except BrokenProcessPool:
            # The worker died (killed, out of memory): this merge fails and the next one starts a
            # new worker, rather than every later merge failing on the broken pool.
            self._forget(pool)
            raise

    def _forget(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """End the process (a merge running finishes first); a later merge would start another."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
