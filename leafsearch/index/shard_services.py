"""What the owner of shards (a Node, a shard actor) gives every shard it opens, and ends with
itself: the cache of decompressed source blocks, the listeners of their events, the flush threads
that write full buffers as segments (or hands them to the owner's `builder`), and the merge
worker process.

One per owner, not per process: two nodes in one process keep their own threads, processes and
listeners, and closing one ends what was its own only. A shard opened alone (tests) has its own.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.context import BaseContext

from leafsearch.index.block_cache import BlockCache
from leafsearch.index.buffer_wire import Builder
from leafsearch.index.events import ShardEvents
from leafsearch.index.fielddata import Fielddata
from leafsearch.index.merge_worker import MergeWorker

#: Buffers written as segments at once, each by a search worker when the owner has them (two
#: builds of a shard overlap: `shard.MAX_FLUSHING`).
FLUSH_THREADS = 2


class ShardServices:
    def __init__(
        self,
        blocks: BlockCache | None = None,
        events: ShardEvents | None = None,
        fielddata: Fielddata | None = None,
        processes: BaseContext | None = None,
        merges: MergeWorker | None = None,
    ) -> None:
        """`blocks`: the owner's block cache (None: segments decompress every read); `events`:
        the owner's, when its caches listen already (None: new ones); `fielddata`: the owner
        process's uninverted text fields (None: built per use, uncounted); `processes`: how the
        merge worker starts (merge_worker.py; None: spawned); `merges`: a merge worker these
        services share with others of their process and do not end (a Ray machine actor's, for
        all its shards); None: their own."""
        self.blocks = blocks
        self.fielddata = fielddata
        self.events = events if events is not None else ShardEvents()
        self.merges = merges if merges is not None else MergeWorker(processes)
        self._own_merges = merges is None
        #: Where full buffers are written as segments when not by the flush thread itself: the
        #: owner's search workers (buffer_wire.py), set by the owner once it has them.
        self.builder: Builder | None = None
        #: ... for buffers of at least this many documents (`indices.segments.worker_build_min_docs`).
        self.builder_min_docs = 500
        self._flush_pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def flusher(self) -> ThreadPoolExecutor:
        """The threads that write full buffers as segments for every shard of the owner, one
        per buffer a shard may have on them at once (started on first use)."""
        with self._lock:
            if self._flush_pool is None:
                self._flush_pool = ThreadPoolExecutor(
                    max_workers=FLUSH_THREADS, thread_name_prefix="leafsearch-flush"
                )
            return self._flush_pool

    def close(self) -> None:
        """End the flush thread and the merge worker (unless shared), once what they run is done."""
        with self._lock:
            pool, self._flush_pool = self._flush_pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._own_merges:
            self.merges.close()
