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
    cache.put(("seg_b", 1), b"x" * 11)  # larger than the whole cache: not kept, nothing pushed out
    assert [cache.get(k) for k in (("seg_a", 0), ("seg_b", 0), ("seg_b", 1))] == [b"aaaa", b"cccc", None]
    assert cache.nbytes == 8 and cache.evictions == 1


def test_a_block_is_stored_once() -> None:
    cache = BlockCache(max_bytes=8)
    cache.put(("seg", 3), b"1234")
    cache.put(("seg", 3), b"1234")
    cache.put(("seg", 4), b"5678")
    assert cache.get(("seg", 3)) == b"1234" and cache.get(("seg", 4)) == b"5678"


def test_entries_of_what_is_gone_are_discarded_and_a_smaller_bound_evicts() -> None:
    cache = BlockCache(max_bytes=100)
    for segment in ("seg_a", "seg_b"):
        for block in range(3):
            cache.put((segment, block), b"12345")
    cache.discard_where(lambda key, _: key[0] == "seg_a")  # seg_a was deleted
    assert len(cache) == 3 and cache.nbytes == 15
    cache.get(("seg_b", 0))
    cache.resize(10)  # the least recently used go first
    assert [cache.get(("seg_b", b)) for b in range(3)] == [b"12345", None, b"12345"]
