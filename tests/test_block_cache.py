"""The decompressed `_source` block cache: bounded by bytes, least recently used out first."""

from __future__ import annotations

from leafsearch.index.block_cache import BlockCache


def test_the_cache_keeps_the_most_recently_used_blocks_within_its_bytes() -> None:
    cache = BlockCache(max_bytes=10)
    cache.put(("seg_a", 0), b"aaaa")
    cache.put(("seg_a", 1), b"bbbb")
    assert cache.get(("seg_a", 0)) == b"aaaa"  # now the most recently used
    cache.put(("seg_b", 0), b"cccc")  # 12 bytes: the least recently used block goes
    assert cache.get(("seg_a", 1)) is None
    assert cache.get(("seg_a", 0)) == b"aaaa"
    assert cache.get(("seg_b", 0)) == b"cccc"
    cache.put(("seg_b", 1), b"x" * 11)  # larger than the whole cache: nothing stays
    assert [cache.get(k) for k in (("seg_a", 0), ("seg_b", 0), ("seg_b", 1))] == [None, None, None]


def test_a_block_is_stored_once() -> None:
    cache = BlockCache(max_bytes=8)
    cache.put(("seg", 3), b"1234")
    cache.put(("seg", 3), b"1234")
    cache.put(("seg", 4), b"5678")
    assert cache.get(("seg", 3)) == b"1234" and cache.get(("seg", 4)) == b"5678"
