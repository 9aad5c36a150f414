"""A merge copies its parts' compressed source blocks where every document of a group is live,
and compresses the rest again (index/source_blocks.py's runs): whatever the parts (the hash
layout of a build, doc-order segments written before it, small plain ones, merged ones in runs)
and their deletes, every source reads back byte for byte, in any order, through the block cache,
and a slice of 2 or 4 still reads only its own blocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from leafsearch.index import source_blocks
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.segment import Segment, SegmentWriter
from leafsearch.index.segment_build import merge_segments
from tests.index.test_source_blocks import blocks_read, random_sources, slices_of, write_segment

#: Runs as short as this are copied in these tests (4 groups of 64 dictionary blocks' documents).
COPY_MIN = 256


@pytest.fixture(autouse=True)
def short_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source_blocks, "COPY_MIN_DOCS", COPY_MIN)


def meta_of(segment: Segment) -> dict:
    return orjson.loads((segment.folder / "meta.json").read_bytes())


def stored_blocks(segment: Segment) -> list[bytes]:
    """Each compressed block of the segment, as stored."""
    data = (segment.folder / "_source.bin").read_bytes()
    offsets = np.asarray(segment._source_blocks).tolist()
    return [data[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def in_doc_order(folder: Path, sources: list[bytes], monkeypatch: pytest.MonkeyPatch) -> Segment:
    """A segment as every one written before the hash layout (sources in doc order)."""

    def before(self: SegmentWriter, given: list[bytes]) -> None:
        self.sources = source_blocks.compress(given)

    with monkeypatch.context() as patched:
        patched.setattr(SegmentWriter, "set_sources", before)
        return write_segment(folder, sources)


def assert_reads(segment: Segment, expected: list[bytes], seed: int) -> None:
    """Every source back, in doc order, scattered (twice through a cache), joined; the slices of 2
    and 4 read off the layout as hashing gives them."""
    n = len(expected)
    assert segment.max_doc == n
    assert segment.sources(np.arange(n)) == expected
    for lo in range(0, n, 97):  # a walk's batches (descending, as a PIT page by time): most in one run
        docs = np.arange(min(lo + 97, n) - 1, lo - 1, -1)
        assert segment.sources(docs) == [expected[d] for d in docs.tolist()]
    for lo in range(0, n, 700):  # a `_doc` scroll's batches of 1,000: a span of blocks, in a run or across
        docs = np.arange(lo, min(lo + 1000, n))
        assert segment.sources(docs) == expected[lo : lo + 1000]
    rng = np.random.default_rng(seed)
    scattered = rng.integers(0, n, min(n, 500))
    segment.blocks = BlockCache(256 * 1024)
    for _ in range(2):
        assert segment.sources(scattered) == [expected[d] for d in scattered.tolist()]
    segment.blocks = None
    lo = int(rng.integers(0, n))
    hi = int(rng.integers(lo, n + 1))
    joined = segment.joined_sources(np.arange(lo, hi))
    assert joined.data == b"".join(expected[lo:hi])
    assert joined.lengths.tolist() == [len(s) for s in expected[lo:hi]]
    hashes = np.asarray(segment.slice_hashes, dtype=np.int64)
    for count in (2, 4):
        assert np.array_equal(segment.id_slices(count), np.mod(hashes, count))
        for s in range(count):  # a sliced scroll's batches of 1,000: its blocks, in a run or across
            docs = np.flatnonzero(np.mod(hashes, count) == s)
            for lo in range(0, len(docs), 1000):
                batch = docs[lo : lo + 1000]
                assert segment.sources(batch) == [expected[d] for d in batch.tolist()]


def test_a_merge_of_all_live_parts_copies_their_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No deletes: every block of the merged segment is one of its parts' (no source compressed
    again, no dictionary trained), each part's dictionary kept once; a slice reads its own."""
    sources = [random_sources(2000, seed=1), random_sources(1500, seed=2), random_sources(3000, seed=3)]
    parts = [write_segment(tmp_path / f"p{k}", s) for k, s in enumerate(sources)]

    real = source_blocks.compress

    def no_compressing(sources: object, *args: object, **kwargs: object) -> object:
        assert not len(sources), "a source compressed again"  # type: ignore[arg-type]
        return real(sources, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(source_blocks, "compress", no_compressing)
        merge_segments([(p, None) for p in parts], tmp_path / "merged")
    merged = Segment(tmp_path / "merged")
    assert meta_of(merged)["source_runs"] is True
    assert stored_blocks(merged) == [block for p in parts for block in stored_blocks(p)]
    assert merged._source_dicts == [p._source_dict for p in parts]
    assert (tmp_path / "merged" / "_source.bin").stat().st_size == sum(
        (p.folder / "_source.bin").stat().st_size for p in parts
    )
    expected = [s for part in sources for s in part]
    assert_reads(merged, expected, seed=4)
    read = [blocks_read(merged, docs, monkeypatch) for docs in slices_of(merged, 2)]
    assert read[0].isdisjoint(read[1])


def test_a_slices_batch_reads_each_runs_blocks_of_its_own_in_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sliced scroll's batch of 1,000 (2 or 4 slices) over a segment merged in runs, within a
    run or across runs: one read across the frames of each run's blocks it holds documents of,
    none block by block, only its slice's blocks (the slices' disjoint), the sources as sent."""
    sources = [random_sources(2000, seed=21), random_sources(1500, seed=22), random_sources(3000, seed=23)]
    parts = [write_segment(tmp_path / f"p{k}", s) for k, s in enumerate(sources)]
    merge_segments([(p, None) for p in parts], tmp_path / "merged")
    merged = Segment(tmp_path / "merged")
    expected = [s for part in sources for s in part]
    firsts, _, _, dictionaries = merged._source_runs
    assert firsts.tolist() == [0, 2000, 3500] and dictionaries.tolist() == [0, 1, 2]
    reads: list[int] = []
    real_read = Segment._decompress_into

    def read(self: Segment, number: int, frames: bytes, out: bytearray | memoryview) -> None:
        reads.append(number)
        real_read(self, number, frames, out)

    def one_by_one(self: Segment, indexes: list[int], *, cached: bool = True) -> list[bytes]:
        raise AssertionError(f"blocks read one by one: {indexes}")

    across = 0
    for count in (2, 4):
        read_by = []
        for docs in slices_of(merged, count):
            read_by.append(blocks_read(merged, docs, monkeypatch))
            for lo in range(0, len(docs) - 999, 1000):
                batch = docs[lo : lo + 1000]
                runs = np.unique(np.searchsorted(firsts, batch, side="right") - 1).tolist()
                across += len(runs) > 1
                reads.clear()
                with monkeypatch.context() as patched:
                    patched.setattr(Segment, "_decompress_into", read)
                    patched.setattr(Segment, "source_blocks", one_by_one)
                    assert merged.sources(batch) == [expected[d] for d in batch.tolist()]
                assert reads == dictionaries[runs].tolist()
        for s, mine in enumerate(read_by):
            assert all(mine.isdisjoint(other) for other in read_by[s + 1 :])
    assert across >= 3


def test_groups_with_a_deleted_document_are_compressed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deletes in some groups of a part: the runs of whole live groups around them are copied,
    the groups holding a delete compressed again with the part's dictionary (no new one), and a
    part deleted everywhere is compressed again whole."""
    sources = [random_sources(3000, seed=5), random_sources(2000, seed=6)]
    parts = [write_segment(tmp_path / f"p{k}", s) for k, s in enumerate(sources)]
    group = source_blocks.DICT_BLOCK_DOCS * source_blocks.HASH_BUCKETS
    first = np.ones(3000, dtype=bool)
    first[[5, 6, 700, 701, 2999]] = False  # three groups' worth: copies between, again inside
    second = np.ones(2000, dtype=bool)
    second[::50] = False  # every group holds one
    merge_segments([(parts[0], first), (parts[1], second)], tmp_path / "merged")
    merged = Segment(tmp_path / "merged")
    runs = np.asarray(np.load(tmp_path / "merged" / "_source.runs.npy"))
    assert meta_of(merged)["source_runs"] is True
    assert merged._source_dicts == [parts[0]._source_dict, parts[1]._source_dict]
    # again [0, 64), copied [64, 640), again [640, 704), copied [704, 2944), again the rest of
    # the first part, then the second part again with its own dictionary
    starts = np.asarray(runs[:, 0]).tolist()
    assert starts == [0, group - 2, 10 * group - 2, 11 * group - 4, 46 * group - 4, 3000 - 5]
    assert np.asarray(runs[:, 3]).tolist() == [0, 0, 0, 0, 0, 1]
    # the copied runs' blocks are the part's (groups 1-9 and 11-45), the others written anew
    ours, theirs = stored_blocks(merged), stored_blocks(parts[0])
    assert ours[4:40] == theirs[4:40] and ours[44:184] == theirs[44:184]
    assert ours[:4] != theirs[:4] and ours[40:44] != theirs[40:44]
    assert len(ours) == 184 + 4 + 4 * -(-1960 // group)
    expected = [s for s, keep in zip(sources[0], first, strict=True) if keep]
    expected += [s for s, keep in zip(sources[1], second, strict=True) if keep]
    assert_reads(merged, expected, seed=7)


def test_old_parts_merge_with_new_and_merged_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Doc-order segments (as written before the hash layout), a small plain one, a build's and
    a merged one in runs, with and without deletes, merge into one that reads them all; so does
    a merge of that with a new part."""
    old_sources, small_sources = random_sources(2500, seed=8), random_sources(300, seed=9)
    new_sources, more_sources = random_sources(4000, seed=10), random_sources(1200, seed=11)
    old = in_doc_order(tmp_path / "old", old_sources, monkeypatch)
    small = write_segment(tmp_path / "small", small_sources)
    assert "source_buckets" not in meta_of(old) and "source_buckets" not in meta_of(small)
    new = write_segment(tmp_path / "new", new_sources)
    more = write_segment(tmp_path / "more", more_sources)
    merge_segments([(new, None), (more, None)], tmp_path / "m1")
    m1 = Segment(tmp_path / "m1")
    assert meta_of(m1)["source_runs"] is True
    live_old = np.ones(2500, dtype=bool)
    live_old[1000:1100] = False
    live_m1 = np.ones(5200, dtype=bool)
    live_m1[4100] = False  # in `more`'s first group
    merge_segments([(old, live_old), (small, None), (m1, live_m1)], tmp_path / "m2")
    m2 = Segment(tmp_path / "m2")
    expected = [s for s, keep in zip(old_sources, live_old, strict=True) if keep] + small_sources
    expected += [s for s, keep in zip(new_sources + more_sources, live_m1, strict=True) if keep]
    assert meta_of(m2)["source_runs"] is True
    assert_reads(m2, expected, seed=12)
    last_sources = random_sources(1100, seed=13)
    last = write_segment(tmp_path / "last", last_sources)
    merge_segments([(m2, None), (last, None)], tmp_path / "m3")
    assert_reads(Segment(tmp_path / "m3"), expected + last_sources, seed=14)


def test_a_merge_with_nothing_to_copy_writes_one_run(tmp_path: Path) -> None:
    """Parts too small to copy, or with a delete in every group: compressed again as before, one
    run with a dictionary trained on them."""
    sources = [random_sources(200, seed=15), random_sources(1500, seed=16)]
    parts = [write_segment(tmp_path / f"p{k}", s) for k, s in enumerate(sources)]
    live = np.ones(1500, dtype=bool)
    live[::40] = False
    merge_segments([(parts[0], None), (parts[1], live)], tmp_path / "merged")
    merged = Segment(tmp_path / "merged")
    assert "source_runs" not in meta_of(merged) and merged._source_dict is not None
    assert_reads(merged, sources[0] + [s for s, k in zip(sources[1], live, strict=True) if k], seed=17)


@pytest.mark.parametrize("seed", range(6))
def test_random_parts_and_deletes_read_back_equal_after_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Property: random parts (doc order, plain, hash layout, merged in runs), random deletes
    (none, scattered, in runs), random copy thresholds, merged three times over; every source
    reads back equal to the live documents' in order."""
    rng = np.random.default_rng(100 + seed)
    monkeypatch.setattr(source_blocks, "COPY_MIN_DOCS", int(rng.choice([64, 256, 1000, 5000])))
    made = 0

    def part(kind: str) -> tuple[Segment, list[bytes]]:
        nonlocal made
        made += 1
        n = int(rng.integers(1, 300)) if kind == "plain" else int(rng.integers(1024, 3500))
        sources = random_sources(n, seed=1000 * seed + made)
        folder = tmp_path / f"s{made}"
        if kind == "old":
            return in_doc_order(folder, sources, monkeypatch), sources
        return write_segment(folder, sources), sources

    def deletes(n: int) -> np.ndarray | None:
        how = int(rng.integers(0, 4))
        if how == 0:
            return None
        live = np.ones(n, dtype=bool)
        if how == 1:
            live[rng.integers(0, n, max(1, n // int(rng.integers(5, 400))))] = False
        else:
            for _ in range(int(rng.integers(1, 4))):
                lo = int(rng.integers(0, n))
                live[lo : lo + int(rng.integers(1, 300))] = False
        return live

    pool = [part(str(rng.choice(["old", "plain", "new", "new"]))) for _ in range(5)]
    for merge in range(3):
        chosen = sorted(
            rng.choice(len(pool), size=min(len(pool), int(rng.integers(2, 4))), replace=False).tolist()
        )
        parts, expected = [], []
        for i in chosen:
            segment, sources = pool[i]
            live = deletes(segment.max_doc)
            parts.append((segment, live))
            expected += sources if live is None else [s for s, k in zip(sources, live, strict=True) if k]
        folder = tmp_path / f"merged{merge}"
        merge_segments(parts, folder)
        merged = Segment(folder)
        assert_reads(merged, expected, seed=merge)
        pool = [p for i, p in enumerate(pool) if i not in chosen] + [(merged, expected), part("new")]
