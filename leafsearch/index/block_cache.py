"""Recently decompressed `_source` blocks, shared by every reader of a node (the Node owns one,
bounded by `indices.cache.source_blocks.size`, and its shards hand it to their segments).

Why: a sliced scroll splits documents by a hash of their id, so every slice reads every block of
a segment stored in doc order (small and older segments, or a slice count that is not 2 or 4:
source_blocks.py's hash layout). Slices read in parallel move through the segments together, and
the later ones find the blocks the first one decompressed. Bounded by bytes, least recently used
first out; keyed by segment folder (segments are immutable and never reuse a folder name) and
block number.
"""

from __future__ import annotations

from leafsearch.common.bounded_cache import BoundedCache


class BlockCache(BoundedCache[tuple[str, int], bytes]):
    """Decompressed blocks keyed by (segment folder, block number), bounded by their bytes."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, len)
