"""What the owner of shards hears of them: a snapshot released for good, segment files deleted.

Caches keyed by snapshots (a node's HitLists) forget a snapshot when it goes, and the search
worker pool tells its workers, which also close the segments whose files were deleted. The
owner (a Node, a search worker process, a shard actor) makes one `ShardEvents` and hands it to
the shards, indices and mirrors it opens, so two nodes in one process never hear each other.
Listeners register and unregister from any thread; an event is told to the listeners registered
when it happens, outside the lock (a listener may take its own locks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leafsearch.index.searcher import Searcher


class ShardEvents:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot_closed: list[Callable[[Searcher], None]] = []
        self._files_deleted: list[Callable[[Path], None]] = []

    def on_snapshot_closed(self, listener: Callable[[Searcher], None]) -> None:
        with self._lock:
            self._snapshot_closed.append(listener)

    def on_files_deleted(self, listener: Callable[[Path], None]) -> None:
        with self._lock:
            self._files_deleted.append(listener)

    def remove(self, listener: Callable[..., None]) -> None:
        """Stop telling `listener` anything (its owner closes)."""
        with self._lock:
            self._snapshot_closed = [x for x in self._snapshot_closed if x != listener]
            self._files_deleted = [x for x in self._files_deleted if x != listener]

    def snapshot_closed(self, searcher: Searcher) -> None:
        """The last reference to `searcher` was released (before its segments' files may go)."""
        with self._lock:
            listeners = list(self._snapshot_closed)
        for listener in listeners:
            listener(searcher)

    def files_deleted(self, folder: Path) -> None:
        """The segment files under `folder` (one segment's, or a whole index's) are deleted."""
        with self._lock:
            listeners = list(self._files_deleted)
        for listener in listeners:
            listener(folder)
