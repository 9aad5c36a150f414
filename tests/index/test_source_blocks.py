"""A segment's `_source` blocks (index/source_blocks.py) give back every source byte for byte:
plain 32-document blocks (small segments, and every segment written before dictionaries) and
8-document blocks with the segment's trained dictionary, read in any order, through the node's
block cache, and by several threads at once."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import orjson
import pytest
import zstandard

from leafsearch.index import source_blocks
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.segment import Segment, SegmentWriter, to_term_array


def random_sources(n: int, seed: int) -> list[bytes]:
    """Log-like JSON documents of varied lengths (a dictionary learns their shared structure)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return [
        orjson.dumps(
            {
                "id": f"{i:08d}",
                "service": f"svc-{int(rng.integers(0, 50)):02d}",
                "bytes": int(rng.integers(0, 10**6)),
                "message": " ".join(rng.choice(words, int(rng.integers(1, 20)))),
                "extra": "é" * int(rng.integers(0, 3)),
            }
        )
        for i in range(n)
    ]


def write_segment(folder: Path, sources: list[bytes]) -> Segment:
    n = len(sources)
    writer = SegmentWriter(n)
    writer.set_ids(to_term_array([str(i) for i in range(n)]), np.arange(n), np.ones(n, dtype=np.int64))
    writer.set_sources(sources)
    writer.write(folder)
    return Segment(folder)


#: What `Segment._stored_range` gives: the sources and each one's shift, or None.
Stored = tuple[bytes, int | np.ndarray] | None

SIZES = [0, 1, 31, 33, source_blocks.DICT_MIN_DOCS - 1, source_blocks.DICT_MIN_DOCS, 5000]


@pytest.mark.parametrize("n", SIZES)
def test_every_source_comes_back(tmp_path: Path, n: int) -> None:
    sources = random_sources(n, seed=n)
    segment = write_segment(tmp_path / "seg", sources)
    with_dict = n >= source_blocks.DICT_MIN_DOCS
    assert (segment._source_dict is not None) == with_dict
    assert segment.source_block_docs == (
        source_blocks.DICT_BLOCK_DOCS if with_dict else source_blocks.PLAIN_BLOCK_DOCS
    )
    assert segment.sources(np.arange(n)) == sources
    rng = np.random.default_rng(n)
    docs = rng.integers(0, max(n, 1), min(n, 300)) if n else np.empty(0, np.int64)
    segment.blocks = BlockCache(64 * 1024)  # scattered reads, then again from the cache
    for _ in range(2):
        assert segment.sources(docs) == [sources[d] for d in docs.tolist()]


def test_a_segment_without_the_dictionary_keys_reads_plain_blocks(tmp_path: Path, monkeypatch) -> None:
    """What every segment written before dictionaries holds: 32-document blocks, no
    `source_dict` in its meta.json, no `_source.dict` file."""
    monkeypatch.setattr(source_blocks, "DICT_MIN_DOCS", 10**9)
    sources = random_sources(3000, seed=1)
    segment = write_segment(tmp_path / "old", sources)
    meta = orjson.loads((tmp_path / "old" / "meta.json").read_bytes())
    assert "source_dict" not in meta and "source_block_docs" not in meta
    assert not (tmp_path / "old" / "_source.dict").exists()
    assert segment.source_block_docs == source_blocks.PLAIN_BLOCK_DOCS
    assert segment.sources(np.arange(2999, -1, -7)) == sources[2999::-7]


def test_sources_a_dictionary_cannot_be_trained_on_stay_plain(tmp_path: Path) -> None:
    sources = [b"{}"] * 5000
    segment = write_segment(tmp_path / "tiny", sources)
    assert segment._source_dict is None
    assert segment.sources(np.arange(0, 5000, 3)) == sources[::3]


def test_a_large_segment_of_plain_blocks_keeps_the_hash_layout(tmp_path: Path) -> None:
    """Sources too small to train a dictionary on: 32-document blocks, in groups of 128."""
    sources = [b'{"i":%d}' % i for i in range(3000)]
    segment = write_segment(tmp_path / "seg", sources)
    assert segment._source_dict is None and segment._source_buckets == source_blocks.HASH_BUCKETS
    assert segment.sources(np.arange(3000)) == sources
    assert segment.sources(np.arange(2999, -1, -7)) == sources[2999::-7]


