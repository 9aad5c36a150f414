"""The codecs of a segment's `_source` blocks (index/source_blocks.py): LZ4 blocks (`index.codec:
default`) give every source back byte for byte to every reader (a span in one go, blocks one by
one through the cache, a slice's blocks, a merge's copy), as zstd's (`best_compression`, and
every segment written before codecs, which has no `source_codec` key) do; a merge copies a
part's blocks only when they are of its own codec; a codec no writer wrote is refused when the
segment opens."""

from __future__ import annotations

from pathlib import Path

import lz4.block
import numpy as np
import orjson
import pytest

from leafsearch.index import source_blocks
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.segment import Segment, SegmentWriter, to_term_array
from leafsearch.index.segment_build import merge_segments
from tests.index.test_source_blocks import random_sources
from tests.index.test_source_runs import assert_reads, meta_of, stored_blocks

LZ4, ZSTD = source_blocks.LZ4, source_blocks.ZSTD


def write_segment(folder: Path, sources: list[bytes], codec: str) -> Segment:
    n = len(sources)
    writer = SegmentWriter(n, codec=codec)
    writer.set_ids(
        to_term_array([f"{folder.name}-{i}" for i in range(n)]), np.arange(n), np.ones(n, np.int64)
    )
    writer.set_sources(sources)
    writer.write(folder)
    return Segment(folder)


@pytest.mark.parametrize(
    "n", [0, 1, 31, 33, source_blocks.DICT_MIN_DOCS - 1, source_blocks.DICT_MIN_DOCS, 5000]
)
def test_an_lz4_segment_gives_every_source_back(tmp_path: Path, n: int) -> None:
    sources = random_sources(n, seed=n)
    segment = write_segment(tmp_path / "seg", sources, LZ4)
    meta = meta_of(segment)
    assert meta["source_codec"] == LZ4 and meta["source_block_docs"] == source_blocks.LZ4_BLOCK_DOCS
    assert "source_dict" not in meta and not (tmp_path / "seg" / "_source.dict").exists()
    assert segment.source_codec == LZ4 and segment._source_dict is None
    assert ("source_buckets" in meta) == (n >= source_blocks.DICT_MIN_DOCS)
    if n >= source_blocks.DICT_MIN_DOCS:
        assert_reads(segment, sources, seed=n)  # spans, walks, scattered through a cache, slices
    else:
        assert segment.sources(np.arange(n)) == sources
        segment.blocks = BlockCache(64 * 1024)
        docs = np.random.default_rng(n).integers(0, max(n, 1), min(n, 300))
        for _ in range(2):
            assert segment.sources(docs) == [sources[d] for d in docs.tolist()]


def test_lz4_blocks_are_smaller_than_the_sources_and_read_without_zstd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each stored block is one LZ4 block of 32 documents (no zstd frame), and a read of every
    source decompresses them with LZ4 alone."""
    sources = random_sources(3000, seed=2)
    segment = write_segment(tmp_path / "seg", sources, LZ4)
    blocks = stored_blocks(segment)
    assert len(blocks) == len(segment._source_blocks) - 1
    assert all(not block.startswith(b"\x28\xb5\x2f\xfd") for block in blocks)  # zstd's magic
    raw = sum(map(len, sources))
    assert sum(map(len, blocks)) < raw / 2
    sizes = segment._raw_sizes(np.arange(len(blocks)))
    assert b"".join(
        map(lambda b, s: lz4.block.decompress(b, uncompressed_size=s), blocks, sizes)
    ) == b"".join(sources[i] for i in np.argsort(segment._source_places(np.arange(3000))[0]).tolist())

    def no_zstd(*args: object, **kwargs: object) -> object:
        raise AssertionError("a zstd decompressor for LZ4 blocks")

    monkeypatch.setattr(Segment, "_decompressor", no_zstd)
    assert segment.sources(np.arange(3000)) == sources
    assert segment.sources(np.arange(2999, -1, -7)) == sources[2999::-7]


def test_a_segment_written_before_codecs_reads_as_zstd(tmp_path: Path) -> None:
    """The zstd writer writes what every segment before codecs holds: no `source_codec` key, zstd
    frames with the segment's dictionary; it opens as zstd and reads unchanged."""
    sources = random_sources(3000, seed=3)
    segment = write_segment(tmp_path / "old", sources, ZSTD)
    meta = meta_of(segment)
    assert "source_codec" not in meta and meta["source_dict"] is True
    assert all(block.startswith(b"\x28\xb5\x2f\xfd") for block in stored_blocks(segment))
    reopened = Segment(tmp_path / "old")
    assert reopened.source_codec == ZSTD
    assert_reads(reopened, sources, seed=3)


