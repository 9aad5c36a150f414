"""Recently decompressed `_source` blocks, shared by every reader of a node (the Node owns one,
bounded by `indices.cache.source_blocks.size`, and its shards hand it to their segments).

Why: a sliced scroll splits documents by a hash of their id, so every slice reads every block of
a segment. Slices read in parallel move through the segments together, and the later ones find
the blocks the first one decompressed. Bounded by bytes, least recently used first out; keyed by
segment folder (segments are immutable and never reuse a folder name) and block number.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class BlockCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> bytes | None:
        with self._lock:
            data = self._blocks.get(key)
            if data is not None:
                self._blocks.move_to_end(key)
            return data

    def resize(self, max_bytes: int) -> None:
        """Set the bound (`indices.cache.source_blocks.size`); blocks that no longer fit go."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._blocks:
            self._bytes -= len(self._blocks.popitem(last=False)[1])

    def put(self, key: tuple[str, int], data: bytes) -> None:
        with self._lock:
            if key in self._blocks:
                return
            self._blocks[key] = data
            self._bytes += len(data)
            self._evict()