def test_threads_read_one_dictionary_segment_at_once(tmp_path: Path) -> None:
    sources = random_sources(4000, seed=7)
    segment = write_segment(tmp_path / "seg", sources)
    segment.blocks = BlockCache(32 * 1024)  # small: threads evict each other's blocks
    failures: list[int] = []

    def read(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(30):
            docs = np.sort(rng.integers(0, 4000, 100))
            if segment.sources(docs) != [sources[d] for d in docs.tolist()]:
                failures.append(seed)
                return

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# ---- the hash layout: a slice's documents in blocks of their own ----------------------------


def slices_of(segment: Segment, count: int) -> list[np.ndarray]:
    """Each slice's documents of a sliced scroll by `_id` (floorMod of the id's hash)."""
    hashes = np.asarray(segment.slice_hashes, dtype=np.int64)
    return [np.flatnonzero(np.mod(hashes, count) == s) for s in range(count)]


def blocks_read(segment: Segment, docs: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The blocks `segment.sources(docs)` decompresses: one by one, as one span (its shift one
    int), or as the documents' own blocks of a span (a shift per document)."""
    read: set[int] = set()
    real, real_range = Segment.source_blocks, Segment._stored_range

    def spy(self: Segment, indexes: list[int], *, cached: bool = True) -> list[bytes]:
        read.update(indexes)
        return real(self, indexes, cached=cached)

    def spy_range(self: Segment, places: np.ndarray, blocks: np.ndarray) -> Stored:
        found = real_range(self, places, blocks)
        if found is not None and isinstance(found[1], int):
            read.update(range(int(blocks.min()), int(blocks.max()) + 1))
        elif found is not None:
            read.update(np.unique(blocks).tolist())
        return found

    with monkeypatch.context() as patched:
        patched.setattr(Segment, "source_blocks", spy)
        patched.setattr(Segment, "_stored_range", spy_range)
        segment.sources(docs)
    return read


@pytest.mark.parametrize("layout", ["hash", "doc order"])
def test_a_walks_batch_reads_its_blocks_span_in_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """A batch of consecutive documents (a `_doc` scroll's, ascending; a PIT page's by time,
    descending), from any first document (groups cut at both ends), reads its blocks' span in
    one call and gives the same sources as block by block; a slice's batch (the other slices'
    blocks between its own) reads its own blocks in one call too, in the hash layout (in doc
    order its documents are in every block, too few a block: one by one); scattered hits still
    read their own blocks one by one."""
    sources = random_sources(6000, seed=11)
    with monkeypatch.context() as patched:
        if layout == "doc order":  # the writer before the hash layout
            patched.setattr(
                SegmentWriter,
                "set_sources",
                lambda self, given: setattr(self, "sources", source_blocks.compress(given)),
            )
        segment = write_segment(tmp_path / "seg", sources)
    assert segment._source_buckets == (4 if layout == "hash" else 0)
    spans: list[int] = []
    real_range = Segment._stored_range

    def spy_range(self: Segment, places: np.ndarray, blocks: np.ndarray) -> Stored:
        found = real_range(self, places, blocks)
        spans.append(found is not None)
        return found

    monkeypatch.setattr(Segment, "_stored_range", spy_range)
    for first in (0, 1, 37, 1000, 4321, 5000):
        for docs in (
            np.arange(first, min(first + 1000, 6000)),
            np.arange(min(first + 1000, 6000) - 1, first - 1, -1),
        ):
            assert segment.sources(docs) == [sources[d] for d in docs.tolist()]
    assert all(spans) and len(spans) == 12
    spans.clear()
    hashes = np.asarray(segment.slice_hashes, dtype=np.int64)
    slice_docs = np.flatnonzero(np.mod(hashes, 2) == 1)[:1000]
    scattered = np.sort(np.random.default_rng(5).choice(6000, 500, replace=False))
    for docs in (slice_docs, scattered):
        assert segment.sources(docs) == [sources[d] for d in docs.tolist()]
    assert spans == [layout == "hash", False]


def test_a_large_segment_keeps_each_slices_sources_in_blocks_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written in the hash layout, a slice of 2 or 4 by `_id` reads only its own blocks (the
    slices' blocks are disjoint, about a half or a quarter of them each), in any order and
    through the cache; 3 slices (not a power of two) read every block, and all sources come
    back byte for byte."""
    sources = random_sources(5000, seed=3)
    segment = write_segment(tmp_path / "seg", sources)
    meta = orjson.loads((tmp_path / "seg" / "meta.json").read_bytes())
    assert meta["source_buckets"] == source_blocks.HASH_BUCKETS
    assert (tmp_path / "seg" / "_source.slots.npy").exists()
    blocks = len(segment._source_blocks) - 1
    starts = np.asarray(np.load(tmp_path / "seg" / "_source.starts.npy"))
    holding = set(np.flatnonzero(np.diff(starts) > 0).tolist())  # a bucket can be empty in a group
    for count in (2, 4):
        read = [blocks_read(segment, docs, monkeypatch) for docs in slices_of(segment, count)]
        for s, mine in enumerate(read):
            assert all(mine.isdisjoint(other) for other in read[s + 1 :])
            assert len(mine) <= blocks // count + blocks // 20
        assert set().union(*read) == holding
    for docs in slices_of(segment, 3):
        assert len(blocks_read(segment, docs, monkeypatch)) > blocks * 0.9
    segment.blocks = BlockCache(64 * 1024)
    for docs in [*slices_of(segment, 2), np.arange(4999, -1, -3)]:
        for _ in range(2):
            assert segment.sources(docs) == [sources[d] for d in docs.tolist()]


def test_a_segment_stored_in_doc_order_reads_and_merges_with_one_in_the_hash_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What every segment written before the hash layout holds (no `source_buckets`, sources
    in doc order): read as before, and merged with a segment in the hash layout into one in it."""
    from leafsearch.index.segment_build import merge_segments

    def in_doc_order(self: SegmentWriter, sources: list[bytes]) -> None:  # the writer before
        self.sources = source_blocks.compress(sources)

    old_sources, new_sources = random_sources(3000, seed=5), random_sources(2000, seed=6)
    with monkeypatch.context() as patched:
        patched.setattr(SegmentWriter, "set_sources", in_doc_order)
        old = write_segment(tmp_path / "old", old_sources)
    assert "source_buckets" not in orjson.loads((tmp_path / "old" / "meta.json").read_bytes())
    assert not (tmp_path / "old" / "_source.slots.npy").exists()
    assert old.sources(np.arange(2999, -1, -7)) == old_sources[2999::-7]
    new = write_segment(tmp_path / "new", new_sources)
    live = np.ones(2000, dtype=bool)
    live[::3] = False
    merge_segments([(old, None), (new, live)], tmp_path / "merged")
    merged = Segment(tmp_path / "merged")
    expected = old_sources + [s for s, keep in zip(new_sources, live, strict=True) if keep]
    assert merged._source_buckets == source_blocks.HASH_BUCKETS
    assert merged.sources(np.arange(merged.max_doc)) == expected
    read = [blocks_read(merged, docs, monkeypatch) for docs in slices_of(merged, 2)]
    assert read[0].isdisjoint(read[1])


def test_the_hash_layout_gives_a_slice_count_dividing_its_buckets_without_hashing(tmp_path: Path) -> None:
    segment = write_segment(tmp_path / "seg", random_sources(3000, seed=8))
    hashes = np.asarray(segment.slice_hashes, dtype=np.int64)
    for count in (1, 2, 4):
        assert np.array_equal(segment.id_slices(count), np.mod(hashes, count))
    assert segment.id_slices(3) is None and segment.id_slices(8) is None
    small = write_segment(tmp_path / "small", random_sources(100, seed=9))
    assert small.id_slices(2) is None


def test_a_span_shorter_than_its_stored_lengths_is_refused(tmp_path: Path) -> None:
    """A walk's batch read as one span whose blocks hold fewer bytes than the stored lengths say
    (a damaged folder) fails with zstd's error, not with sources cut from a short buffer."""
    sources = random_sources(3000, seed=13)
    segment = write_segment(tmp_path / "seg", sources)
    ends = np.array(segment._source_ends)
    ends[-1] += 7  # the last source claims 7 bytes more than its block holds
    segment.__dict__["_source_ends"] = ends
    with pytest.raises(zstandard.ZstdError, match="are short"):
        segment.sources(np.arange(2000, 3000))
    assert segment.sources(np.arange(0, 1000)) == sources[:1000]


def resident_bytes(path: Path) -> int:
    """This process's resident bytes of its memory mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's head: range, perms, offset, dev, inode, path
            inside = len(fields) >= 6 and fields[5] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def test_a_walk_leaves_no_source_page_mapped(tmp_path: Path) -> None:
    """A walk's reads (runs of blocks, read without the cache) unmap the file pages they touched,
    so a worker's memory does not grow by every segment it walked: what stays mapped is at most
    the kernel's fault-around window (64 KB) at each end of the last read, not the file (~1 MB).
    The sources read are the same, and a read after it maps them again."""
    sources = random_sources(40_000, seed=7)
    segment = write_segment(tmp_path / "seg", sources)
    path = tmp_path / "seg" / "_source.bin"
    assert path.stat().st_size > 800 * 1024
    read = []
    for start in range(0, len(sources), 1000):
        read += segment.sources(np.arange(start, start + 1000))
    assert read == sources
    assert resident_bytes(path) <= 2 * 64 * 1024
    scattered = np.sort(np.random.default_rng(3).choice(len(sources), 40, replace=False))
    assert segment.sources(scattered) == [sources[i] for i in scattered]
