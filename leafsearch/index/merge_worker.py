"""Merges in a worker process.

A merge is seconds of numpy and Python work over whole segments. Run on a thread of the server it
holds the interpreter lock most of that time, and every search and write in flight slows down;
Lucene runs merges on threads of their own for the same reason. Because segments are immutable
files, a merge is a pure function of segment folders and live-docs arrays, so it runs in a separate
process while the server keeps serving on the other core; the shard then opens the folder the
worker wrote. The process is its owner's (`MergeWorker`: a node's, or a Ray machine actor's for
all its shards, in `ShardServices`): started by the first merge, ended when the owner closes.

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

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path

import numpy as np

from leafsearch.index.index_sort import IndexSort
from leafsearch.index.source_blocks import ZSTD

#: How much lower the worker's CPU priority is than the server's (`nice` increment).
NICENESS = 10


def _merge_folders(
    parts: list[tuple[str, np.ndarray | None]], folder: str, index_sort: IndexSort | None, codec: str = ZSTD
) -> np.ndarray | None:
    """The worker's side: open the segments by path and write the merged one. What the merge held
    (whole columns of the segments, their postings) goes back to the system at once, rather than
    staying in the worker's heap until its next merge."""
    from leafsearch.index.segment import Segment
    from leafsearch.index.segment_build import merge_segments
    from leafsearch.services.memory import trim

    try:
        segments = [(Segment(Path(path)), live) for path, live in parts]
        return merge_segments(segments, Path(folder), index_sort, codec)
    finally:
        trim()


def _start_worker(server: Connection) -> None:
    """Worker initializer: yield the CPU to the server's requests, die with the server, and map
    large arrays on their own as the server does (services/memory.py)."""
    from leafsearch.services.memory import tune_allocator

    os.nice(NICENESS)
    tune_allocator()
    _die_with_server(server)


def _die_with_server(server: Connection) -> None:
    """End with the server, even when the server is killed with SIGKILL (an orphaned worker would
    hold the server's files and output pipes, and keep the multiprocessing resource tracker alive,
    which ends only when every holder of its pipe has).

    `server` is the read end of a pipe whose write end the server alone holds: it reads as ended
    once the server is gone, whoever this process's parent is (the server when spawned, its
    zygote when forked, search/workers/zygote.py), and also when the server died while this
    process was still starting."""

    def watch() -> None:
        server.poll(None)  # never written: readable only at its end
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


class MergeWorker:
    """The merge worker process of one owner: started on the first merge, replaced by the next
    merge once it died, ended by `close`."""

    def __init__(self, processes: BaseContext | None = None, workers: int = 1) -> None:
        """`processes`: how the worker starts (a served node's: forked from its zygote,
        search/workers/zygote.py); None: spawned (not forked from the owner itself: it has
        threads, uvicorn's, the refresh and flush ones, a fork would copy mid-flight).
        `workers`: merges that may run at once, each in a process of its own, started only when
        that many merges are running (a Ray machine actor's, whose shards merge on threads of
        their own: ray_backend/actor.py)."""
        self._processes = processes or multiprocessing.get_context("spawn")
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        #: The pipe the pool's worker watches (`_die_with_server`): its write end is held here only.
        self._alive: tuple[Connection, Connection] | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._alive = multiprocessing.Pipe(duplex=False)
                self._pool = ProcessPoolExecutor(
                    max_workers=self._workers,
                    mp_context=self._processes,
                    initializer=_start_worker,
                    initargs=(self._alive[0],),
                )
            return self._pool

    def merge(
        self,
        parts: list[tuple[Path, np.ndarray | None]],
        folder: Path,
        index_sort: IndexSort | None = None,
        codec: str = ZSTD,
    ) -> np.ndarray | None:
        """Write the merge of `parts` into `folder` in the worker process, its sources in `codec`;
        raises what the merge raised. Returns what `merge_segments` returns: where each merged
        document came from, when sorted."""
        pool = self._executor()
        try:
            return pool.submit(
                _merge_folders, [(str(p), live) for p, live in parts], str(folder), index_sort, codec
            ).result()
        except BrokenProcessPool:
            # The worker died (killed, out of memory): this merge fails and the next one starts a
            # new worker, rather than every later merge failing on the broken pool.
            self._forget(pool)
            raise

    def _forget(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is not pool:
                return
            self._pool, alive, self._alive = None, self._alive, None
        pool.shutdown(wait=False, cancel_futures=True)
        _close(alive)

    def close(self) -> None:
        """End the process (a merge running finishes first); a later merge would start another."""
        with self._lock:
            pool, self._pool, alive, self._alive = self._pool, None, self._alive, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _close(alive)


def _close(pipe: tuple[Connection, Connection] | None) -> None:
    """Close both ends of a worker's pipe: a worker still running (killed while stuck, a pool
    forgotten while shutting down) reads its end and exits."""
    for end in pipe or ():
        end.close()