@pytest.mark.parametrize("value", ["gzip", "", "../x", 7, None])
def test_an_unknown_codec_in_meta_is_refused_at_open(tmp_path: Path, value: object) -> None:
    write_segment(tmp_path / "seg", random_sources(100, seed=4), LZ4)
    meta_path = tmp_path / "seg" / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    meta["source_codec"] = value
    meta_path.write_bytes(orjson.dumps(meta))
    with pytest.raises(ValueError, match="unknown codec"):
        Segment(tmp_path / "seg")


def test_an_lz4_span_shorter_than_its_stored_lengths_is_refused(tmp_path: Path) -> None:
    """A walk's span, and blocks one by one, whose blocks hold fewer bytes than the stored lengths
    say (a damaged folder): LZ4's error, not sources cut from a short buffer."""
    sources = random_sources(3000, seed=13)
    segment = write_segment(tmp_path / "seg", sources, LZ4)
    ends = np.array(segment._source_ends)
    ends[-1] += 7  # the last source claims 7 bytes more than its block holds
    segment.__dict__["_source_ends"] = ends
    with pytest.raises(lz4.block.LZ4BlockError, match="are short"):
        segment.sources(np.arange(2000, 3000))
    last = int(segment._source_places(np.array([2999]))[1][0])
    with pytest.raises(lz4.block.LZ4BlockError, match="are short"):
        segment.source_blocks([last], cached=False)
    assert segment.sources(np.arange(0, 1000)) == sources[:1000]


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_a_merge_copies_only_the_parts_of_its_own_codec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """Parts of both codecs, one with deletes: the merged segment's blocks are all of the merge's
    codec; a whole live part of that codec is copied block for block, the others compressed
    again; every source reads right, by every reader."""
    monkeypatch.setattr(source_blocks, "COPY_MIN_DOCS", 256)
    sources = [random_sources(2000, seed=21), random_sources(1500, seed=22), random_sources(3000, seed=23)]
    codecs = [LZ4, ZSTD, codec]
    parts = [
        write_segment(tmp_path / f"p{k}", s, c) for k, (s, c) in enumerate(zip(sources, codecs, strict=True))
    ]
    live = np.ones(1500, dtype=bool)
    live[::5] = False
    merge_segments([(parts[0], None), (parts[1], live), (parts[2], None)], tmp_path / "merged", codec=codec)
    merged = Segment(tmp_path / "merged")
    assert merged.source_codec == codec and ("source_codec" in meta_of(merged)) == (codec == LZ4)
    expected = sources[0] + [s for s, keep in zip(sources[1], live, strict=True) if keep] + sources[2]
    assert_reads(merged, expected, seed=5)
    blocks = stored_blocks(merged)
    zstd_frames = sum(block.startswith(b"\x28\xb5\x2f\xfd") for block in blocks)
    assert zstd_frames == (len(blocks) if codec == ZSTD else 0)
    copied = stored_blocks(parts[2])
    at = len(blocks) - len(copied)
    assert blocks[at:] == copied  # the last part, of the merge's codec and all live: copied
    other = parts[0] if codec == ZSTD else parts[1]  # a part of the other codec: none of its blocks
    assert not set(stored_blocks(other)) & set(blocks)
    dictionaries = [run[3] for run in merged.source_runs()]
    if codec == ZSTD:
        assert dictionaries[-1] == parts[2]._source_dict
    else:
        assert dictionaries == [None] * len(dictionaries)
    merge_segments([(merged, None)], tmp_path / "again", codec=codec)  # a merged one a part again
    again = Segment(tmp_path / "again")
    assert stored_blocks(again) == blocks
    assert again.sources(np.arange(again.max_doc)) == expected
