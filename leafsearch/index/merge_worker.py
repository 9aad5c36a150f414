"""Merges in a worker process.

A merge is seconds of numpy and Python work over whole segments. Run on a thread of the server it
holds the interpreter lock most of that time, and every search and write in flight slows down;
Lucene runs merges on threads of their own for the same reason. Because segments are immutable
files, a merge is a pure function of segment folders and live-docs arrays, so it runs in a separate
process (started once, on first use) while the server keeps serving on the other core; the shard
then opens the folder the worker wrote.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from leafsearch.index.index_sort import IndexSort

_PR_SET_PDEATHSIG = 1
_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _merge_folders(
    parts: list[tuple[str, np.ndarray | None]], folder: str, index_sort: IndexSort | None
) -> np.ndarray | None:
    """The worker's side: open the segments by path and write the merged one."""
    from leafsearch.index.segment import Segment
    from leafsearch.index.segment_build import merge_segments

    return merge_segments([(Segment(Path(path)), live) for path, live in parts], Path(folder), index_sort)


def _die_with_parent(server: int) -> None:
    """Worker initializer: end with the server, even when the server is killed with SIGKILL
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


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # spawn, not fork: the server has threads (uvicorn, refresh, reaper) a fork would copy mid-flight.
            _pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_die_with_parent,
                initargs=(os.getpid(),),
            )
            atexit.register(shutdown)
        return _pool


def merge_in_worker(
    parts: list[tuple[Path, np.ndarray | None]], folder: Path, index_sort: IndexSort | None = None
) -> np.ndarray | None:
    """Write the merge of `parts` into `folder` in the worker process; raises what the merge raised.
    Returns what `merge_segments` returns: where each merged document came from, when sorted."""
    return (
        _executor()
        .submit(_merge_folders, [(str(p), live) for p, live in parts], str(folder), index_sort)
        .result()
    )


def shutdown() -> None:
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
